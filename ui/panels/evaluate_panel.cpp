// Evaluate tab: the evaluation job's choices and the chosen model's stored results.
#include "panels/evaluate_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "charts/passkey_heatmap.h"
#include "latentlab/error.h"
#include "latentlab/model_config.h"
#include "latentlab/passkey.h"
#include "latentlab/run_store.h"
#include "latentlab/vocabulary.h"
#include "panels/kv_cache_choice.h"

namespace latentlab::ui {

namespace {

constexpr int kFileRole = Qt::UserRole;
constexpr int kFormatRole = Qt::UserRole + 1;
constexpr int kExtraRole = Qt::UserRole + 2;

// "256, 512,1k" -> {256, 512, 1024}; empty on a bad entry.
template <class T>
QVector<T> parseList(const QString& text, bool lengths) {
  QVector<T> out;
  for (QString part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    part = part.trimmed();
    bool ok = false;
    double v = 0;
    if (lengths && part.endsWith(QLatin1Char('k'), Qt::CaseInsensitive)) {
      v = part.chopped(1).toDouble(&ok) * 1024;
    } else {
      v = part.toDouble(&ok);
    }
    if (!ok) return {};
    out.push_back(static_cast<T>(v));
  }
  return out;
}

// 256, 512 and 1k, each at most what fits the context with the answer.
QString defaultPasskeyLengths(int context) {
  QStringList out;
  int last = 0;
  for (int n : {256, 512, 1024}) {
    if (context > 0) n = std::min(n, context - kPasskeyAnswerTokens);
    if (n < 64 || n == last) continue;
    out << (n % 1024 == 0 ? QStringLiteral("%1k").arg(n / 1024) : QString::number(n));
    last = n;
  }
  return out.join(QStringLiteral(", "));
}

int contextOf(const QString& modelDir) {
  try {
    return static_cast<int>(
        readHfConfig((modelDir + QStringLiteral("/config.json")).toStdString()).maxPositionEmbeddings);
  } catch (const Error&) {
    return 0;
  }
}

}  // namespace

EvaluatePanel::EvaluatePanel(std::shared_ptr<RunStore> store, QString workspaceDir, QWidget* parent)
    : QWidget(parent), m_store(std::move(store)), m_workspace(std::move(workspaceDir)) {
  buildLayout();
  connectSignals();
  refresh();
}

// The panel top to bottom: the model, its stored results, then a new evaluation.
void EvaluatePanel::buildLayout() {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);

  layout->addWidget(buildModelBox());

  // What is stored for the chosen model, first: the reason to come here.
  layout->addWidget(buildResultsBox(), 1);

  auto* heading = new QLabel(tr("<b>New evaluation</b> of this model"));
  layout->addWidget(heading);
  layout->addWidget(buildTasksBox());
  layout->addWidget(buildPasskeyBox());
  layout->addLayout(buildRunRow());
  m_status = new QLabel;
  m_status->setWordWrap(true);
  layout->addWidget(m_status);
}

QGroupBox* EvaluatePanel::buildModelBox() {
  auto* what = new QGroupBox(tr("Model"));
  auto* wl = new QHBoxLayout(what);
  m_model = new QComboBox;
  m_model->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_model->setMinimumContentsLength(12);
  m_folder = new QPushButton(tr("Folder…"));
  m_folder->setToolTip(tr("Add a Hugging Face model folder (config.json, safetensors, tokenizer.json)"));
  wl->addWidget(m_model, 1);
  wl->addWidget(m_folder);
  return what;
}

QGroupBox* EvaluatePanel::buildResultsBox() {
  auto* results = new QGroupBox(tr("Results of this model"));
  auto* rl = new QVBoxLayout(results);
  m_results = new QTableWidget(0, 5);
  m_results->setHorizontalHeaderLabels({tr("Task"), tr("KV cache"), tr("acc"), tr("acc_norm"), tr("Items")});
  m_results->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_results->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  m_results->verticalHeader()->hide();
  m_results->verticalHeader()->setDefaultSectionSize(m_results->fontMetrics().height() + 6);
  m_results->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_results->setMaximumHeight(4 * (m_results->fontMetrics().height() + 6) + 4);
  rl->addWidget(m_results);
  m_heatmap = new PasskeyHeatmap;
  m_heatmap->setMinimumHeight(180);
  rl->addWidget(m_heatmap, 1);
  return results;
}

