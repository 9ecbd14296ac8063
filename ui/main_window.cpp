// Main window: panel composition and wiring (see main_window.h).
#include "main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QColorDialog>
#include <QDateTime>
#include <QDir>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QSet>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTreeView>
#include <QUrl>
#include <QVBoxLayout>

#include <nlohmann/json.hpp>

#include "charts/chart_view.h"
#include "charts/run_palette.h"
#include "jobs/engine_path.h"
#include "jobs/job_controller.h"
#include "jobs/kv_allocation_preview.h"
#include "latentlab/demo.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "latentlab/memory_plan.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"
#include "models/job_table_model.h"
#include "models/run_tree_model.h"
#include "panels/attention_panel.h"
#include "panels/compare_panel.h"
#include "panels/conversion_panel.h"
#include "panels/evaluate_panel.h"
#include "panels/jobs_panel.h"
#include "panels/log_panel.h"
#include "panels/message_banner.h"
#include "panels/model_panel.h"
#include "panels/runs_panel.h"
#include "panels/training_panel.h"
#include "panels/try_panel.h"
#include "panels/wheel_guard.h"
#include "preset_loader.h"
#include "preset_plan.h"

namespace latentlab::ui {

namespace {

RunSpec defaultNewRunSpec() {
  RunSpec s;
  s.name = "my run";
  s.data.corpus = "demo";
  s.data.seqLen = 128;
  s.steps = 60;
  s.microBatch = 8;
  s.optimizer.lr = 1e-3;
  s.schedule.warmupSteps = 5;
  s.evalEvery = 20;
  s.checkpointEvery = 0;
  return s;
}

// A tab's panel with a margin, in a scroll area unless it scrolls itself: a
// small window scrolls the panel instead of cutting it off.
QWidget* padded(QWidget* w, bool scrolls = true) {
  auto* host = new QWidget;
  auto* l = new QVBoxLayout(host);
  l->setContentsMargins(4, 4, 4, 4);
  l->addWidget(w);
  if (!scrolls) return host;
  auto* scroll = new QScrollArea;
  scroll->setWidget(host);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  return scroll;
}

}  // namespace

MainWindow::MainWindow(const Workspace& workspace, MainWindowOptions options, QWidget* parent)
    : QMainWindow(parent), m_ws(workspace), m_options(std::move(options)) {
  ensureResourcesLoaded();
  WheelGuard::install();  // before the panels' fields are polished
  // The platform appends the application's display name ("… — LatentLab").
  setWindowTitle(QDir::toNativeSeparators(m_ws.dir));
  setWindowIcon(QIcon(QStringLiteral(":/icons/latentlab.svg")));
  m_store = std::make_shared<RunStore>(m_ws.dbPath().toStdString());
  m_jobs = new JobController(m_store, m_ws.dir,
                             m_options.enginePath.isEmpty() ? engineExecutablePath() : m_options.enginePath, this);
  m_runModel = new RunTreeModel(m_store, this);
  m_jobModel = new JobTableModel(m_jobs, this);

  m_runs = new RunsPanel(m_runModel);
  m_compare = new ComparePanel(m_store);
  m_compare->chart()->setExportFolder(m_ws.dir);  // exports go to the workspace, not where LatentLab was started
  m_model = new ModelPanel;
  m_conversion = new ConversionPanel;
  m_training = new TrainingPanel;
  m_jobsPanel = new JobsPanel(m_jobs, m_jobModel);
  m_log = new LogPanel(m_jobs);
  m_evaluate = new EvaluatePanel(m_store, m_ws.dir);
  m_try = new TryPanel(m_store, m_ws.dir, m_jobs->enginePath());
  m_banner = new MessageBanner;

  m_rightTabs = new QTabWidget;
  m_rightTabs->addTab(padded(m_model), tr("Model"));
  m_rightTabs->addTab(padded(m_conversion), tr("Conversion"));
  m_rightTabs->addTab(padded(m_training, /*scrolls=*/false),
                      tr("Training"));  // its own scroll area, buttons fixed below
  m_rightTabs->addTab(padded(m_evaluate), tr("Evaluate"));
  m_rightTabs->setMinimumWidth(330);
  m_bottomTabs = new QTabWidget;
  m_bottomTabs->addTab(m_jobsPanel, tr("Jobs"));
  m_bottomTabs->addTab(m_log, tr("Log"));
  m_bottomTabs->addTab(m_try, tr("Try it"));
  m_bottomTabs->setDocumentMode(true);

  m_horizontal = new QSplitter(Qt::Horizontal);
  m_horizontal->addWidget(m_runs);
  m_horizontal->addWidget(m_compare);
  m_horizontal->addWidget(m_rightTabs);
  m_horizontal->setStretchFactor(0, 0);
  m_horizontal->setStretchFactor(1, 1);
  m_horizontal->setStretchFactor(2, 0);
  m_horizontal->setSizes({350, 690, 400});
  m_horizontal->setChildrenCollapsible(false);
  m_vertical = new QSplitter(Qt::Vertical);
  m_vertical->addWidget(m_horizontal);
  m_vertical->addWidget(m_bottomTabs);
  m_vertical->setStretchFactor(0, 1);
  m_vertical->setSizes({700, 170});
  m_vertical->setChildrenCollapsible(false);

  auto* central = new QWidget;
  auto* cl = new QVBoxLayout(central);
  cl->setContentsMargins(6, 6, 6, 0);
  cl->setSpacing(6);
  cl->addWidget(m_banner);
  cl->addWidget(m_vertical, 1);
  setCentralWidget(central);
  m_statusJobs = new QLabel;
  statusBar()->addPermanentWidget(m_statusJobs);
  statusBar()->showMessage(tr("Workspace %1").arg(QDir::toNativeSeparators(m_ws.dir)));
  // 1440x900, or the screen's free area when it is smaller (1280x800 laptops).
  QSize size(1440, 900);
  if (const QScreen* s = QGuiApplication::primaryScreen()) size = size.boundedTo(s->availableGeometry().size());
  resize(size);

  probeDevices();
  watchClusterProfiles();
  m_training->setSpecContributor([this](RunSpec& s) {
    m_model->applyTo(s);
    m_conversion->applyTo(s);
  });

  buildMenus();
  wire();

  // Defaults for a new run: the demo base when it exists (convert it), else a built-in shape.
  RunSpec initial = defaultNewRunSpec();
  if (QFileInfo::exists(m_ws.demoBaseDir() + QStringLiteral("/config.json"))) {
    m_model->openFolder(m_ws.demoBaseDir());
    m_conversion->setMethod(true);
    initial.kind = RunKind::ConvertFinetune;
    initial.modelDir = m_ws.demoBaseDir().toStdString();
  } else {
    m_model->selectArchitecture(QString::fromLatin1(kDemoArch));
    initial.architecture = kDemoArch;
  }
  m_training->setSpec(initial);
  m_conversion->setConvertible(m_model->usesFolder());
  m_conversion->setModelConfig(m_model->config());
  m_training->setBaseModel(m_model->usesFolder() ? std::nullopt : m_model->config());
  updateRunBlock();

  if (m_options.restoreLayout) restoreLayout();
  m_jobs->reattach(m_options.startQueuedRuns);
  m_runModel->refresh();
  // Show the newest run so the chart is never empty when there is something to draw.
  // (An evaluation job has no curves: the newest training run instead.)
  const auto runs = m_store->listRuns();
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (it->kind == "eval") continue;
    m_runs->selectRun(it->id);
    break;
  }
  m_refreshTimer.setInterval(5000);
  connect(&m_refreshTimer, &QTimer::timeout, this, [this] {
    m_runModel->refresh();
    m_compare->refreshTable();                                  // running runs' tokens, tokens/s and validation loss
    if (m_evaluate->isVisible()) m_evaluate->refreshResults();  // an evaluation's figures as they are stored
    updateStatusBar();
  });
  m_refreshTimer.start();
  updateStatusBar();
}

