// The attention variant of a pre-training run; see attention_panel.h.
#include "panels/attention_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QSpinBox>

#include "latentlab/architectures.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "panels/format.h"

namespace latentlab::ui {

namespace {

QSpinBox* dimsBox(const QString& autoText, int max) {
  auto* s = new QSpinBox;
  s->setRange(0, max);
  s->setSpecialValueText(autoText);  // 0: the engine's default
  return s;
}

QString percent(double part, double whole) {
  return whole > 0 ? QStringLiteral("%1%2%")
                         .arg(part >= whole ? QStringLiteral("+") : QString())
                         .arg(100.0 * (part - whole) / whole, 0, 'f', 1)
                   : QString();
}

}  // namespace

AttentionPanel::AttentionPanel(QWidget* parent) : QGroupBox(tr("Attention (pre-training from scratch)"), parent) {
  m_variant = new QComboBox;
  m_variant->addItem(tr("the architecture's own"), QString());
  m_variant->addItem(tr("MHA"), QStringLiteral("mha"));
  m_variant->addItem(tr("GQA"), QStringLiteral("gqa"));
  m_variant->addItem(tr("MLA"), QStringLiteral("mla"));
  m_variant->addItem(tr("GLA-2"), QStringLiteral("gla-2"));
  m_variant->addItem(tr("GLA-4"), QStringLiteral("gla-4"));
  m_variant->addItem(tr("MLRA-2"), QStringLiteral("mlra-2"));
  m_variant->addItem(tr("MLRA-4"), QStringLiteral("mlra-4"));
  m_group = dimsBox(tr("auto"), 64);
  m_group->setToolTip(tr("Query heads per KV head (auto: the base's own, 4 for an MHA base)"));
  m_dC = dimsBox(tr("auto (4 d_h)"), 65536);
  m_dC->setToolTip(tr("KV latent dims d_c (auto: 4 × head dim, 512 at d_h 128)"));
  m_qLora = dimsBox(tr("auto"), 65536);
  m_qLora->setToolTip(tr("Query LoRA rank (auto: the paper's rule, d/2 for MLA, d/3 for GLA and MLRA)"));
  m_dRope = dimsBox(tr("auto (d_h/2)"), 4096);
  m_dRope->setToolTip(tr("Dims of the shared RoPE key d_R (auto: half the head dim)"));
  m_dNope = dimsBox(tr("auto (d_h)"), 4096);
  m_dV = dimsBox(tr("auto (d_h)"), 4096);
  m_scaled = new QCheckBox(tr("MLRA scale factors"));
  m_scaled->setChecked(true);
  m_scaled->setToolTip(tr("The MLRA paper's scale factors (off: the no-scale ablation)"));
  m_match = new QComboBox;
  m_match->addItem(tr("the architecture's total"), QStringLiteral("architecture"));
  m_match->addItem(tr("a target total"), QStringLiteral("target"));
  m_match->addItem(tr("none (keep the MLP width)"), QStringLiteral("none"));
  m_match->setToolTip(tr("The MLP width is adjusted so that the parameter count matches"));
  m_target = new QLineEdit;
  m_target->setPlaceholderText(tr("parameters, e.g. 1300000"));
  m_tp = new QSpinBox;
  m_tp->setRange(1, 64);
  m_tp->setToolTip(tr("Tensor-parallel degree of the KV-cache preview (the cache per device)"));
  m_preview = new QLabel;
  m_preview->setWordWrap(true);
  m_preview->setTextInteractionFlags(Qt::TextSelectableByMouse);

  m_form = new QFormLayout(this);
  m_form->setLabelAlignment(Qt::AlignRight);
  m_form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  m_form->setRowWrapPolicy(QFormLayout::WrapLongRows);
  m_form->addRow(tr("Attention:"), m_variant);
  m_form->addRow(tr("GQA group:"), m_group);
  m_form->addRow(tr("KV latent d_c:"), m_dC);
  m_form->addRow(tr("Q LoRA rank:"), m_qLora);
  m_form->addRow(tr("RoPE dims d_R:"), m_dRope);
  m_form->addRow(tr("NoPE dims / head:"), m_dNope);
  m_form->addRow(tr("Value dims / head:"), m_dV);
  m_form->addRow(QString(), m_scaled);
  m_form->addRow(tr("Match parameters to:"), m_match);
  m_form->addRow(tr("Target parameters:"), m_target);
  m_form->addRow(tr("Tensor parallel:"), m_tp);
  m_form->addRow(m_preview);

  for (QSpinBox* s : {m_group, m_dC, m_qLora, m_dRope, m_dNope, m_dV, m_tp}) {
    connect(s, &QSpinBox::valueChanged, this, &AttentionPanel::update);
  }
  connect(m_variant, &QComboBox::currentIndexChanged, this, &AttentionPanel::update);
  connect(m_match, &QComboBox::currentIndexChanged, this, &AttentionPanel::update);
  connect(m_scaled, &QCheckBox::toggled, this, &AttentionPanel::update);
  connect(m_target, &QLineEdit::textChanged, this, &AttentionPanel::update);
  update();
}

void AttentionPanel::setBase(const std::optional<ModelConfig>& base) {
  m_base = base && !base->mla && !base->latent ? base : std::nullopt;
  update();
}

AttentionOptions AttentionPanel::options() const {
  AttentionOptions o;
  o.gqaGroup = m_group->value();
  o.dC = m_dC->value();
  o.qLoraRank = m_qLora->value();
  o.dRope = m_dRope->value();
  o.dNope = m_dNope->value();
  o.dV = m_dV->value();
  o.scaled = m_scaled->isChecked();
  o.match = m_match->currentData().toString().toStdString();
  o.targetParameters = m_target->text().trimmed().toLongLong();
  return o;
}

void AttentionPanel::applyTo(RunSpec& spec) const {
  if (!m_base || spec.kind != RunKind::Pretrain) {
    spec.attention.clear();  // a variant is for pre-training a built-in shape only
    return;
  }
  spec.attention = m_variant->currentData().toString().toStdString();
  spec.attentionOptions = options();
}

void AttentionPanel::loadFrom(const RunSpec& spec) {
  const int v = m_variant->findData(QString::fromStdString(spec.attention));
  m_variant->setCurrentIndex(v >= 0 ? v : 0);
  const AttentionOptions& o = spec.attentionOptions;
  m_group->setValue(o.gqaGroup);
  m_dC->setValue(o.dC);
  m_qLora->setValue(o.qLoraRank);
  m_dRope->setValue(o.dRope);
  m_dNope->setValue(o.dNope);
  m_dV->setValue(o.dV);
  m_scaled->setChecked(o.scaled);
  const int m = m_match->findData(QString::fromStdString(o.match));
  m_match->setCurrentIndex(m >= 0 ? m : 0);
  m_target->setText(o.targetParameters > 0 ? QString::number(o.targetParameters) : QString());
  update();
}

QString AttentionPanel::preview() const {
  return m_preview->text();
}

void AttentionPanel::setCacheDType(DType dtype) {
  if (dtype == m_cacheDType) return;
  m_cacheDType = dtype;
  update();
}

void AttentionPanel::update() {
  const QString variant = m_variant->currentData().toString();
  const bool latent = variant == QLatin1String("mla") || variant.startsWith(QLatin1String("gla")) ||
                      variant.startsWith(QLatin1String("mlra"));
  // Only the rows the chosen variant reads.
  m_form->setRowVisible(m_group, variant == QLatin1String("gqa"));
  for (QWidget* w : {static_cast<QWidget*>(m_dC), static_cast<QWidget*>(m_qLora), static_cast<QWidget*>(m_dRope),
                     static_cast<QWidget*>(m_dNope), static_cast<QWidget*>(m_dV)}) {
    m_form->setRowVisible(w, latent);
  }
  m_form->setRowVisible(m_scaled, variant.startsWith(QLatin1String("mlra")));
  m_form->setRowVisible(m_match, !variant.isEmpty());
  m_form->setRowVisible(m_target, !variant.isEmpty() && m_match->currentData().toString() == QLatin1String("target"));
  setEnabled(m_base.has_value());

  QString reason;
  QString text;
  if (!m_base) {
    text = tr("Choose a built-in architecture on the Model tab to pre-train a variant.");
  } else {
    try {
      const ModelConfig cfg =
          variant.isEmpty() ? *m_base : attentionVariant(*m_base, variant.toStdString(), options(), "attention");
      const std::int64_t params = countParameters(cfg), baseParams = countParameters(*m_base);
      const KvBudget kv = currentKvBudget(cfg, m_cacheDType, m_tp->value());
      const KvBudget kvBase = currentKvBudget(*m_base, m_cacheDType, m_tp->value());
      const QLocale loc;
      text = tr("Parameters: %1 (base %2, %3)\nMLP width: %4 (base %5)\nKV cache / token (%9): %6 (base %7, %8)")
                 .arg(humanCount(static_cast<double>(params)), humanCount(static_cast<double>(baseParams)),
                      percent(static_cast<double>(params), static_cast<double>(baseParams)))
                 .arg(cfg.intermediateSize)
                 .arg(m_base->intermediateSize)
                 .arg(loc.formattedDataSize(kv.bytesPerToken, 2), loc.formattedDataSize(kvBase.bytesPerToken, 2),
                      percent(static_cast<double>(kv.bytesPerToken), static_cast<double>(kvBase.bytesPerToken)))
                 .arg(cacheDTypeName(m_cacheDType));
      if (m_tp->value() > 1) {
        text += tr("\nPer device at tensor parallel %1: %2 (base %3)")
                    .arg(m_tp->value())
                    .arg(loc.formattedDataSize(kv.perDeviceBytesPerToken, 2),
                         loc.formattedDataSize(kvBase.perDeviceBytesPerToken, 2));
      }
    } catch (const Error& e) {
      reason = QString::fromStdString(e.message());
      text = reason;
    }
  }
  m_preview->setText(text);
  Q_EMIT changed();
  m_preview->setStyleSheet(reason.isEmpty() ? QString() : QStringLiteral("color: #c62828;"));
  if (reason != m_reason) {
    m_reason = reason;
    Q_EMIT validityChanged(reason);
  }
}

}  // namespace latentlab::ui