QGroupBox* EvaluatePanel::buildTasksBox() {
  auto* tasks = new QGroupBox(tr("Multiple-choice tasks"));
  tasks->setToolTip(tr("Scored by log-likelihood as lm-evaluation-harness does: acc and acc_norm"));
  auto* tl = new QFormLayout(tasks);
  m_taskFile = new QLineEdit;
  m_taskFile->setPlaceholderText(tr("JSONL or a benchmark's file"));
  m_browse = new QPushButton(tr("…"));
  m_browse->setMaximumWidth(30);
  auto* fileRow = new QHBoxLayout;
  fileRow->addWidget(m_taskFile, 1);
  fileRow->addWidget(m_browse);
  tl->addRow(tr("File"), fileRow);
  m_format = new QComboBox;
  for (const std::string& f : choiceNames<TaskFormat>()) m_format->addItem(QString::fromStdString(f));
  m_extra = new QLineEdit;
  m_extra->setPlaceholderText(tr("labels (piqa) / dev CSV (mmlu)"));
  auto* formatRow = new QHBoxLayout;
  formatRow->addWidget(m_format);
  formatRow->addWidget(m_extra, 1);
  tl->addRow(tr("Format"), formatRow);
  m_addTask = new QPushButton(tr("Add task"));
  tl->addRow(QString(), m_addTask);
  m_tasks = new QListWidget;
  m_tasks->setMaximumHeight(3 * (m_tasks->fontMetrics().height() + 4) + 6);
  m_tasks->setToolTip(tr("Checked tasks are evaluated; Delete removes the selected one"));
  tl->addRow(m_tasks);
  m_limit = new QSpinBox;
  m_limit->setRange(0, 1000000);
  m_limit->setSpecialValueText(tr("all items"));
  tl->addRow(tr("Items per task"), m_limit);
  return tasks;
}

QGroupBox* EvaluatePanel::buildPasskeyBox() {
  auto* passkey = new QGroupBox(tr("Long-context retrieval"));
  auto* pl = new QFormLayout(passkey);
  m_passkey = new QCheckBox(tr("Passkey test"));
  pl->addRow(m_passkey);
  m_haystack = new QLineEdit;
  m_haystack->setPlaceholderText(tr("filler text file"));
  pl->addRow(tr("Haystack"), m_haystack);
  m_lengths = new QLineEdit(QStringLiteral("256, 512, 1k"));
  pl->addRow(tr("Lengths"), m_lengths);
  m_depths = new QLineEdit(QStringLiteral("0, 0.25, 0.5, 0.75, 1"));
  pl->addRow(tr("Depths"), m_depths);
  m_trials = new QSpinBox;
  m_trials->setRange(1, 100);
  m_trials->setValue(3);
  pl->addRow(tr("Keys per cell"), m_trials);
  return passkey;
}

// The device and the Evaluate button.
QHBoxLayout* EvaluatePanel::buildRunRow() {
  auto* runRow = new QHBoxLayout;
  m_device = new QComboBox;
  m_device->addItem(QStringLiteral("cpu"));
  m_kvCache = newKvCacheBox();
  m_evaluate = new QPushButton(tr("Evaluate"));
  runRow->addWidget(new QLabel(tr("Device")));
  runRow->addWidget(m_device);
  runRow->addSpacing(12);
  runRow->addWidget(new QLabel(tr("KV cache")));
  runRow->addWidget(m_kvCache);
  runRow->addStretch(1);
  runRow->addWidget(m_evaluate);
  return runRow;
}

