// Conversion tab with the live KV-cache preview.
#include "panels/conversion_panel.h"

#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QSpinBox>
#include <QVBoxLayout>

#include "charts/kv_allocation_view.h"
#include "latentlab/convert.h"
#include "latentlab/error.h"
#include "latentlab/vocabulary.h"
#include "panels/format.h"
#include "panels/message_banner.h"

namespace latentlab::ui {

namespace {

QSpinBox* spin(int lo, int hi, int value, const QString& special = {}) {
  auto* s = new QSpinBox;
  s->setRange(lo, hi);
  s->setValue(value);
  if (!special.isEmpty()) s->setSpecialValueText(special);
  s->setAccelerated(true);
  return s;
}

}  // namespace

ConversionPanel::ConversionPanel(QWidget* parent) : QWidget(parent) {
  createFields();
  buildLayout();
  connectSignals();
  update();
}

// The settings' fields; the group boxes lay them out.
void ConversionPanel::createFields() {
  m_method = new QComboBox;
  m_method->addItem(tr("None (keep the original attention)"), QStringLiteral("none"));
  m_method->addItem(tr("MHA2MLA (partial RoPE + low-rank KV)"), QStringLiteral("mha2mla"));
  m_method->addItem(tr("DeepSeek-V3 (RoRoPE, exportable)"), QStringLiteral("deepseek"));
  // The combos size to a short text: the tab keeps its width whatever the entries say.
  m_method->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_method->setMinimumContentsLength(18);
  m_methodTip =
      tr("MHA2MLA keeps RoPE on r pairs of every KV head. The DeepSeek target rotates the KV heads' "
         "RoPE components into one shared key (RoRoPE) and gives the latent an RMSNorm: the result is "
         "DeepSeek-V3 attention, which Export writes for transformers, vLLM and SGLang.");
  m_method->setToolTip(m_methodTip);
  m_strategy = new QComboBox;
  for (const std::string& n : choiceNames<RopeStrategy>()) {  // the paper's S_x names
    const QString name = QString::fromStdString(n);
    m_strategy->addItem(n == "full" ? tr("Full RoPE") : QStringLiteral("S_") + name, name);
  }
  m_strategy->setToolTip(
      tr("Which RoPE frequency pairs each head keeps: S_2-norm keeps the pairs with the largest "
         "query·key norms; S_high/S_low the highest/lowest frequencies; S_uniform evenly spaced ones"));
  m_r = spin(0, 512, 0, tr("default (d_h/16)"));
  m_dKv = spin(1, 4096, 16);
  m_layers = new QLineEdit(QStringLiteral("all"));
  m_layers->setObjectName(QStringLiteral("conversionLayers"));
  m_layers->setToolTip(
      tr("Which decoder layers to convert: all, none, every:K (every K-th), last:N, or a list such as 0,2,5. "
         "The others keep their original attention and K/V cache (a hybrid model)."));
  m_kvBudget = new QLineEdit;
  m_kvBudget->setObjectName(QStringLiteral("kvBudget"));
  m_kvBudget->setPlaceholderText(tr("none: d_kv in every layer"));
  m_kvBudget->setToolTip(
      tr("A KV-cache budget spread over the layers instead of one d_kv: bytes per token (12288), a saving (75%) "
         "or d_kv:8 (the bytes of d_kv 8 everywhere). Each layer's d_kv is chosen from the spectrum of its "
         "key/value projections; the chart below shows the split."));
  m_svd = new QComboBox;
  m_svd->addItem(tr("Joint [K_nope, V]"), QStringLiteral("joint"));
  m_svd->addItem(tr("Split K / V"), QStringLiteral("split"));
  m_score = new QComboBox;
  m_score->addItem(tr("product"), QStringLiteral("product"));
  m_score->addItem(tr("sum"), QStringLiteral("sum"));
  m_factorise = new QComboBox;
  m_factorise->addItem(tr("SVD of the weights"), QStringLiteral("weights"));
  m_factorise->addItem(tr("PCA of activations"), QStringLiteral("activations"));
  m_factorise->setToolTip(
      tr("The latent minimises the error of the projection weights, or of their outputs on "
         "calibration text (whitened SVD)"));
  m_ropeWidth = spin(0, 65536, 0, tr("default (2·r·n_kv)"));
  m_ropeWidth->setSingleStep(2);
  m_ropeWidth->setToolTip(
      tr("d_R: the dims of the one RoPE key all heads share. The default holds as many RoPE "
         "dims as MHA2MLA at the same r, so both targets cost the same KV bytes."));
  m_fold = spin(1, 64, 1);
  m_fold->setToolTip(tr("FreqFold: adjacent frequency pairs folded into one group before the PCA"));
  m_calibSeqs = spin(1, 100000, 64);
  m_calibLen = spin(8, 65536, 256);
  m_context = spin(1, 1 << 20, 4096);
  m_context->setSingleStep(1024);
  m_batch = spin(1, 4096, 1);
  m_cacheDType = new QComboBox;
  m_cacheDType->addItem(QStringLiteral("bf16"), static_cast<int>(DType::BF16));
  m_cacheDType->addItem(QStringLiteral("fp16"), static_cast<int>(DType::F16));
  m_cacheDType->addItem(QStringLiteral("fp32"), static_cast<int>(DType::F32));
}

QGroupBox* ConversionPanel::buildMethodBox() {
  auto* methodBox = new QGroupBox(tr("Method"));
  auto* ml = new QFormLayout(methodBox);
  ml->addRow(tr("Conversion:"), m_method);
  return methodBox;
}

// The settings of the chosen method, in m_settingsBox.
void ConversionPanel::buildSettingsBox() {
  m_settingsBox = new QGroupBox(tr("Conversion settings"));
  auto* sl = new QFormLayout(m_settingsBox);
  sl->setLabelAlignment(Qt::AlignRight);
  sl->addRow(tr("RoPE strategy:"), m_strategy);
  sl->addRow(tr("Kept RoPE pairs r:"), m_r);
  sl->addRow(tr("d_kv per KV head:"), m_dKv);
  sl->addRow(tr("KV budget:"), m_kvBudget);
  sl->addRow(tr("Converted layers:"), m_layers);
  sl->addRow(tr("SVD:"), m_svd);
  sl->addRow(tr("2-norm score:"), m_score);
  sl->addRow(tr("RoPE key width d_R:"), m_ropeWidth);
  sl->addRow(tr("Frequency fold:"), m_fold);
  sl->addRow(tr("Factorise:"), m_factorise);
  sl->addRow(tr("Calibration sequences:"), m_calibSeqs);
  sl->addRow(tr("Calibration length:"), m_calibLen);
  m_ropeNote = new QLabel;
  m_ropeNote->setWordWrap(true);
  // In the panel's text colour: it describes the choice made, not a disabled field.
  sl->addRow(m_ropeNote);
}

QGroupBox* ConversionPanel::buildPreviewBox() {
  auto* preview = new QGroupBox(tr("KV-cache preview"));
  auto* pl = new QFormLayout(preview);
  pl->setLabelAlignment(Qt::AlignRight);
  pl->addRow(tr("Context length:"), m_context);
  pl->addRow(tr("Batch:"), m_batch);
  pl->addRow(tr("Cache dtype:"), m_cacheDType);
  m_perToken = new QLabel;
  m_perToken->setObjectName(QStringLiteral("kvPerToken"));
  m_perToken->setWordWrap(true);
  m_saving = new QLabel;
  m_saving->setObjectName(QStringLiteral("kvSaving"));
  QFont big = m_saving->font();
  big.setPointSizeF(big.pointSizeF() * 1.5);
  big.setBold(true);
  m_saving->setFont(big);
  m_total = new QLabel;
  m_total->setObjectName(QStringLiteral("kvTotal"));
  m_total->setWordWrap(true);
  pl->addRow(tr("Per token:"), m_perToken);
  pl->addRow(tr("Saving:"), m_saving);
  pl->addRow(tr("Whole cache:"), m_total);
  m_quantized = new QLabel;
  m_quantized->setObjectName(QStringLiteral("kvQuantized"));
  m_quantized->setWordWrap(true);
  const KvQuantSettings q = kPreviewQuant;
  m_quantized->setToolTip(tr("The same cache quantized to %1 codes (docs/kv_quant.md): a scale and a zero-point per "
                             "group of values (%2, or the largest power of two under it that divides every row), "
                             "the newest %3 tokens kept exact; generate, eval and the Evaluate and Try it tabs "
                             "offer it")
                              .arg(QString::fromLatin1(kvQuantName(q.bits)))
                              .arg(q.group)
                              .arg(q.residual));
  pl->addRow(tr("With %1:").arg(QString::fromLatin1(kvQuantName(q.bits))), m_quantized);
  return preview;
}

QGroupBox* ConversionPanel::buildAllocationBox() {
  m_allocationBox = new QGroupBox(tr("KV budget per layer"));
  auto* al = new QVBoxLayout(m_allocationBox);
  m_allocationLabel = new QLabel;
  m_allocationLabel->setObjectName(QStringLiteral("kvAllocationNote"));
  m_allocationLabel->setWordWrap(true);
  m_allocationView = new KvAllocationView;
  al->addWidget(m_allocationLabel);
  al->addWidget(m_allocationView);
  m_allocationBox->hide();
  return m_allocationBox;
}

void ConversionPanel::buildLayout() {
  QGroupBox* methodBox = buildMethodBox();
  buildSettingsBox();
  QGroupBox* preview = buildPreviewBox();
  QGroupBox* allocation = buildAllocationBox();

  m_banner = new MessageBanner;
  m_banner->setDismissable(false);
  m_banner->setObjectName(QStringLiteral("conversionBanner"));

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(methodBox);
  layout->addWidget(m_settingsBox);
  layout->addWidget(m_banner);
  layout->addWidget(preview);
  layout->addWidget(allocation);
  layout->addStretch(1);
}

void ConversionPanel::connectSignals() {
  auto changed = [this] { update(); };
  // Each target starts on its usual factorisation: the DeepSeek target is defined by its activations.
  connect(m_method, &QComboBox::currentIndexChanged, this, [this] {
    m_factorise->setCurrentIndex(m_factorise->findData(
        target() == QLatin1String("deepseek") ? QStringLiteral("activations") : QStringLiteral("weights")));
  });
  connect(m_method, &QComboBox::currentIndexChanged, this, changed);
  connect(m_strategy, &QComboBox::currentIndexChanged, this, changed);
  connect(m_svd, &QComboBox::currentIndexChanged, this, changed);
  connect(m_factorise, &QComboBox::currentIndexChanged, this, changed);
  connect(m_ropeWidth, &QSpinBox::valueChanged, this, changed);
  connect(m_fold, &QSpinBox::valueChanged, this, changed);
  connect(m_cacheDType, &QComboBox::currentIndexChanged, this, changed);
  connect(m_r, &QSpinBox::valueChanged, this, changed);
  connect(m_dKv, &QSpinBox::valueChanged, this, changed);
  connect(m_context, &QSpinBox::valueChanged, this, changed);
  connect(m_batch, &QSpinBox::valueChanged, this, changed);
  connect(m_layers, &QLineEdit::textChanged, this, changed);
  connect(m_kvBudget, &QLineEdit::textChanged, this, changed);
  connect(m_score, &QComboBox::currentIndexChanged, this, changed);
  connect(m_calibSeqs, &QSpinBox::valueChanged, this, changed);
  connect(m_calibLen, &QSpinBox::valueChanged, this, changed);
  // The split needs the model's spectra from the engine: asked once the edits pause.
  m_allocationTimer.setSingleShot(true);
  m_allocationTimer.setInterval(500);
  connect(&m_allocationTimer, &QTimer::timeout, this, [this] {
    if (m_budgetLimits && m_reason.isEmpty()) Q_EMIT allocationWanted();
  });
}

void ConversionPanel::setModelConfig(const std::optional<ModelConfig>& cfg) {
  m_config = cfg;
  m_allocationKey.clear();  // another model: its own spectra
  update();
}

void ConversionPanel::setConvertible(bool convertible) {
  m_convertible = convertible;
  if (!convertible) setTarget(QStringLiteral("none"));
  m_method->setEnabled(convertible);
  m_method->setToolTip(convertible
                           ? m_methodTip
                           : tr("A built-in shape has no weights to convert: it is pre-trained from scratch "
                                "(choose its attention on the Training tab). Open a model folder to convert it."));
}

void ConversionPanel::setMethod(bool mha2mla) {
  setTarget(mha2mla ? QStringLiteral("mha2mla") : QStringLiteral("none"));
}
void ConversionPanel::setTarget(const QString& target) {
  const int i = m_method->findData(target);
  if (i >= 0) m_method->setCurrentIndex(i);
}
QString ConversionPanel::target() const {
  return m_method->currentData().toString();
}
void ConversionPanel::setRopeStrategy(const QString& s) {
  const int i = m_strategy->findData(s);
  if (i >= 0) m_strategy->setCurrentIndex(i);
}
void ConversionPanel::setRopePairs(int r) {
  m_r->setValue(r);
}
void ConversionPanel::setDKv(int dKv) {
  m_dKv->setValue(dKv);
}
void ConversionPanel::setSvd(const QString& svd) {
  const int i = m_svd->findData(svd);
  if (i >= 0) m_svd->setCurrentIndex(i);
}
void ConversionPanel::setLayers(const QString& layers) {
  m_layers->setText(layers);
}
void ConversionPanel::setKvBudget(const QString& budget) {
  m_kvBudget->setText(budget);
}

void ConversionPanel::setAllocation(const KvAllocation& a) {
  if (!m_budgetLimits || a.limits.budgetBytes != m_budgetLimits->budgetBytes ||
      a.layerDKv.size() != m_uniformDKv.size())
    return;  // an answer for settings changed since
  m_allocationView->setAllocation(a);
  double kept = 0.0, uniformKept = 0.0;
  int converted = 0;
  for (std::size_t l = 0; l < a.layerDKv.size(); ++l) {
    if (a.layerDKv[l] == 0) continue;
    kept += a.kept[l];
    uniformKept += a.uniformKept[l];
    ++converted;
  }
  const QLocale loc;
  m_allocationLabel->setText(
      tr("Budget %1 per token at the model's %7: each layer's own d_kv uses %2, d_kv %3 everywhere %4. Share of "
         "the layers' squared singular values kept, on average: %5% against %6%.")
          .arg(loc.formattedDataSize(a.limits.budgetBytes, 2), loc.formattedDataSize(a.bytesPerToken, 2))
          .arg(a.limits.uniformDKv)
          .arg(loc.formattedDataSize(a.uniformBytesPerToken, 2))
          .arg(100.0 * kept / std::max(1, converted), 0, 'f', 1)
          .arg(100.0 * uniformKept / std::max(1, converted), 0, 'f', 1)
          .arg(cacheDTypeName(m_config->torchDType)));
  if (a.heldOutLoss >= 0) {
    m_allocationLabel->setText(m_allocationLabel->text() +
                               tr(" Validation loss right after conversion: %1 with each layer's own d_kv, %2 with "
                                  "d_kv %3 everywhere.")
                                   .arg(a.heldOutLoss, 0, 'f', 4)
                                   .arg(a.uniformHeldOutLoss, 0, 'f', 4)
                                   .arg(a.limits.uniformDKv));
  }
}

void ConversionPanel::setAllocationFailed(const QString& message) {
  m_allocationLabel->setText(tr("The per-layer split could not be computed: %1").arg(message));
}

QString ConversionPanel::allocationNote() const {
  return m_allocationLabel->text();
}

void ConversionPanel::resolveLayersAndBudget(KvSettings& s) {
  m_budgetLimits.reset();
  if (s.method != KvMethod::Mha2Mla) return;
  const QString layers = m_layers->text().trimmed();
  try {
    s.layers = resolveLayerSelection(layers.isEmpty() ? std::string("all") : layers.toStdString(), m_config->numLayers,
                                     "Converted layers");
    m_convertedLayers = s.layers;
  } catch (const Error& e) {
    m_reason = QString::fromStdString(e.message());
    return;
  }
  const QString budget = m_kvBudget->text().trimmed();
  if (budget.isEmpty()) return;
  // Bytes are counted at the model's own dtype, as the run counts them
  // (the preview's cache dtype only changes the figures shown above).
  KvBudgetLimits lim;
  if (auto why = resolveKvBudget(*m_config, s, m_config->torchDType, budget.toStdString(), "KV budget", &lim)) {
    m_reason = QString::fromStdString(*why);
    return;
  }
  m_budgetLimits = lim;
  s.dKv = lim.uniformDKv;  // the preview's figures: the uniform split of the same bytes
}

void ConversionPanel::setContext(int contextLength, int batch) {
  m_context->setValue(contextLength);
  m_batch->setValue(batch);
}

bool ConversionPanel::conversionEnabled() const {
  return target() != QLatin1String("none");
}

KvSettings ConversionPanel::settings() const {
  KvSettings s;
  const bool deepseek = target() == QLatin1String("deepseek");
  s.method = !conversionEnabled() ? KvMethod::None : deepseek ? KvMethod::DeepSeek : KvMethod::Mha2Mla;
  s.ropeWidth = m_ropeWidth->value();
  s.freqFold = m_fold->value();
  s.ropePairs = m_r->value();
  s.dKv = m_dKv->value();
  s.svd = m_svd->currentData().toString() == QLatin1String("split") ? SvdMethod::Split : SvdMethod::Joint;
  // The strategy (greyed for the DeepSeek target) is the MHA2MLA method's only.
  const QString strategy = deepseek ? QString() : m_strategy->currentData().toString();
  s.fullRope = strategy == QLatin1String("full");
  s.uniformStrategy = strategy == QLatin1String("uniform");
  return s;
}

std::optional<KvQuantBudget> ConversionPanel::quantizedBudget(const KvSettings& s, DType dtype) const {
  // The default group, or the largest power of two under it that divides every cached row.
  const ModelConfig converted = convertedCacheConfig(*m_config, s);
  for (KvQuantSettings q = kPreviewQuant; q.group >= 1; q.group /= 2) {
    if (!checkKvQuant(q, converted, 0)) return kvQuantBudget(converted, q, dtype);
  }
  return std::nullopt;
}

QString ConversionPanel::quantizedText(const KvSettings& s, DType dtype) const {
  const auto b = quantizedBudget(s, dtype);
  if (!b) return tr("no group of values fits these rows");
  const QLocale loc;
  const qint64 tokens = m_context->value(), batch = m_batch->value();
  const auto whole = static_cast<qint64>(b->bytesFor(tokens) * batch);
  const auto original = static_cast<qint64>(m_budget->originalBytesPerToken * tokens * batch);
  return tr("%1 per token past the newest %2 (groups of %3) · %4 for %5 tokens × batch %6, %7% of the original "
            "cache")
      .arg(loc.formattedDataSize(b->quantizedBytesPerToken, 2))
      .arg(b->settings.residual)
      .arg(b->settings.group)
      .arg(loc.formattedDataSize(whole, 2), loc.toString(tokens))
      .arg(batch)
      .arg(100.0 * static_cast<double>(whole) / static_cast<double>(std::max<qint64>(original, 1)), 0, 'f', 1);
}

QString ConversionPanel::savingText() const {
  if (!m_budget) return {};
  // KvBudget::saving is the relative change (negative: smaller); a saving is
  // the reduction, positive, and a cache that grows shows a negative saving.
  const double saved = m_budget->saving == 0.0 ? 0.0 : -m_budget->saving;
  return QStringLiteral("%1%").arg(saved * 100.0, 0, 'f', 2);
}

QString ConversionPanel::bytesText() const {
  if (!m_budget) return {};
  return QStringLiteral("%1 B → %2 B").arg(m_budget->originalBytesPerToken).arg(m_budget->bytesPerToken);
}

// The per-layer chart: shown for a possible budget; the uniform bars at
// once, the layers' own after the engine has read the spectra (asked again
// only when what decides the split changed).
void ConversionPanel::updateAllocationBox() {
  const bool show = m_budgetLimits && m_reason.isEmpty() && conversionEnabled() && m_convertible;
  m_allocationBox->setVisible(show);
  if (!show) {
    m_allocationTimer.stop();
    m_allocationKey.clear();
    return;
  }
  const QStringList parts = {m_kvBudget->text().trimmed(),         m_layers->text().trimmed(),
                             m_strategy->currentData().toString(), QString::number(m_r->value()),
                             m_svd->currentData().toString(),      m_factorise->currentData().toString(),
                             m_score->currentData().toString(),    QString::number(m_calibSeqs->value()),
                             QString::number(m_calibLen->value())};
  const QString key = parts.join(QLatin1Char('|'));
  if (key == m_allocationKey) return;
  m_allocationKey = key;
  m_uniformDKv.clear();
  for (int l = 0; l < m_config->numLayers; ++l) {  // the layers field as resolveLayersAndBudget read it
    const bool converted =
        !m_convertedLayers || std::binary_search(m_convertedLayers->begin(), m_convertedLayers->end(), l);
    m_uniformDKv.push_back(converted ? m_budgetLimits->uniformDKv : 0);
  }
  m_allocationView->setUniform(m_uniformDKv);
  m_allocationLabel->setText(tr("Reading each layer's spectrum from the model…"));
  m_allocationTimer.start();
}

void ConversionPanel::update() {
  const bool on = conversionEnabled();
  const bool deepseek = target() == QLatin1String("deepseek");
  m_settingsBox->setEnabled(on);
  m_strategy->setEnabled(on && !deepseek);
  m_svd->setEnabled(on && !deepseek);
  m_score->setEnabled(on && !deepseek && m_strategy->currentData().toString() == QLatin1String("2-norm"));
  m_r->setEnabled(on && (deepseek || m_strategy->currentData().toString() != QLatin1String("full")));
  m_ropeWidth->setEnabled(on && deepseek);
  m_fold->setEnabled(on && deepseek);
  m_layers->setEnabled(on && !deepseek);
  m_kvBudget->setEnabled(on && !deepseek);
  const bool budgeted = !deepseek && !m_kvBudget->text().trimmed().isEmpty();
  m_dKv->setEnabled(on && !budgeted);
  m_dKv->setSuffix(budgeted ? tr("  (the budget sets it)") : QString());
  m_reason.clear();
  m_budget.reset();
  m_budgetLimits.reset();
  if (!m_config) {
    m_perToken->setText(tr("Open a model to preview its KV cache."));
    m_saving->clear();
    m_total->clear();
    m_quantized->clear();
    m_banner->hide();
    updateAllocationBox();
    Q_EMIT validityChanged(m_reason);
    return;
  }
  KvSettings s = settings();
  const auto dtype = static_cast<DType>(m_cacheDType->currentData().toInt());
  resolveLayersAndBudget(s);
  if (!m_reason.isEmpty()) {
    // (the layers' or the budget's refusal)
  } else if (auto why = checkKvSettings(*m_config, s)) {
    m_reason = QString::fromStdString(*why);
  } else {
    try {
      m_budget = computeKvBudget(*m_config, s, dtype);
    } catch (const Error& e) {
      m_reason = QString::fromStdString(e.message());
    }
  }
  if (!m_reason.isEmpty()) {
    m_banner->showMessage(MessageBanner::Level::Error, tr("These settings are impossible for this model"), m_reason);
    m_perToken->setText(QStringLiteral("–"));
    m_saving->setText(QStringLiteral("–"));
    m_saving->setStyleSheet({});
    m_total->setText(QStringLiteral("–"));
    m_quantized->setText(QStringLiteral("–"));
    m_ropeNote->clear();
    updateAllocationBox();
    Q_EMIT validityChanged(m_reason);
    return;
  }
  m_banner->hide();
  const KvBudget& b = *m_budget;
  const QLocale loc;
  const QString perLayer =
      b.nopeLayers > 0 ? tr("%1 → %2 elements per RoPE layer, %3 per NoPE layer")
                             .arg(b.originalPerTokenPerLayer)
                             .arg(b.perTokenPerLayer)
                             .arg(b.nopePerTokenPerLayer)
                       : tr("%1 → %2 elements per layer").arg(b.originalPerTokenPerLayer).arg(b.perTokenPerLayer);
  m_perToken->setText(
      tr("%1 · %2 → %3 per token")
          .arg(perLayer, loc.formattedDataSize(b.originalBytesPerToken, 2), loc.formattedDataSize(b.bytesPerToken, 2)));
  m_saving->setText(savingText());
  m_saving->setStyleSheet(b.saving < 0   ? QStringLiteral("color: #2e7d32;")
                          : b.saving > 0 ? QStringLiteral("color: #c62828;")
                                         : QString());
  const double tokens = static_cast<double>(m_context->value()) * m_batch->value();
  const auto before = static_cast<qint64>(tokens * static_cast<double>(b.originalBytesPerToken));
  const auto after = static_cast<qint64>(tokens * static_cast<double>(b.bytesPerToken));
  m_total->setText(
      tr("%1 → %2 for %3 tokens × batch %4 (saves %5)")
          .arg(loc.formattedDataSize(before, 2), loc.formattedDataSize(after, 2), loc.toString(m_context->value()))
          .arg(m_batch->value())
          .arg(loc.formattedDataSize(before - after, 2)));
  m_quantized->setText(quantizedText(s, dtype));
  if (on && deepseek) {
    RoRopeLayout layout;
    roRopeLayout(*m_config, effectiveRopeWidth(*m_config, s), s.freqFold, &layout);
    const auto why = deepSeekExportProblem(deepSeekConvertedConfig(*m_config, s, true));
    const QString problem = why ? QString::fromStdString(*why) : QString();
    m_ropeNote->setText(tr("One shared RoPE key of d_R = %1 dims: %2 of %3 frequency groups (fold %4), %5 rotated "
                           "component(s) each; latent %6 dims with an RMSNorm. %7")
                            .arg(layout.width)
                            .arg(layout.groups)
                            .arg(m_config->headDim / 2 / layout.fold)
                            .arg(layout.fold)
                            .arg(layout.components)
                            .arg(m_config->numKvHeads * s.dKv)
                            .arg(problem.isEmpty() ? tr("Exportable as DeepSeek-V3.")
                                                   : tr("Not exportable as DeepSeek-V3: %1.").arg(problem)));
  } else {
    QString note;
    if (on) {
      note =
          tr("r = %1 of %2 frequency pairs keep RoPE per head.").arg(b.effectiveRopePairs).arg(m_config->ropeDim() / 2);
      if (m_config->rotaryDim > 0) {
        note += tr(" Only %1 of %2 head dims rotate in this model; the others are position-free already.")
                    .arg(m_config->rotaryDim)
                    .arg(m_config->headDim);
      }
      if (b.nopeLayers > 0) {
        note += tr(" %1 of %2 layers have no RoPE: their key is all latent and r does not apply there.")
                    .arg(b.nopeLayers)
                    .arg(m_config->numLayers);
      }
      if (b.keyScalePerTokenPerLayer > 0) {
        note += tr(" QK norm kept exact: %1 key-norm scales per layer (one per KV head) are cached.")
                    .arg(b.keyScalePerTokenPerLayer);
      }
    }
    m_ropeNote->setText(note);
  }
  updateAllocationBox();
  Q_EMIT validityChanged(m_reason);
}

void ConversionPanel::applyTo(RunSpec& spec) const {
  // Only a model folder has weights to convert; a built-in shape is pre-trained.
  spec.conversion.enabled = conversionEnabled() && !spec.modelDir.empty();
  if (!spec.conversion.enabled) {
    if (spec.kind == RunKind::ConvertFinetune)
      spec.kind = spec.modelDir.empty() ? RunKind::Pretrain : RunKind::Finetune;
    return;
  }
  spec.kind = RunKind::ConvertFinetune;
  spec.conversion.target =
      target() == QLatin1String("deepseek") ? ConversionTarget::DeepSeek : ConversionTarget::Mha2Mla;
  spec.conversion.factorise = comboChoice<Factorisation>(m_factorise);
  spec.conversion.ropeWidth = m_ropeWidth->value();
  spec.conversion.freqFold = m_fold->value();
  spec.conversion.ropeStrategy = comboChoice<RopeStrategy>(m_strategy).value_or(RopeStrategy::TwoNorm);
  spec.conversion.ropePairs = m_r->value();
  spec.conversion.dKv = m_dKv->value();
  spec.conversion.svd = comboChoice<SvdMethod>(m_svd).value_or(SvdMethod::Joint);
  const bool mha2mla = spec.conversion.target == ConversionTarget::Mha2Mla;
  const QString layers = m_layers->text().trimmed();
  spec.conversion.layers = mha2mla && !layers.isEmpty() ? layers.toStdString() : std::string("all");
  spec.conversion.kvBudget = mha2mla ? m_kvBudget->text().trimmed().toStdString() : std::string();
  spec.conversion.twoNormScore = comboChoice<TwoNormScore>(m_score).value_or(TwoNormScore::Product);
  spec.conversion.calibSequences = m_calibSeqs->value();
  spec.conversion.calibSeqLen = m_calibLen->value();
}

void ConversionPanel::loadFrom(const RunSpec& spec) {
  const ConversionSpec& c = spec.conversion;
  const bool on = c.enabled || spec.kind == RunKind::ConvertFinetune;
  setTarget(!on ? QStringLiteral("none") : choiceText(c.target));
  const int f = m_factorise->findData(choiceText(c.factorisation()));
  if (f >= 0) m_factorise->setCurrentIndex(f);
  m_ropeWidth->setValue(c.ropeWidth);
  m_fold->setValue(c.freqFold);
  setRopeStrategy(choiceText(c.ropeStrategy));
  setRopePairs(c.ropePairs);
  setDKv(c.dKv);
  setSvd(choiceText(c.svd));
  setLayers(QString::fromStdString(c.layers));
  setKvBudget(QString::fromStdString(c.kvBudget));
  const int i = m_score->findData(choiceText(c.twoNormScore));
  if (i >= 0) m_score->setCurrentIndex(i);
  m_calibSeqs->setValue(c.calibSequences);
  m_calibLen->setValue(c.calibSeqLen);
  update();
}

}  // namespace latentlab::ui
