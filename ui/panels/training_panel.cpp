// Training tab.
#include "panels/training_panel.h"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QDoubleValidator>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QVBoxLayout>

#include "charts/lr_curve_view.h"
#include "latentlab/error.h"
#include "latentlab/memory_plan.h"
#include "latentlab/vocabulary.h"
#include "panels/attention_panel.h"
#include "panels/format.h"
#include "panels/message_banner.h"

namespace latentlab::ui {

namespace {

QSpinBox* intSpin(int lo, int hi) {
  auto* s = new QSpinBox;
  s->setRange(lo, hi);
  s->setAccelerated(true);
  return s;
}

QDoubleSpinBox* dblSpin(double lo, double hi, int decimals, double step) {
  auto* s = new QDoubleSpinBox;
  s->setRange(lo, hi);
  s->setDecimals(decimals);
  s->setSingleStep(step);
  return s;
}

QLineEdit* sciEdit() {
  auto* e = new QLineEdit;
  auto* v = new QDoubleValidator(0.0, 1e3, 12, e);
  v->setNotation(QDoubleValidator::ScientificNotation);
  v->setLocale(QLocale::c());
  e->setValidator(v);
  return e;
}

QString sci(double v) {
  return QString::number(v, 'g', 6);
}

QFormLayout* form(QGroupBox* box) {
  auto* f = new QFormLayout(box);
  f->setLabelAlignment(Qt::AlignRight);
  f->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  f->setRowWrapPolicy(QFormLayout::WrapLongRows);  // a narrow panel puts the label above its field
  return f;
}

}  // namespace

TrainingPanel::TrainingPanel(QWidget* parent) : QWidget(parent) {
  createFields();
  buildLayout();
  connectSignals();
  setDevices({QStringLiteral("cpu")});
  setSpec(RunSpec{});
  updateCacheDType();
}

// The editors of the spec's fields; the group boxes lay them out.
void TrainingPanel::createFields() {
  m_name = new QLineEdit;
  m_name->setPlaceholderText(tr("e.g. smollm dkv16 2-norm"));
  m_corpus = new QLineEdit;
  m_corpus->setToolTip(
      tr("A text file, a folder of text files, a .jsonl file, or \"demo\" (the Python documentation)"));
  m_tokenizer = new QLineEdit;
  m_tokenizer->setPlaceholderText(tr("the model's, or trained on the corpus"));
  m_vocab = intSpin(256, 1 << 20);
  m_seqLen = intSpin(8, 1 << 17);
  m_valShare = dblSpin(0.0, 0.5, 3, 0.005);
  m_lr = sciEdit();
  m_beta1 = dblSpin(0.0, 0.9999, 4, 0.01);
  m_beta2 = dblSpin(0.0, 0.9999, 4, 0.005);
  m_eps = sciEdit();
  m_wd = dblSpin(0.0, 10.0, 4, 0.01);
  m_clip = dblSpin(0.0, 1000.0, 2, 0.1);
  m_clip->setSpecialValueText(tr("off"));
  m_schedule = new QComboBox;
  m_schedule->setMinimumContentsLength(14);
  m_schedule->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  for (const auto& row : choiceTable<ScheduleKind>()) {
    const QString name = QString::fromUtf8(row.names.front().data(), static_cast<qsizetype>(row.names.front().size()));
    m_schedule->addItem(row.value == ScheduleKind::Wsd      ? tr("WSD (warmup, stable, 1-sqrt decay)")
                        : row.value == ScheduleKind::Cosine ? tr("Cosine")
                                                            : tr("Constant"),
                        name);
  }
  m_warmup = intSpin(0, 10000000);
  m_decay = intSpin(0, 10000000);
  m_decay->setSpecialValueText(tr("20% of the run"));
  m_minLr = dblSpin(0.0, 1.0, 3, 0.05);
  m_steps = intSpin(1, 100000000);
  m_microBatch = intSpin(1, 65536);
  m_gradAccum = intSpin(1, 65536);
  m_seed = intSpin(0, 2147483647);
  m_evalEvery = intSpin(0, 10000000);
  m_evalEvery->setSpecialValueText(tr("only at the end"));
  m_evalBatches = intSpin(1, 100000);
  m_ckptEvery = intSpin(0, 10000000);
  m_ckptEvery->setSpecialValueText(tr("only at the end"));
  m_device = new QComboBox;
  m_device->setEditable(true);
  m_placement = new QComboBox;
  m_placement->setObjectName(QStringLiteral("placement"));
  m_placement->addItem(tr("this machine"), QString());
  m_placement->setToolTip(
      tr("Where the run's engine runs: here, or on a Slurm cluster through a profile in the workspace's "
         "clusters/ folder (docs/distributed.md); the workbench submits it with sbatch and follows it"));
  m_precision = new QComboBox;
  for (const std::string& d : choiceNames<Precision>()) m_precision->addItem(QString::fromStdString(d));
  m_precision->setToolTip(
      tr("fp32: fp32 weights and compute. bf16-mixed: fp32 weights, bf16 compute (autocast). "
         "bf16: bf16 weights, activations and gradients; the optimiser keeps an fp32 master copy. "
         "auto: bf16-mixed on a GPU, fp32 on the CPU."));
  m_zero = new QComboBox;
  m_zero->addItem(tr("off"), 0);
  m_zero->addItem(tr("ZeRO-1: optimizer state sharded"), 1);
  m_zero->addItem(tr("ZeRO-2: optimizer state and gradients sharded"), 2);
  m_zero->setToolTip(
      tr("With several devices (one rank each), each rank keeps only its share of the fp32 master "
         "weights, the AdamW moments and (stage 2) the averaged gradients: 16 bytes per parameter "
         "divided by the ranks"));
  m_zeroInit = new QCheckBox(tr("Zero-init output projections"));
  m_zeroInit->setToolTip(tr("Start the attention and MLP output projections at zero (the MLRA recipe)"));
  m_recompute = new QCheckBox(tr("Recompute activations per layer"));
  m_recompute->setToolTip(
      tr("Keep one tensor a decoder layer and run the layer again in backward: much less "
         "activation memory for about a third more compute; the same gradients"));
  m_lrCurve = new LrCurveView;
}

QGroupBox* TrainingPanel::buildDataBox() {
  auto* dataBox = new QGroupBox(tr("Data"));
  auto* df = form(dataBox);
  df->addRow(tr("Corpus:"), m_corpus);
  df->addRow(tr("Tokenizer:"), m_tokenizer);
  df->addRow(tr("Vocabulary (trained):"), m_vocab);
  df->addRow(tr("Sequence length:"), m_seqLen);
  df->addRow(tr("Validation share:"), m_valShare);
  return dataBox;
}

QGroupBox* TrainingPanel::buildOptimiserBox() {
  auto* optBox = new QGroupBox(tr("Optimiser (AdamW)"));
  auto* of = form(optBox);
  of->addRow(tr("Learning rate:"), m_lr);
  auto* betas = new QHBoxLayout;
  betas->addWidget(m_beta1);
  betas->addWidget(m_beta2);
  of->addRow(tr("β1, β2:"), betas);
  of->addRow(tr("ε:"), m_eps);
  of->addRow(tr("Weight decay:"), m_wd);
  of->addRow(tr("Gradient clip:"), m_clip);
  return optBox;
}

QGroupBox* TrainingPanel::buildScheduleBox() {
  auto* schedBox = new QGroupBox(tr("Schedule"));
  auto* sf = form(schedBox);
  sf->addRow(tr("Kind:"), m_schedule);
  sf->addRow(tr("Warmup steps:"), m_warmup);
  sf->addRow(tr("Decay steps:"), m_decay);
  sf->addRow(tr("Min LR ratio:"), m_minLr);
  sf->addRow(m_lrCurve);
  return schedBox;
}

QGroupBox* TrainingPanel::buildLengthBox() {
  auto* lenBox = new QGroupBox(tr("Length and batch"));
  auto* lf = form(lenBox);
  lf->addRow(tr("Steps:"), m_steps);
  lf->addRow(tr("Micro-batch:"), m_microBatch);
  lf->addRow(tr("Gradient accumulation:"), m_gradAccum);
  lf->addRow(tr("Seed:"), m_seed);
  lf->addRow(m_zeroInit);
  lf->addRow(m_recompute);
  return lenBox;
}

// Distillation from a teacher (spec "distill"): off unless checked.
QGroupBox* TrainingPanel::buildDistillBox() {
  m_distill = new QGroupBox(tr("Distillation from a teacher"));
  m_distill->setCheckable(true);
  m_distill->setChecked(false);
  m_distill->setToolTip(
      tr("Loss = α·T²·KL(teacher ‖ student at T) + (1 − α)·cross-entropy. The teacher runs on every micro-batch "
         "without gradients; it must share the run's tokenizer. Fine-tune and convert-then-fine-tune runs only."));
  m_teacher = new QLineEdit(QStringLiteral("original"));
  m_teacher->setToolTip(
      tr("\"original\": the model a conversion starts from (convert-then-fine-tune); or a model folder"));
  m_alpha = new QDoubleSpinBox;
  m_alpha->setRange(0.0, 1.0);
  m_alpha->setDecimals(2);
  m_alpha->setSingleStep(0.05);
  m_alpha->setValue(0.5);
  m_alpha->setToolTip(tr("The KL's weight α; 1 − α weighs the next-token loss. 0 trains as without a teacher."));
  m_temperature = new QDoubleSpinBox;
  m_temperature->setRange(0.1, 20.0);
  m_temperature->setDecimals(2);
  m_temperature->setSingleStep(0.5);
  m_temperature->setValue(1.0);
  m_temperature->setToolTip(tr("Both distributions softened by T; the KL is scaled by T²"));
  auto* f = form(m_distill);
  f->addRow(tr("Teacher:"), m_teacher);
  f->addRow(tr("α (KL weight):"), m_alpha);
  f->addRow(tr("Temperature:"), m_temperature);
  return m_distill;
}

QGroupBox* TrainingPanel::buildEvalBox() {
  auto* evalBox = new QGroupBox(tr("Evaluation and checkpoints"));
  auto* ef = form(evalBox);
  ef->addRow(tr("Evaluate every:"), m_evalEvery);
  ef->addRow(tr("Eval batches:"), m_evalBatches);
  ef->addRow(tr("Checkpoint every:"), m_ckptEvery);
  return evalBox;
}

// The device group; it also makes the memory plan label, which buildLayout()
// keeps in view under the fields.
QGroupBox* TrainingPanel::buildDeviceBox() {
  auto* devBox = new QGroupBox(tr("Device"));
  auto* vf = form(devBox);
  vf->addRow(tr("Run on:"), m_placement);
  vf->addRow(tr("Device:"), m_device);
  vf->addRow(tr("Precision:"), m_precision);
  vf->addRow(tr("Sharding:"), m_zero);
  m_memory = new QLabel;
  m_memory->setObjectName(QStringLiteral("memoryPlan"));
  m_memory->setWordWrap(true);
  m_memory->setTextFormat(Qt::RichText);
  m_memory->setToolTip(
      tr("What one device holds at the run's peak, predicted from the model's shape and these "
         "settings (docs/memory.md); the same plan `latentlab-engine run SPEC --check` prints"));
  return devBox;
}

// Every group of the spec, one under another, in a scroll area.
QScrollArea* TrainingPanel::buildFieldArea() {
  auto* runBox = new QGroupBox(tr("Run"));
  auto* rf = form(runBox);
  rf->addRow(tr("Name:"), m_name);

  m_attention = new AttentionPanel;

  QGroupBox* dataBox = buildDataBox();
  QGroupBox* optBox = buildOptimiserBox();
  QGroupBox* schedBox = buildScheduleBox();
  QGroupBox* lenBox = buildLengthBox();
  QGroupBox* distillBox = buildDistillBox();
  QGroupBox* evalBox = buildEvalBox();
  QGroupBox* devBox = buildDeviceBox();

  auto* inner = new QWidget;
  auto* il = new QVBoxLayout(inner);
  il->setContentsMargins(0, 0, 4, 0);
  for (QWidget* w :
       {static_cast<QWidget*>(runBox), static_cast<QWidget*>(m_attention), static_cast<QWidget*>(dataBox),
        static_cast<QWidget*>(optBox), static_cast<QWidget*>(schedBox), static_cast<QWidget*>(lenBox),
        static_cast<QWidget*>(distillBox), static_cast<QWidget*>(evalBox), static_cast<QWidget*>(devBox)}) {
    il->addWidget(w);
  }
  il->addStretch(1);
  auto* scroll = new QScrollArea;
  scroll->setWidget(inner);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  // Never cut off: a panel narrower than its fields scrolls sideways too.
  return scroll;
}

// The fields, then the memory plan, the messages and the buttons under them.
void TrainingPanel::buildLayout() {
  QScrollArea* scroll = buildFieldArea();

  m_banner = new MessageBanner;
  m_load = new QPushButton(tr("Load spec…"));
  m_save = new QPushButton(tr("Save spec…"));
  m_run = new QPushButton(tr("Run"));
  m_run->setDefault(true);
  m_run->setMinimumWidth(96);
  m_run->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
  m_blockedLabel = new QLabel;
  m_blockedLabel->setWordWrap(true);
  m_blockedLabel->setStyleSheet(QStringLiteral("color: #c62828;"));
  m_blockedLabel->hide();
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_load);
  buttons->addWidget(m_save);
  buttons->addStretch(1);
  buttons->addWidget(m_run);