void EvaluatePanel::connectSignals() {
  connect(m_browse, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Task file"), QString(),
                                                   tr("Tasks (*.jsonl *.json *.csv);;All files (*)"));
    if (!f.isEmpty()) m_taskFile->setText(f);
  });
  connect(m_folder, &QPushButton::clicked, this, [this] {
    const QString d = QFileDialog::getExistingDirectory(this, tr("Model folder"));
    if (!d.isEmpty()) addFolder(d);
  });
  connect(m_addTask, &QPushButton::clicked, this, &EvaluatePanel::addTask);
  connect(m_taskFile, &QLineEdit::returnPressed, this, &EvaluatePanel::addTask);
  connect(m_tasks, &QListWidget::itemChanged, this, &EvaluatePanel::updateState);
  for (QLineEdit* e : {m_haystack, m_lengths, m_depths})
    connect(e, &QLineEdit::textChanged, this, &EvaluatePanel::updateState);
  connect(m_lengths, &QLineEdit::textEdited, this, [this] { m_lengthsTyped = true; });
  connect(m_passkey, &QCheckBox::toggled, this, &EvaluatePanel::updateState);
  connect(m_model, &QComboBox::currentIndexChanged, this, [this] {
    followContext();
    updateState();
    showResults();
  });
  // The heatmap shows the passkey grid scored over the cache chosen here.
  connect(m_kvCache, &QComboBox::currentIndexChanged, this, &EvaluatePanel::showResults);
  connect(m_evaluate, &QPushButton::clicked, this, [this] {
    const RunSpec s = spec();
    if (!s.name.empty()) Q_EMIT evaluateRequested(s);
  });
}

void EvaluatePanel::setDevices(const QStringList& devices) {
  const QString keep = m_device->currentText();
  m_device->clear();
  m_device->addItems(devices);
  if (devices.contains(keep)) m_device->setCurrentText(keep);
}

void EvaluatePanel::addFolder(const QString& dir) {
  const QString clean = QDir::cleanPath(dir);
  bool known = false;
  for (const auto& c : m_extraFolders) known = known || c.dir == clean;
  if (!known) m_extraFolders.push_back({QFileInfo(clean).fileName() + QStringLiteral(" (folder)"), clean, 0, 0});
  refresh();
  for (int i = 0; i < m_choices.size(); ++i)
    if (m_choices[i].dir == clean) m_model->setCurrentIndex(i);
}

void EvaluatePanel::refresh() {
  const QString keep = m_model->currentIndex() >= 0 ? m_choices.value(m_model->currentIndex()).dir : QString();
  m_choices = listModelChoices(*m_store, m_workspace);
  m_choices += m_extraFolders;
  {
    const QSignalBlocker block(m_model);
    m_model->clear();
    for (const auto& c : m_choices) m_model->addItem(c.label, c.dir);
    int at = 0;
    for (int i = 0; i < m_choices.size(); ++i)
      if (m_choices[i].dir == keep) at = i;
    if (!m_choices.isEmpty()) m_model->setCurrentIndex(at);
  }
  followContext();
  updateState();
  showResults();
}

const ModelChoice* EvaluatePanel::current() const {
  const int i = m_model->currentIndex();
  return i >= 0 && i < m_choices.size() ? &m_choices[i] : nullptr;
}

void EvaluatePanel::addTask() {
  const QString file = m_taskFile->text().trimmed();
  if (file.isEmpty()) return;
  if (!QFileInfo(file).isFile()) {
    m_status->setText(tr("%1 is not a file").arg(file));
    return;
  }
  QString name = QFileInfo(file).completeBaseName();
  for (int i = 0; i < m_tasks->count(); ++i)
    if (m_tasks->item(i)->text() == name) name += QStringLiteral("-%1").arg(m_tasks->count() + 1);
  auto* item = new QListWidgetItem(name);
  item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
  item->setCheckState(Qt::Checked);
  item->setData(kFileRole, file);
  item->setData(kFormatRole, m_format->currentText());
  item->setData(kExtraRole, m_extra->text().trimmed());
  item->setToolTip(QStringLiteral("%1 (%2)").arg(file, m_format->currentText()));
  m_tasks->addItem(item);
  m_taskFile->clear();
  updateState();
}