MainWindow::~MainWindow() {
  if (m_deviceProbe != nullptr) {  // a window closed within a second of opening
    m_deviceProbe->disconnect(this);
    m_deviceProbe->kill();
    m_deviceProbe->waitForFinished(2000);
  }
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* newWs = file->addAction(tr("&New workspace…"));
  connect(newWs, &QAction::triggered, this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Choose an empty folder for the new workspace"));
    if (!dir.isEmpty()) switchWorkspace(dir);
  });
  QAction* openWs = file->addAction(tr("&Open workspace…"));
  openWs->setShortcut(QKeySequence::Open);
  connect(openWs, &QAction::triggered, this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a workspace folder"), m_ws.dir);
    if (!dir.isEmpty()) switchWorkspace(dir);
  });
  QAction* demo = file->addAction(tr("Open the &demo workspace"));
  connect(demo, &QAction::triggered, this, [this] { switchWorkspace(defaultDemoWorkspaceDir()); });
  file->addSeparator();
  QMenu* presets = file->addMenu(tr("Load &preset"));
  for (const QString& path : builtinPresetFiles()) {
    QString title = QFileInfo(path).completeBaseName();
    try {
      title = loadPreset(path, QStringLiteral("demo"), m_ws.dir).title;
    } catch (const Error&) {
    }
    for (const QString& scale : presetScales(path)) {
      QAction* a = presets->addAction(tr("%1 — %2 scale").arg(title, scale));
      connect(a, &QAction::triggered, this, [this, path, scale] { loadPresetFile(path, scale); });
    }
  }
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"));
  quit->setShortcut(QKeySequence::Quit);
  connect(quit, &QAction::triggered, this, &QWidget::close);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  QAction* start = run->addAction(tr("&Run the current spec"));
  start->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  connect(start, &QAction::triggered, this, [this] {
    if (m_training->blockedReason().isEmpty()) submitRun(m_training->spec());
  });

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  QAction* about = help->addAction(tr("&About LatentLab"));
  connect(about, &QAction::triggered, this, [this] {
    QMessageBox::about(this, tr("About LatentLab"),
                       tr("<b>LatentLab %1</b><p>Convert Llama-family models to Multi-head Latent Attention, "
                          "fine-tune them and compare runs.</p><p>Engine: %2</p>")
                           .arg(QApplication::applicationVersion(), m_jobs->enginePath().toHtmlEscaped()));
  });
}

