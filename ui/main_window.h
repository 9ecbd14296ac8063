// The main window: composes the panels (runs | chart | model/conversion/
// training tabs, jobs and log below) over one workspace; owns the GUI
// thread's store connection and the job controller. No logic of its own
// beyond wiring, menus, and the close/reattach questions.
#pragma once

#include <QMainWindow>
#include <QTimer>
#include <memory>
#include <vector>

#include "latentlab/engine.h"

#include "charts/chart_view.h"
#include "workspace.h"

class QFileSystemWatcher;
class QSplitter;
class QTabWidget;
class QLabel;
class QProcess;

namespace latentlab {
class RunStore;
struct RunSpec;
}  // namespace latentlab

namespace latentlab::ui {

class ChartView;
class ComparePanel;
class ConversionPanel;
class EvaluatePanel;
class TryPanel;
class JobController;
class JobTableModel;
class JobsPanel;
class LogPanel;
class MessageBanner;
class ModelExport;
class KvAllocationPreview;
class ModelPanel;
class RunTreeModel;
class RunsPanel;
class TrainingPanel;

struct MainWindowOptions {
  bool startQueuedRuns = true;   // reattach and start the store's queued runs
  bool restoreLayout = true;     // QSettings geometry and splitters
  bool askBeforeClosing = true;  // ask once when jobs are running
  QString enginePath;            // empty: engineExecutablePath()
};

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(const Workspace& workspace, MainWindowOptions options = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  const Workspace& workspace() const { return m_ws; }
  JobController* jobs() const { return m_jobs; }
  // The devices with their memory, as `latentlab-engine devices --json`
  // reports them (the window asks the engine at start): the Training panel's
  // memory plan, the job controller's GPU placement and the presets' check.
  // A list given here replaces the engine's, even one still to come.
  void setDevices(const std::vector<DeviceInfo>& devices);
  ChartView* chart() const;
  ComparePanel* comparePanel() const { return m_compare; }
  RunsPanel* runsPanel() const { return m_runs; }
  RunTreeModel* runModel() const { return m_runModel; }
  ModelPanel* modelPanel() const { return m_model; }
  ConversionPanel* conversionPanel() const { return m_conversion; }
  TrainingPanel* trainingPanel() const { return m_training; }
  MessageBanner* banner() const { return m_banner; }
  QTabWidget* rightTabs() const { return m_rightTabs; }
  QTabWidget* bottomTabs() const { return m_bottomTabs; }
  QSplitter* verticalSplitter() const { return m_vertical; }
  EvaluatePanel* evaluatePanel() const { return m_evaluate; }
  TryPanel* tryPanel() const { return m_try; }

  // Registers the spec as a queued run and hands it to the job controller;
  // with a cluster profile, the run is placed on that Slurm cluster.
  qint64 submitRun(const RunSpec& spec, const QString& cluster = {});
  // Registers an evaluation job (kind eval) in the "evaluations" experiment and queues it.
  qint64 submitEvaluation(const RunSpec& spec);
  // Loads a preset file at a scale: the experiment and its runs, queued.
  bool loadPresetFile(const QString& path, const QString& scale);
  void switchWorkspace(const QString& dir);
  // The run's newest checkpoint written as a DeepSeek-V3 model folder. A model
  // the layout cannot express is refused in the banner with the reason;
  // otherwise the new folder is asked for (`outDir` empty) and
  // `latentlab-engine export` runs in the background. Returns whether it started.
  bool exportRunCheckpoint(qint64 runId, QString outDir = {});
  // The last export's outcome, as shown in the status bar (empty before any).
  QString lastExportMessage() const { return m_lastExport; }

 Q_SIGNALS:
  void exportFinished(bool ok, const QString& outDir);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildMenus();
  void wire();
  void onStatusChanged(qint64 runId, RunStatus status);
  // The selected runs to the compare view; a preset's experiment opens on its figure.
  void showSelection(const QVector<ChartRun>& runs);
  void updateStatusBar();
  // Run is disabled while the Model tab holds no usable model or the conversion is impossible.
  void updateRunBlock();
  void probeDevices();
  // The workspace's cluster profiles, read again whenever clusters/ changes.
  void watchClusterProfiles();
  void readClusterProfiles();
  void applyDevices(const std::vector<DeviceInfo>& devices);
  // A path a preset names that is not here: the user's choice, asked once
  // and remembered per workspace. Empty when the user declines.
  QString presetPath(const QString& presetTitle, const QString& original, bool folder);
  std::vector<DeviceInfo> m_devices;
  QProcess* m_deviceProbe = nullptr;  // `devices --json` while it runs
  QFileSystemWatcher* m_clusterWatch = nullptr;
  QStringList m_clustersOffered;
  void saveLayout();
  void restoreLayout();
  void keepPlotShare();  // the plot keeps at least 40% of the window's height

  Workspace m_ws;
  MainWindowOptions m_options;
  std::shared_ptr<RunStore> m_store;
  JobController* m_jobs = nullptr;
  RunTreeModel* m_runModel = nullptr;
  JobTableModel* m_jobModel = nullptr;
  RunsPanel* m_runs = nullptr;
  ComparePanel* m_compare = nullptr;
  ModelPanel* m_model = nullptr;
  ConversionPanel* m_conversion = nullptr;
  TrainingPanel* m_training = nullptr;
  JobsPanel* m_jobsPanel = nullptr;
  LogPanel* m_log = nullptr;
  EvaluatePanel* m_evaluate = nullptr;
  TryPanel* m_try = nullptr;
  MessageBanner* m_banner = nullptr;
  QTabWidget* m_rightTabs = nullptr;
  QTabWidget* m_bottomTabs = nullptr;
  QSplitter* m_vertical = nullptr;
  QList<int> m_sizesBeforeTry;  // the plot/bottom split before Try it opened the bottom area
  QSplitter* m_horizontal = nullptr;
  QLabel* m_statusJobs = nullptr;
  QTimer m_refreshTimer;
  ModelExport* m_export = nullptr;
  KvAllocationPreview* m_kvPreview = nullptr;  // the Conversion tab's per-layer split, made on first use
  QString m_lastExport;
};

}  // namespace latentlab::ui