QString EvaluatePanel::blockedReason() const {
  if (current() == nullptr) return tr("Choose a model: a run's checkpoint or a model folder.");
  int checked = 0;
  for (int i = 0; i < m_tasks->count(); ++i) checked += m_tasks->item(i)->checkState() == Qt::Checked ? 1 : 0;
  if (m_passkey->isChecked()) {
    if (!QFileInfo(m_haystack->text().trimmed()).isFile()) return tr("The passkey test needs a haystack text file.");
    const auto lengths = parseList<int>(m_lengths->text(), true);
    if (lengths.isEmpty() || *std::min_element(lengths.begin(), lengths.end()) < 64)
      return tr("Lengths: a comma list of prompt lengths of at least 64 tokens (1k = 1024).");
    const int longest = *std::max_element(lengths.begin(), lengths.end());
    if (m_context > 0 && longest + kPasskeyAnswerTokens > m_context) {
      return tr("Lengths: %1 tokens and the %2 answer tokens exceed the model's context of %3; use at most %4.")
          .arg(longest)
          .arg(kPasskeyAnswerTokens)
          .arg(m_context)
          .arg(m_context - kPasskeyAnswerTokens);
    }
    const auto depths = parseList<double>(m_depths->text(), false);
    if (depths.isEmpty() || std::any_of(depths.begin(), depths.end(), [](double d) { return d < 0 || d > 1; }))
      return tr("Depths: a comma list of numbers from 0 (start) to 1 (end).");
  } else if (checked == 0) {
    return tr("Add a task file or turn on the passkey test.");
  }
  return {};
}

RunSpec EvaluatePanel::spec() const {
  RunSpec s;
  if (!blockedReason().isEmpty()) return s;
  const ModelChoice& c = *current();
  s.kind = RunKind::Eval;
  s.modelDir = c.dir.toStdString();
  s.device = m_device->currentText().toStdString();
  s.evaluatesRun = c.run;
  s.evaluatesStep = c.step;
  if (const KvQuantSettings cache = kvCacheChoice(m_kvCache); cache.on()) s.kvCaches = {cache};
  for (int i = 0; i < m_tasks->count(); ++i) {
    const QListWidgetItem* item = m_tasks->item(i);
    if (item->checkState() != Qt::Checked) continue;
    EvalTaskSpec t;
    t.name = item->text().toStdString();
    t.file = item->data(kFileRole).toString().toStdString();
    t.format = findChoice<TaskFormat>(item->data(kFormatRole).toString().toStdString()).value_or(TaskFormat::Jsonl);
    const std::string extra = item->data(kExtraRole).toString().toStdString();
    if (t.format == TaskFormat::Mmlu) t.dev = extra;
    if (t.format == TaskFormat::Piqa) t.labels = extra;
    t.limit = m_limit->value();
    s.evalTasks.push_back(t);
  }
  if (m_passkey->isChecked()) {
    s.passkey.file = m_haystack->text().trimmed().toStdString();
    const auto lengths = parseList<int>(m_lengths->text(), true);
    const auto depths = parseList<double>(m_depths->text(), false);
    s.passkey.lengths.assign(lengths.begin(), lengths.end());
    s.passkey.depths.assign(depths.begin(), depths.end());
    s.passkey.trials = m_trials->value();
  }
  s.name = "evaluate " + c.label.toStdString();
  if (!s.kvCaches.empty()) s.name += ", " + kvQuantLabel(s.kvCaches.front());
  return s;
}

void EvaluatePanel::followContext() {
  const ModelChoice* c = current();
  const QString dir = c != nullptr ? c->dir : QString();
  if (dir == m_contextDir) return;  // read once per chosen model, not on every refresh
  m_contextDir = dir;
  m_context = c != nullptr ? contextOf(c->dir) : 0;
  if (!m_lengthsTyped) {
    const QSignalBlocker block(m_lengths);
    m_lengths->setText(defaultPasskeyLengths(m_context));
  }
  m_lengths->setToolTip(m_context > 0 ? tr("Prompt lengths in tokens; with the %1 answer tokens each fits the model's "
                                           "context of %2")
                                            .arg(kPasskeyAnswerTokens)
                                            .arg(m_context)
                                      : tr("Prompt lengths in tokens (1k = 1024)"));
}

void EvaluatePanel::updateState() {
  const QString why = blockedReason();
  m_evaluate->setEnabled(why.isEmpty());
  m_evaluate->setToolTip(why);
  m_status->setText(why);
}