  // The memory plan stays in view under the fields, next to Run.
  auto* memoryBox = new QGroupBox(tr("Memory per device"));
  auto* ml = new QVBoxLayout(memoryBox);
  ml->setContentsMargins(6, 2, 6, 4);
  ml->addWidget(m_memory);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(scroll, 1);
  layout->addWidget(memoryBox);
  layout->addWidget(m_banner);
  layout->addWidget(m_blockedLabel);
  layout->addLayout(buttons);
}

void TrainingPanel::connectSignals() {
  connect(m_run, &QPushButton::clicked, this, [this] { Q_EMIT runRequested(spec()); });
  connect(m_save, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save run spec"), m_name->text() + QStringLiteral(".json"), tr("Run spec (*.json)"));
    if (!path.isEmpty()) saveSpecFile(path);
  });
  connect(m_load, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Load run spec"), {}, tr("Run spec (*.json)"));
    if (!path.isEmpty()) loadSpecFile(path);
  });
  auto lrChanged = [this] { updateLrCurve(); };
  connect(m_lr, &QLineEdit::textChanged, this, lrChanged);
  connect(m_schedule, &QComboBox::currentIndexChanged, this, lrChanged);
  connect(m_warmup, &QSpinBox::valueChanged, this, lrChanged);
  connect(m_decay, &QSpinBox::valueChanged, this, lrChanged);
  connect(m_steps, &QSpinBox::valueChanged, this, lrChanged);
  connect(m_minLr, &QDoubleSpinBox::valueChanged, this, lrChanged);
  m_memoryTimer.setSingleShot(true);
  m_memoryTimer.setInterval(120);
  connect(&m_memoryTimer, &QTimer::timeout, this, &TrainingPanel::updateMemoryPlan);
  auto memoryChanged = [this] { scheduleMemoryPlan(); };
  for (QSpinBox* box : {m_microBatch, m_seqLen, m_gradAccum, m_vocab})
    connect(box, &QSpinBox::valueChanged, this, memoryChanged);
  connect(m_precision, &QComboBox::currentTextChanged, this, memoryChanged);
  connect(m_device, &QComboBox::currentTextChanged, this, memoryChanged);
  connect(m_recompute, &QCheckBox::toggled, this, memoryChanged);
  connect(m_zero, &QComboBox::currentIndexChanged, this, memoryChanged);
  connect(m_distill, &QGroupBox::toggled, this, memoryChanged);  // the teacher's weights and logits
  connect(m_teacher, &QLineEdit::textChanged, this, memoryChanged);
  connect(m_tokenizer, &QLineEdit::textChanged, this, memoryChanged);
  // A variant changes the weights, activations and cache the plan counts; its
  // KV figure is in the dtype the run trains in.
  connect(m_attention, &AttentionPanel::changed, this, memoryChanged);
  auto cacheDType = [this] { updateCacheDType(); };
  connect(m_precision, &QComboBox::currentTextChanged, this, cacheDType);
  connect(m_device, &QComboBox::currentTextChanged, this, cacheDType);
  connect(m_placement, &QComboBox::currentIndexChanged, this, [this] { applyPlacement(); });
}

