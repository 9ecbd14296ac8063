// Model tab.
#include "panels/model_panel.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QRadioButton>
#include <QVBoxLayout>

#include "latentlab/architectures.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "panels/format.h"
#include "panels/message_banner.h"

namespace latentlab::ui {

ModelPanel::ModelPanel(QWidget* parent) : QWidget(parent) {
  m_builtinRadio = new QRadioButton(tr("Built-in architecture (random init)"));
  m_builtinRadio->setToolTip(tr("A built-in shape with random weights, for pre-training from scratch"));
  m_folderRadio = new QRadioButton(tr("Hugging Face model folder"));
  m_archBox = new QComboBox;
  for (const auto& n : builtinArchitectureNames()) m_archBox->addItem(QString::fromStdString(n));
  m_folderEdit = new QLineEdit;
  m_folderEdit->setPlaceholderText(tr("/path/to/SmolLM-135M"));
  auto* browse = new QPushButton(tr("Browse…"));
  auto* open = new QPushButton(tr("Open"));

  auto* source = new QGroupBox(tr("Source"));
  auto* sl = new QVBoxLayout(source);
  sl->addWidget(m_builtinRadio);
  sl->addWidget(m_archBox);
  sl->addSpacing(6);
  sl->addWidget(m_folderRadio);
  auto* row = new QHBoxLayout;
  row->addWidget(m_folderEdit, 1);
  row->addWidget(browse);
  row->addWidget(open);
  sl->addLayout(row);

  m_banner = new MessageBanner;
  auto* details = new QGroupBox(tr("Model"));
  m_details = new QFormLayout(details);
  m_details->setLabelAlignment(Qt::AlignRight);
  m_details->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(source);
  layout->addWidget(m_banner);
  layout->addWidget(details);
  layout->addStretch(1);

  connect(m_archBox, &QComboBox::currentTextChanged, this, [this](const QString& n) { selectArchitecture(n); });
  connect(m_builtinRadio, &QRadioButton::toggled, this, [this](bool on) {
    if (on) selectArchitecture(m_archBox->currentText());
  });
  // Back to the folder: its model again (the details, the conversion and the
  // plan described the built-in shape until now).
  connect(m_folderRadio, &QRadioButton::clicked, this, [this] {
    const QString dir = m_folderEdit->text().trimmed();
    if (!dir.isEmpty()) {
      openFolder(dir);
    } else {
      m_folder.clear();
      m_config.reset();
      clearDetails();
      m_openError = tr("no folder given");
      Q_EMIT modelChanged();
    }
  });
  connect(open, &QPushButton::clicked, this, [this] { openFolder(m_folderEdit->text().trimmed()); });
  connect(m_folderEdit, &QLineEdit::returnPressed, this, [this] { openFolder(m_folderEdit->text().trimmed()); });
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString dir =
        QFileDialog::getExistingDirectory(this, tr("Open a Hugging Face model folder"), m_folderEdit->text());
    if (!dir.isEmpty()) openFolder(dir);
  });
  m_builtinRadio->setChecked(true);
}

bool ModelPanel::usesFolder() const {
  return m_folderRadio->isChecked() && !m_folder.isEmpty();
}
QString ModelPanel::architecture() const {
  return m_archBox->currentText();
}

void ModelPanel::clearDetails() {
  while (m_details->rowCount() > 0) m_details->removeRow(0);
}