// The devices with their total and free memory, from the engine (this process
// never initialises CUDA itself): the device list of the Training panel and
// its memory plan's verdict. Until the engine answers the list is "cpu".
QString MainWindow::presetPath(const QString& presetTitle, const QString& original, bool folder) {
  QSettings settings;
  settings.beginGroup(QStringLiteral("presetPaths"));
  const QString key =
      QString::fromLatin1(QUrl::toPercentEncoding(QDir(m_ws.dir).absolutePath() + QLatin1Char('|') + original));
  const QString remembered = settings.value(key).toString();
  auto usable = [folder](const QString& p) {
    return folder ? QFileInfo::exists(p + QStringLiteral("/config.json"))
                  : QFileInfo(p).isFile() || QFileInfo(p).isDir();
  };
  if (!remembered.isEmpty() && usable(remembered)) return remembered;
  const QString name = QFileInfo(original).fileName();
  const QString chosen =
      folder ? QFileDialog::getExistingDirectory(
                   this, tr("%1: choose the %2 model folder (config.json and safetensors)").arg(presetTitle, name),
                   m_ws.dir)
             : QFileDialog::getOpenFileName(
                   this, tr("%1: choose the training data (%2: text, JSONL or a folder's file)").arg(presetTitle, name),
                   m_ws.dir);
  if (chosen.isEmpty()) return {};
  if (!usable(chosen)) {
    m_banner->showMessage(MessageBanner::Level::Error,
                          tr("%1 is not a Hugging Face model folder: it has no config.json").arg(chosen),
                          tr("Choose the folder that holds config.json and the .safetensors files."));
    return {};
  }
  settings.setValue(key, chosen);
  return chosen;
}

void MainWindow::updateRunBlock() {
  QString reason = m_model->blockReason();
  if (reason.isEmpty()) reason = m_conversion->blockReason();
  if (reason.isEmpty()) reason = m_training->attentionPanel()->blockReason();
  m_training->setBlockedReason(reason);
}