namespace {

// "2 CPU ranks", "2 nodes × 4 GPU ranks": the ranks a profile runs.
QString profileShape(const ClusterProfile& p) {
  const QString kind = p.device == "cuda" ? QStringLiteral("GPU") : QStringLiteral("CPU");
  const QString ranks =
      QStringLiteral("%1 %2 rank%3").arg(p.tasksPerNode).arg(kind).arg(p.tasksPerNode == 1 ? "" : "s");
  return p.nodes == 1 ? ranks : QStringLiteral("%1 nodes × %2").arg(p.nodes).arg(ranks);
}

}  // namespace

// A cluster sets the device (the profile's, one per rank) and locks the
// field; this machine gives the field back as it was.
void TrainingPanel::applyPlacement() {
  const QString name = cluster();
  if (name.isEmpty()) {
    if (!m_device->isEnabled() && !m_localDevice.isEmpty()) m_device->setCurrentText(m_localDevice);
    m_device->setEnabled(true);
    m_device->setToolTip({});
    scheduleMemoryPlan();
    return;
  }
  if (m_device->isEnabled()) m_localDevice = m_device->currentText();
  for (const ClusterProfile& p : m_clusters) {
    if (QString::fromStdString(p.name) != name) continue;
    m_device->setCurrentText(QString::fromStdString(p.device));
    m_device->setToolTip(tr("%1, from the cluster profile %2").arg(profileShape(p), name));
  }
  m_device->setEnabled(false);
  scheduleMemoryPlan();
}