void ModelPanel::showConfig(const ModelConfig& cfg, std::int64_t parameters, const QString& extra) {
  clearDetails();
  auto add = [&](const QString& label, const QString& value) {
    auto* v = new QLabel(value);
    v->setTextInteractionFlags(Qt::TextSelectableByMouse);
    v->setWordWrap(true);  // a narrow panel wraps the value instead of cutting it
    v->setObjectName(label);
    m_details->addRow(label + QLatin1Char(':'), v);
  };
  // In the checkpoint's own dtype (a run's figures are in the dtype it trains in).
  const KvBudget kv = currentKvBudget(cfg, cfg.torchDType);
  add(tr("Architecture"), QString::fromStdString(cfg.architecture));
  add(tr("Parameters"), humanCount(static_cast<double>(parameters)));
  add(tr("Layers"), QString::number(cfg.numLayers));
  add(tr("Hidden size"), QString::number(cfg.hiddenSize));
  add(tr("Heads / KV heads"),
      QStringLiteral("%1 / %2 (%3)")
          .arg(cfg.numHeads)
          .arg(cfg.numKvHeads)
          .arg(cfg.numHeads == cfg.numKvHeads ? tr("MHA") : tr("GQA, groups of %1").arg(cfg.kvGroupSize())));
  add(tr("Head dim"), QString::number(cfg.headDim));
  add(tr("Vocabulary"), QString::number(cfg.vocabSize));
  add(tr("RoPE θ"), QString::number(cfg.ropeTheta, 'g', 6));
  add(tr("KV cache / token"), QStringLiteral("%1 elements · %2 (%3)")
                                  .arg(QLocale().toString(static_cast<qlonglong>(kv.perToken)),
                                       QLocale().formattedDataSize(kv.bytesPerToken), cacheDTypeName(cfg.torchDType)));
  if (cfg.mla) {
    QString dKv = QString::number(cfg.mla->dKv);
    if (!cfg.mla->layerDKv.empty()) {  // a KV budget spread over the layers
      QStringList each;
      for (int d : cfg.mla->layerDKv) each << (d > 0 ? QString::number(d) : QStringLiteral("–"));
      dKv = tr("%1 per layer").arg(each.join(QLatin1Char(' ')));
    }
    add(tr("MLA"), QStringLiteral("converted: %1, r=%2, d_kv=%3")
                       .arg(choiceText(cfg.mla->ropeStrategy))
                       .arg(cfg.mla->ropePairs)
                       .arg(dKv));
  }
  if (!extra.isEmpty()) add(tr("Weights"), extra);
}

void ModelPanel::selectArchitecture(const QString& name) {
  if (m_archBox->currentText() != name) {
    m_archBox->setCurrentText(name);  // re-enters through currentTextChanged
    return;
  }
  if (!m_builtinRadio->isChecked()) m_builtinRadio->setChecked(true);
  try {
    ModelConfig cfg = builtinArchitecture(name.toStdString());
    m_config = cfg;
    m_openError.clear();
    m_banner->hide();
    showConfig(cfg, countParameters(cfg), {});
  } catch (const Error& e) {
    m_banner->showError(e);
  }
  Q_EMIT modelChanged();
}

bool ModelPanel::openFolder(const QString& dir) {
  m_folderEdit->setText(dir);
  // A failed open leaves no model: the previous one is not what the path box names.
  auto fail = [&](const QString& why) {
    m_folder.clear();
    m_config.reset();
    clearDetails();
    m_folderRadio->setChecked(true);
    m_openError = tr("%1 is not an open model (%2)").arg(dir.isEmpty() ? tr("no folder") : dir, why);
    Q_EMIT modelChanged();
    return false;
  };
  if (dir.isEmpty()) {
    m_banner->showMessage(MessageBanner::Level::Error, tr("No folder given"),
                          tr("Type or browse to a Hugging Face model folder."));
    return fail(tr("no folder given"));
  }
  try {
    ModelSummary s = inspectModel(dir.toStdString());
    m_openError.clear();
    m_folder = dir;
    m_config = s.config;
    m_folderRadio->setChecked(true);
    m_banner->hide();
    showConfig(s.config, s.parameters,
               tr("%1 in %n file(s), %2", nullptr, static_cast<int>(s.weightFiles.size()))
                   .arg(QLocale().formattedDataSize(static_cast<qint64>(s.sizeOnDisk)),
                        QString::fromLatin1(dtypeName(s.weightDType))));
    Q_EMIT modelChanged();
    return true;
  } catch (const Error& e) {
    m_banner->showError(e);
    return fail(QString::fromStdString(e.message()));
  } catch (const std::exception& e) {
    m_banner->showMessage(MessageBanner::Level::Error, QString::fromUtf8(e.what()),
                          tr("Is this a Hugging Face model folder?"));
    return fail(QString::fromUtf8(e.what()));
  }
}

void ModelPanel::applyTo(RunSpec& spec) const {
  if (usesFolder()) {
    spec.modelDir = m_folder.toStdString();
    spec.architecture.clear();
    if (spec.kind == RunKind::Pretrain) spec.kind = RunKind::Finetune;
  } else {
    spec.architecture = architecture().toStdString();
    spec.modelDir.clear();
    spec.kind = RunKind::Pretrain;
  }
}

void ModelPanel::loadFrom(const RunSpec& spec) {
  if (!spec.modelDir.empty()) {
    if (!openFolder(QString::fromStdString(spec.modelDir))) m_folder = QString::fromStdString(spec.modelDir);
  } else if (!spec.architecture.empty()) {
    selectArchitecture(QString::fromStdString(spec.architecture));
  }
}

QString ModelPanel::fieldText(const QString& label) const {
  auto* l = findChild<QLabel*>(label);
  return l != nullptr ? l->text() : QString();
}

}  // namespace latentlab::ui