// The chosen model's stored figures: a checkpoint's under its run and step; a
// folder's under its evaluation jobs, the newest figure of each task. Every
// task's rows, one per cache it was scored over; the passkey grid of the
// cache chosen in the KV cache box.
void EvaluatePanel::showResults() {
  m_results->setRowCount(0);
  QVector<PasskeyCellView> cells;
  const ModelChoice* c = current();
  if (c == nullptr) {
    m_heatmap->setCells(cells);
    return;
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> sources;  // (run, step), the newest first
  if (c->run > 0) {
    sources.emplace_back(c->run, c->step);
  } else {
    const auto runs = m_store->listRuns();
    for (auto r = runs.rbegin(); r != runs.rend(); ++r) {
      if (r->kind != "eval") continue;
      try {
        const auto j = nlohmann::json::parse(r->specJson);
        if (j.value("model_dir", "") == c->dir.toStdString() && !j.contains("evaluates"))
          sources.emplace_back(r->id, 0);
      } catch (const std::exception&) {
      }
    }
  }
  const std::string passkey = kvQuantTaskName("passkey", kvCacheChoice(m_kvCache));
  std::map<std::string, std::map<std::string, EvaluationRecord>> tasks;
  std::set<std::pair<int, double>> seenCells;
  for (const auto& [run, step] : sources) {
    for (const EvaluationRecord& e : m_store->listEvaluations(run)) {
      if (e.step != step) continue;
      int length = 0;
      double depth = 0;
      if (parsePasskeyMetricName(e.metric, length, depth)) {
        if (e.task == passkey && seenCells.insert({length, depth}).second)
          cells.push_back({length, depth, e.value, static_cast<int>(e.items)});
      } else {
        tasks[e.task].try_emplace(e.metric, e);  // a newer job's figure stays
      }
    }
  }
  // One row per task and cache: the tasks in order, each task's caches from full precision down.
  struct Row {
    std::string task;
    KvQuantSettings cache;
    const std::map<std::string, EvaluationRecord>* metrics;
  };
  std::vector<Row> rows;
  for (const auto& [stored, metrics] : tasks) {
    auto [task, cache] = splitKvQuantTaskName(stored);
    rows.push_back({task, cache, &metrics});
  }
  const auto order = [](const Row& r) {
    return std::make_tuple(r.task, -(r.cache.on() ? r.cache.bits : 32), r.cache.group, r.cache.residual);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) { return order(a) < order(b); });
  for (const Row& r : rows) {
    const int row = m_results->rowCount();
    m_results->insertRow(row);
    auto cell = [&](const char* metric) {
      const auto it = r.metrics->find(metric);
      return it == r.metrics->end()
                 ? QStringLiteral("–")
                 : QStringLiteral("%1 ± %2").arg(it->second.value, 0, 'f', 3).arg(it->second.stderrValue, 0, 'f', 3);
    };
    const EvaluationRecord& any = r.metrics->begin()->second;
    auto* name = new QTableWidgetItem(QString::fromStdString(r.task));
    name->setToolTip(QString::fromStdString(kvQuantTaskName(r.task, r.cache)));
    m_results->setItem(row, 0, name);
    std::string cache = r.cache.on() ? kvQuantLabel(r.cache) : std::string("full");
    if (const auto at = cache.find(" cache"); at != std::string::npos) cache.erase(at, 6);
    m_results->setItem(row, 1, new QTableWidgetItem(QString::fromStdString(cache)));
    m_results->setItem(row, 2, new QTableWidgetItem(cell("acc")));
    m_results->setItem(row, 3, new QTableWidgetItem(cell("acc_norm")));
    m_results->setItem(
        row, 4, new QTableWidgetItem(any.partial ? tr("%1 (partial)").arg(any.items) : QString::number(any.items)));
  }
  const KvQuantSettings chosen = kvCacheChoice(m_kvCache);
  m_heatmap->setCacheLabel(chosen.on() ? QString::fromStdString(kvQuantLabel(chosen)) : QString());
  m_heatmap->setCells(cells);
}

}  // namespace latentlab::ui