void TrainingPanel::setClusterProfiles(const std::vector<ClusterProfile>& profiles, const QStringList& problems) {
  const QString current = cluster();
  m_clusters = profiles;
  const QSignalBlocker block(m_placement);
  while (m_placement->count() > 1) m_placement->removeItem(1);
  for (const ClusterProfile& p : profiles) {
    const QString name = QString::fromStdString(p.name);
    m_placement->addItem(tr("Slurm: %1 · %2").arg(name, profileShape(p)), name);
  }
  for (const QString& problem : problems) {
    m_placement->addItem(tr("Slurm: %1").arg(problem), QString());
    auto* model = qobject_cast<QStandardItemModel*>(m_placement->model());
    if (model != nullptr) model->item(m_placement->count() - 1)->setEnabled(false);
  }
  const int at = current.isEmpty() ? 0 : m_placement->findData(current);
  m_placement->setCurrentIndex(at < 0 ? 0 : at);
  applyPlacement();
}

QString TrainingPanel::cluster() const {
  return m_placement->currentData().toString();
}

void TrainingPanel::updateCacheDType() {
  m_attention->setCacheDType(
      runDType(comboChoice<Precision>(m_precision).value_or(Precision::Auto), m_device->currentText()));
}

void TrainingPanel::setDeviceMemory(const std::vector<DeviceInfo>& devices) {
  m_deviceMemory = devices;
  scheduleMemoryPlan();
}