void MainWindow::wire() {
  connect(m_model, &ModelPanel::modelChanged, this, [this] {
    m_conversion->setConvertible(m_model->usesFolder());
    m_conversion->setModelConfig(m_model->config());
    m_training->setBaseModel(m_model->usesFolder() ? std::nullopt : m_model->config());
    updateRunBlock();
  });
  connect(m_training->attentionPanel(), &AttentionPanel::validityChanged, this, &MainWindow::updateRunBlock);
  connect(m_conversion, &ConversionPanel::validityChanged, this, &MainWindow::updateRunBlock);
  connect(m_conversion, &ConversionPanel::allocationWanted, this, [this] {
    if (m_kvPreview == nullptr) {
      m_kvPreview = new KvAllocationPreview(
          m_options.enginePath.isEmpty() ? engineExecutablePath() : m_options.enginePath, m_ws.dir, this);
      connect(m_kvPreview, &KvAllocationPreview::finished, this,
              [this](bool ok, const KvAllocation& a, const QString& message) {
                if (ok) {
                  m_conversion->setAllocation(a);
                } else {
                  m_conversion->setAllocationFailed(message);
                }
              });
    }
    m_kvPreview->start(m_training->spec());
  });
  connect(m_training, &TrainingPanel::specLoaded, this, [this](const RunSpec& s) {
    m_model->loadFrom(s);
    m_conversion->loadFrom(s);
  });
  connect(m_training, &TrainingPanel::runRequested, this,
          [this](const RunSpec& s) { submitRun(s, m_training->cluster()); });
  connect(m_runs, &RunsPanel::selectionChanged, this, &MainWindow::showSelection);
  auto chooseColor = [this](qint64 runId) {
    const QColor c = QColorDialog::getColor(runColor(runId), this, tr("Colour of %1").arg(m_runModel->runName(runId)));
    if (c.isValid()) m_runModel->changeRunColor(runId, c);
  };
  connect(m_runs, &RunsPanel::colorRequested, this, chooseColor);
  connect(chart(), &ChartView::colorChangeRequested, this, chooseColor);
  connect(m_runModel, &RunTreeModel::runColorChanged, this, [this] {
    chart()->updateColors();
    m_compare->refreshTable();
  });
  connect(m_runs, &RunsPanel::retryRequested, m_jobs, &JobController::retry);
  connect(m_runs, &RunsPanel::cancelRequested, m_jobs, &JobController::cancel);
  connect(m_runs, &RunsPanel::exportRequested, this, [this](qint64 id) {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export metrics"), chart()->exportFolder() + QStringLiteral("/run-%1.csv").arg(id), tr("CSV (*.csv)"));
    if (path.isEmpty()) return;
    QSettings().setValue(QStringLiteral("export/lastFolder"), QFileInfo(path).absolutePath());
    try {
      m_store->exportCsv(id, path.toStdString());
      statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
    } catch (const Error& e) {
      m_banner->showError(e);
    }
  });
  connect(m_runs, &RunsPanel::exportModelRequested, this, [this](qint64 id) { exportRunCheckpoint(id); });
  connect(m_runs, &RunsPanel::deleteRequested, this, [this](qint64 id) {
    if (QMessageBox::question(this, tr("Delete run"), tr("Delete run #%1 and all its metrics?").arg(id)) !=
        QMessageBox::Yes)
      return;
    try {
      m_store->deleteRun(id);
    } catch (const Error& e) {
      m_banner->showError(e);
    }
    m_runModel->refresh();
  });
  connect(m_jobs, &JobController::progress, this, [this](qint64 runId) { chart()->pollStore(runId); });
  connect(m_jobs, &JobController::evalReported, this, [this](qint64 runId) {
    chart()->pollStore(runId);
    m_compare->refreshTable();
  });
  connect(m_jobs, &JobController::statusChanged, this, &MainWindow::onStatusChanged);
  connect(m_jobs, &JobController::jobsChanged, this, &MainWindow::updateStatusBar);
  connect(m_evaluate, &EvaluatePanel::evaluateRequested, this, [this](const RunSpec& s) { submitEvaluation(s); });
  // Two models' text needs room: the Try it tab opens the bottom area to at
  // least 320 px while it is shown, and gives the room back when it is left.
  connect(m_bottomTabs, &QTabWidget::currentChanged, this, [this] {
    if (m_bottomTabs->currentWidget() != m_try) {
      if (!m_sizesBeforeTry.isEmpty()) m_vertical->setSizes(m_sizesBeforeTry);
      m_sizesBeforeTry.clear();
      return;
    }
    m_try->refresh();
    const QList<int> sizes = m_vertical->sizes();
    if (sizes.size() == 2 && sizes[1] < 320) {
      m_sizesBeforeTry = sizes;
      m_vertical->setSizes({sizes[0] + sizes[1] - 320, 320});
    }
  });
  connect(m_rightTabs, &QTabWidget::currentChanged, this, [this] {
    if (m_rightTabs->currentIndex() == m_rightTabs->count() - 1) m_evaluate->refresh();
  });
  connect(m_jobsPanel, &JobsPanel::logRequested, this, [this](qint64 runId) {
    m_log->showRun(runId);
    m_bottomTabs->setCurrentWidget(m_log);
  });
}