void TrainingPanel::scheduleMemoryPlan() {
  m_memoryTimer.start();
}

void TrainingPanel::updateMemoryPlan() {
  m_memoryTimer.stop();
  const RunSpec s = spec();
  QString text, reason;
  try {
    std::int64_t sourceParameters = 0;
    const ModelConfig cfg = plannedModelConfig(s, &sourceParameters);
    // On a cluster, this machine's free memory says nothing about the nodes'.
    const QString remote = cluster();
    const MemoryPlan p =
        planMemory(cfg, s, remote.isEmpty() ? availableBytesOn(s.device, m_deviceMemory) : 0, sourceParameters);
    auto bytes = [](std::int64_t b) { return QString::fromStdString(formatBytes(b)); };
    const QString device = QString::fromStdString(s.device);
    if (!remote.isEmpty()) {
      text = tr("<b>%1</b> per rank at its peak (%2); the free memory of %3's nodes is not known here")
                 .arg(bytes(p.peakBytes), QString::fromStdString(p.peakPhase), remote.toHtmlEscaped());
    } else if (!p.known()) {
      text = tr("<b>%1</b> per device at its peak (%2); free memory of %3 unknown")
                 .arg(bytes(p.peakBytes), QString::fromStdString(p.peakPhase), device.toHtmlEscaped());
    } else if (p.fits()) {
      text = tr("<b>%1</b> of %2 free on %3: <span style='color:#2e7d32'><b>fits</b></span> "
                "(micro-batch up to %4)")
                 .arg(bytes(p.peakBytes), bytes(p.availableBytes), device.toHtmlEscaped())
                 .arg(p.largestMicroBatch);
    } else {
      const QString fix = tr("to fit: %1").arg(QString::fromStdString(p.suggestion));
      text = tr("<b>%1</b> of %2 free on %3: <span style='color:#c62828'><b>does not fit</b></span>; %4")
                 .arg(bytes(p.peakBytes), bytes(p.availableBytes), device.toHtmlEscaped(), fix);
      reason =
          tr("the run needs %1 and %2 has %3 free (%4)").arg(bytes(p.peakBytes), device, bytes(p.availableBytes), fix);
    }
    QStringList parts;
    for (const MemoryItem& i : p.items)
      parts << QStringLiteral("%1 %2").arg(QString::fromStdString(i.name), bytes(i.bytes));
    text += QStringLiteral("<br><span style='color:#616161'>%1</span>")
                .arg(parts.join(QStringLiteral(" · ")).toHtmlEscaped());
    if (p.peakWithRecompute > 0 && p.fits())
      text += QStringLiteral("<br><span style='color:#616161'>%1</span>")
                  .arg(tr("with recompute: %1").arg(bytes(p.peakWithRecompute)));
  } catch (const Error& e) {
    text = QStringLiteral("<span style='color:#616161'>%1</span>")
               .arg(tr("no plan: %1").arg(QString::fromStdString(e.message())).toHtmlEscaped());
  }
  m_memory->setText(text);
  m_memoryReason = reason;
  updateRunState();
}

void TrainingPanel::setDevices(const QStringList& devices) {
  const QString current = m_device->currentText();
  m_device->clear();
  m_device->addItems(devices);
  // Data parallel over every GPU: one rank per device (see docs/distributed.md).
  QStringList gpus;
  for (const QString& d : devices) {
    if (d.startsWith(QLatin1String("cuda:"))) gpus << d;
  }
  if (gpus.size() > 1) m_device->addItem(gpus.join(QLatin1Char(',')));
  if (!current.isEmpty()) m_device->setCurrentText(current);
}

RunSpec TrainingPanel::spec() const {
  RunSpec s = m_base;
  s.name = m_name->text().trimmed().toStdString();
  s.data.corpus = m_corpus->text().trimmed().toStdString();
  s.data.tokenizer = m_tokenizer->text().trimmed().toStdString();
  s.data.tokenizerVocab = m_vocab->value();
  s.data.seqLen = m_seqLen->value();
  s.data.validationShare = m_valShare->value();
  s.optimizer.lr = QLocale::c().toDouble(m_lr->text());
  s.optimizer.beta1 = m_beta1->value();
  s.optimizer.beta2 = m_beta2->value();
  s.optimizer.eps = QLocale::c().toDouble(m_eps->text());
  s.optimizer.weightDecay = m_wd->value();
  s.optimizer.clip = m_clip->value();
  s.schedule.kind = comboChoice<ScheduleKind>(m_schedule).value_or(ScheduleKind::Wsd);
  s.schedule.warmupSteps = m_warmup->value();
  s.schedule.decaySteps = m_decay->value();
  s.schedule.minLrRatio = m_minLr->value();
  s.steps = m_steps->value();
  s.microBatch = m_microBatch->value();
  s.gradAccum = m_gradAccum->value();
  s.seed = static_cast<std::uint64_t>(m_seed->value());
  s.evalEvery = m_evalEvery->value();
  s.evalBatches = m_evalBatches->value();
  s.checkpointEvery = m_ckptEvery->value();
  s.device = m_device->currentText().trimmed().toStdString();
  s.precision = comboChoice<Precision>(m_precision).value_or(Precision::Auto);
  s.zeroInitOutput = m_zeroInit->isChecked();
  s.recompute = m_recompute->isChecked();
  s.zeroStage = m_zero->currentData().toInt();
  s.distill.enabled = m_distill->isChecked();
  s.distill.teacher = m_teacher->text().trimmed().toStdString();
  s.distill.alpha = m_alpha->value();
  s.distill.temperature = m_temperature->value();
  if (m_contributor) m_contributor(s);
  m_attention->applyTo(s);  // after the model panel has said whether this is a pre-training
  return s;
}

void TrainingPanel::setBaseModel(const std::optional<ModelConfig>& base) {
  m_attention->setBase(base);
  scheduleMemoryPlan();
}