qint64 MainWindow::submitRun(const RunSpec& given, const QString& cluster) {
  try {
    RunSpec spec = given;
    if (!cluster.isEmpty()) {
      // Every rank's device comes from the profile, as `latentlab-engine submit` does.
      spec.device = readClusterProfile(cluster.toStdString(), m_ws.dir.toStdString()).device;
    }
    validateRunSpec(spec, "the run spec");
    const std::int64_t exp = findOrCreateExperiment(*m_store, "workbench", "", "Runs started from the workbench");
    const std::string name = spec.name.empty() ? "run" : spec.name;
    const std::int64_t id = m_store->createRun(exp, name, spec.kind, runSpecToJson(spec), spec.device);
    if (!cluster.isEmpty()) m_store->addTag(id, "cluster:" + cluster.toStdString());
    m_runModel->refresh();
    m_runs->selectRun(id);
    m_jobs->enqueue(id);
    m_banner->hide();
    return id;
  } catch (const Error& e) {
    m_banner->showError(e);
    return 0;
  }
}

qint64 MainWindow::submitEvaluation(const RunSpec& spec) {
  try {
    validateRunSpec(spec, "the evaluation");
    const std::int64_t exp =
        findOrCreateExperiment(*m_store, "evaluations", "", "Evaluation jobs started from the workbench");
    const std::int64_t id = m_store->createRun(exp, spec.name, spec.kind, runSpecToJson(spec), spec.device);
    m_runModel->refresh();
    m_jobs->enqueue(id);
    m_banner->hide();
    m_evaluate->statusLabel()->setText(tr("Queued as job #%1: its figures appear below as they are scored.").arg(id));
    return id;
  } catch (const Error& e) {
    m_banner->showError(e);
    return 0;
  }
}

bool MainWindow::loadPresetFile(const QString& path, const QString& scale) {
  try {
    Preset p = loadPreset(path, scale, m_ws.dir);
    // GPU runs need a GPU here; nothing is asked or queued without one.
    const bool wantsGpu = presetWantsGpu(p);
    const std::vector<DeviceInfo> gpus = cudaDevices(m_devices);
    if (wantsGpu && gpus.empty()) {
      m_banner->showMessage(
          MessageBanner::Level::Warning,
          tr("%1 (%2 scale) runs on CUDA GPUs, and this machine has none").arg(p.title, scale),
          tr("The engine sees no CUDA device here (latentlab-engine devices). Load the demo scale, or "
             "this preset on a machine with GPUs."));
      return false;
    }
    // A preset on the demo base before the base exists waits for the run
    // that makes it (queued or running). Any other model folder or data file
    // that is not here is asked for once (and remembered for this workspace).
    qint64 waitFor = 0;
    QHash<QString, QString> replaced;
    for (RunSpec& s : p.runs) {
      const QString model = QString::fromStdString(s.modelDir);
      if (!model.isEmpty() && !QFileInfo::exists(model + QStringLiteral("/config.json"))) {
        const bool demoBase = model == m_ws.demoBaseDir();
        if (demoBase && waitFor == 0) {
          for (const RunRecord& r : m_store->listRuns()) {
            const bool active = r.status == RunStatus::Queued || r.status == RunStatus::Running;
            if (active && isDemoPretrainRun(*m_store, r.id)) waitFor = r.id;
          }
        }
        if (demoBase && waitFor == 0) {
          m_banner->showMessage(
              MessageBanner::Level::Warning, tr("%1 needs the model %2, which is not there yet").arg(p.title, model),
              tr("The demo base is made by the run \"pretrain demo-gqa\" (experiment \"demo bases\"); "
                 "retry that run, then load the preset again."));
          return false;
        }
        if (!demoBase) {
          if (!replaced.contains(model)) replaced[model] = presetPath(p.title, model, /*folder=*/true);
          if (replaced[model].isEmpty()) return false;
          s.modelDir = replaced[model].toStdString();
        }
      }
      const QString corpus = QString::fromStdString(s.data.corpus);
      if (corpus != QLatin1String("demo") && !QFileInfo::exists(corpus)) {
        if (!replaced.contains(corpus)) replaced[corpus] = presetPath(p.title, corpus, /*folder=*/false);
        if (replaced[corpus].isEmpty()) return false;
        s.data.corpus = replaced[corpus].toStdString();
      }
    }
    // GPU runs: the memory plan of each on this machine's GPUs, before anything is queued.
    const QString planNote = wantsGpu ? tr("Memory plan: %1; the runs are spread over the free GPUs")
                                            .arg(presetGpuPlan(p, gpus).join(QStringLiteral("; ")))
                                      : QString();
    std::vector<std::int64_t> ids, waits;
    instantiatePreset(*m_store, p, &ids, &waits);
    m_runModel->refresh();
    // An evaluation of a run of the preset waits for that run (which itself
    // waits for the demo base where it needs it).
    for (std::size_t k = 0; k < ids.size(); ++k) m_jobs->enqueue(ids[k], waits[k] != 0 ? waits[k] : waitFor);
    if (!ids.empty()) {
      const QModelIndex exp = m_runModel->indexOfRun(ids.front()).parent();
      m_runs->view()->selectionModel()->select(exp, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    }
    const QString loaded =
        tr("Loaded the preset %1 (%2 scale): %n run(s) queued", nullptr, static_cast<int>(ids.size()))
            .arg(p.title, scale);
    m_banner->showMessage(
        MessageBanner::Level::Info,
        waitFor == 0 ? loaded
                     : loaded + tr(", waiting for run #%1 (the demo base's pre-training) to complete").arg(waitFor),
        planNote.isEmpty() ? p.chart.note : planNote + QStringLiteral(". ") + p.chart.note);
    return true;
  } catch (const Error& e) {
    m_banner->showError(e);
    return false;
  }
}

ChartView* MainWindow::chart() const {
  return m_compare->chart();
}

void MainWindow::showSelection(const QVector<ChartRun>& runs) {
  m_compare->setRuns(runs);
  // One experiment row selected (alone, or with its own runs): its preset's figure.
  const QModelIndexList rows = m_runs->view()->selectionModel()->selectedRows(0);
  QSet<qint64> experiments, runExperiments;
  for (const QModelIndex& idx : rows) {
    const qint64 exp = idx.data(RunTreeModel::ExperimentIdRole).toLongLong();
    (idx.data(RunTreeModel::IsRunRole).toBool() ? runExperiments : experiments).insert(exp);
  }
  if (experiments.size() != 1) return;
  const qint64 experiment = *experiments.begin();
  if (experiment <= 0 || !(runExperiments - experiments).isEmpty()) return;
  try {
    const QString path =
        QStringLiteral(":/presets/%1.json").arg(QString::fromStdString(m_store->experiment(experiment).preset));
    if (!QFileInfo::exists(path)) return;
    // instantiatePreset names the experiment "<title> (<scale>)".
    const QStringList scales = presetScales(path);
    const QString name = QString::fromStdString(m_store->experiment(experiment).name);
    QString scale = scales.isEmpty() ? QString() : scales.front();
    for (const QString& s : scales) {
      if (name.endsWith(QStringLiteral("(%1)").arg(s))) scale = s;
    }
    if (!scale.isEmpty()) m_compare->applyPresetChart(loadPreset(path, scale, m_ws.dir).chart);
  } catch (const Error& e) {
    m_banner->showError(e);
  }
}

void MainWindow::onStatusChanged(qint64 runId, RunStatus status) {
  m_runModel->refresh();
  m_evaluate->refresh();  // new checkpoints and figures
  if (!m_try->running()) m_try->refresh();
  m_compare->refreshTable();
  updateStatusBar();
  chart()->pollStore(runId);
  const JobInfo* job = m_jobs->job(runId);
  if (status == RunStatus::Failed || status == RunStatus::Crashed) {
    m_banner->showMessage(
        MessageBanner::Level::Error,
        tr("Run #%1 %2 %3")
            .arg(runId)
            .arg(job != nullptr ? job->name : QString(), QString::fromLatin1(runStatusName(status))),
        job != nullptr && !job->error.isEmpty() ? job->error : tr("See the Log tab for the engine's output."));
  }
  if (status == RunStatus::Completed) {
    try {
      if (isDemoPretrainRun(*m_store, runId)) {
        QString why;
        if (publishDemoBase(*m_store, m_ws, runId, &why)) {
          if (!m_model->usesFolder()) m_model->openFolder(m_ws.demoBaseDir());
          m_banner->showMessage(MessageBanner::Level::Info,
                                tr("The demo base model is ready: %1").arg(m_ws.demoBaseDir()),
                                tr("Convert it on the Conversion tab, or load a preset from File › Load preset."));
        } else {
          m_banner->showMessage(MessageBanner::Level::Warning, tr("The demo base model could not be published"), why);
        }
      }
    } catch (const Error& e) {
      m_banner->showError(e);
    }
  }
}

void MainWindow::updateStatusBar() {
  int queued = 0;
  for (qint64 id : m_jobs->jobOrder()) queued += m_jobs->job(id)->status == RunStatus::Queued ? 1 : 0;
  m_statusJobs->setText(tr("%1 running · %2 queued").arg(m_jobs->runningCount()).arg(queued));
}

void MainWindow::switchWorkspace(const QString& dir) {
  try {
    const Workspace ws = openWorkspace(dir);
    if (ws.dir == m_ws.dir) return;
    auto* next = new MainWindow(ws, m_options);
    next->setAttribute(Qt::WA_DeleteOnClose);
    if (!close()) {
      delete next;
      return;
    }
    QSettings().setValue(QStringLiteral("workspace/last"), ws.dir);
    next->show();
  } catch (const Error& e) {
    m_banner->showError(e);
  }
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (m_options.askBeforeClosing && m_jobs->runningCount() > 0) {
    QMessageBox box(QMessageBox::Question, tr("Jobs are running"),
                    tr("%n job(s) are still running.", nullptr, m_jobs->runningCount()), QMessageBox::NoButton, this);
    box.setInformativeText(
        tr("They are separate processes: they can keep running, and LatentLab reattaches to them when "
           "this workspace is opened again. Stopped jobs checkpoint and can be resumed."));
    QPushButton* keep = box.addButton(tr("Keep running"), QMessageBox::AcceptRole);
    QPushButton* stop = box.addButton(tr("Stop jobs"), QMessageBox::DestructiveRole);
    box.addButton(QMessageBox::Cancel);
    box.setDefaultButton(keep);
    box.exec();
    if (box.clickedButton() == static_cast<QAbstractButton*>(keep)) {
      m_jobs->detachAll();
    } else if (box.clickedButton() == static_cast<QAbstractButton*>(stop)) {
      for (qint64 id : m_jobs->jobOrder()) m_jobs->cancel(id);
      QElapsedTimer t;
      t.start();
      while (m_jobs->runningCount() > 0 && t.elapsed() < m_jobs->cancelTimeout() + 2000) {
        QApplication::processEvents(QEventLoop::AllEvents, 50);
      }
    } else {
      event->ignore();
      return;
    }
  }
  if (m_options.restoreLayout) saveLayout();
  event->accept();
}

}  // namespace latentlab::ui