void TrainingPanel::setSpec(const RunSpec& s) {
  m_base = s;
  m_name->setText(QString::fromStdString(s.name));
  m_corpus->setText(QString::fromStdString(s.data.corpus));
  m_tokenizer->setText(QString::fromStdString(s.data.tokenizer));
  m_vocab->setValue(s.data.tokenizerVocab);
  m_seqLen->setValue(s.data.seqLen);
  m_valShare->setValue(s.data.validationShare);
  m_lr->setText(sci(s.optimizer.lr));
  m_beta1->setValue(s.optimizer.beta1);
  m_beta2->setValue(s.optimizer.beta2);
  m_eps->setText(sci(s.optimizer.eps));
  m_wd->setValue(s.optimizer.weightDecay);
  m_clip->setValue(s.optimizer.clip);
  const int k = m_schedule->findData(choiceText(s.schedule.kind));
  m_schedule->setCurrentIndex(k >= 0 ? k : 0);
  m_warmup->setValue(s.schedule.warmupSteps);
  m_decay->setValue(s.schedule.decaySteps);
  m_minLr->setValue(s.schedule.minLrRatio);
  m_steps->setValue(s.steps);
  m_microBatch->setValue(s.microBatch);
  m_gradAccum->setValue(s.gradAccum);
  m_seed->setValue(static_cast<int>(s.seed));
  m_evalEvery->setValue(s.evalEvery);
  m_evalBatches->setValue(s.evalBatches);
  m_ckptEvery->setValue(s.checkpointEvery);
  if (m_device->findText(QString::fromStdString(s.device)) < 0) m_device->addItem(QString::fromStdString(s.device));
  m_device->setCurrentText(QString::fromStdString(s.device));
  if (!cluster().isEmpty()) {
    // The spec's device is this machine's choice; the cluster's stays in the field.
    m_localDevice = QString::fromStdString(s.device);
    applyPlacement();
  }
  m_precision->setCurrentText(choiceText(s.precision));
  m_zeroInit->setChecked(s.zeroInitOutput);
  m_recompute->setChecked(s.recompute);
  m_zero->setCurrentIndex(std::clamp(s.zeroStage, 0, 2));
  m_distill->setChecked(s.distill.enabled);
  m_teacher->setText(QString::fromStdString(s.distill.teacher));
  m_alpha->setValue(s.distill.alpha);
  m_temperature->setValue(s.distill.temperature);
  m_attention->loadFrom(s);
  updateLrCurve();
  scheduleMemoryPlan();
  Q_EMIT specLoaded(s);
}

bool TrainingPanel::saveSpecFile(const QString& path) {
  try {
    const RunSpec s = spec();
    validateRunSpec(s, path.toStdString());
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
      m_banner->showMessage(MessageBanner::Level::Error, tr("%1: cannot write the file").arg(path), f.errorString());
      return false;
    }
    f.write(QByteArray::fromStdString(runSpecToJson(s)));
    f.write("\n");
    m_banner->hide();
    return true;
  } catch (const Error& e) {
    m_banner->showError(e);
    return false;
  }
}

bool TrainingPanel::loadSpecFile(const QString& path) {
  try {
    const RunSpec s = loadRunSpec(path.toStdString());
    m_banner->hide();
    setSpec(s);
    return true;
  } catch (const Error& e) {
    m_banner->showError(e);
    return false;
  }
}

void TrainingPanel::setBlockedReason(const QString& reason) {
  m_blocked = reason;
  updateRunState();
  scheduleMemoryPlan();  // the other panels changed: the model or conversion may have
}

void TrainingPanel::updateRunState() {
  const QString reason = blockedReason();
  m_run->setEnabled(reason.isEmpty());
  m_blockedLabel->setText(reason.isEmpty() ? QString() : tr("Run is disabled: %1").arg(reason));
  m_blockedLabel->setVisible(!reason.isEmpty());
}

void TrainingPanel::updateLrCurve() {
  OptimizerSpec o = m_base.optimizer;
  o.lr = QLocale::c().toDouble(m_lr->text());
  ScheduleSpec sc = m_base.schedule;
  sc.kind = comboChoice<ScheduleKind>(m_schedule).value_or(ScheduleKind::Wsd);
  sc.warmupSteps = m_warmup->value();
  sc.decaySteps = m_decay->value();
  sc.minLrRatio = m_minLr->value();
  m_lrCurve->setSchedule(o, sc, m_steps->value());
}

}  // namespace latentlab::ui
