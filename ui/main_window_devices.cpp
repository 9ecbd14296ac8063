// The window's devices: `latentlab-engine devices --json` asked at start,
// given to the Training panel's memory plan, the job controller's GPU
// placement and the presets' check; and the workspace's Slurm cluster
// profiles, offered by the Training panel's "Run on".
#include <QDir>
#include <QFileSystemWatcher>
#include <QProcess>
#include "jobs/engine_path.h"
#include "jobs/job_controller.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "latentlab/slurm.h"
#include "main_window.h"
#include "panels/evaluate_panel.h"
#include "panels/training_panel.h"

namespace latentlab::ui {

void MainWindow::probeDevices() {
  m_training->setDevices({QStringLiteral("cpu")});
  auto* proc = new QProcess(this);
  m_deviceProbe = proc;
  connect(proc, &QProcess::finished, this, [this, proc](int code, QProcess::ExitStatus status) {
    proc->deleteLater();
    m_deviceProbe = nullptr;
    if (status != QProcess::NormalExit || code != 0) return;
    const std::vector<DeviceInfo> devices = parseDevicesJson(proc->readAllStandardOutput().toStdString());
    if (devices.empty()) return;
    applyDevices(devices);
  });
  connect(proc, &QProcess::errorOccurred, this, [this, proc](QProcess::ProcessError error) {
    if (error != QProcess::FailedToStart) return;  // a crash or kill also ends in finished()
    proc->deleteLater();
    m_deviceProbe = nullptr;
  });
  proc->start(m_jobs->enginePath(), {QStringLiteral("devices"), QStringLiteral("--json")});
}

void MainWindow::setDevices(const std::vector<DeviceInfo>& devices) {
  // A list given here wins: the engine's answer, if still to come, is dropped.
  if (m_deviceProbe != nullptr) {
    m_deviceProbe->disconnect(this);
    m_deviceProbe->kill();
    m_deviceProbe->waitForFinished(2000);
    m_deviceProbe->deleteLater();
    m_deviceProbe = nullptr;
  }
  applyDevices(devices);
}

void MainWindow::applyDevices(const std::vector<DeviceInfo>& devices) {
  m_devices = devices;
  QStringList ids;
  for (const DeviceInfo& d : devices) ids << QString::fromStdString(d.id);
  m_training->setDevices(ids);
  m_training->setDeviceMemory(devices);
  m_jobs->setDevices(devices);
  m_evaluate->setDevices(ids);
}

void MainWindow::watchClusterProfiles() {
  m_clusterWatch = new QFileSystemWatcher(this);
  // The workspace itself too: clusters/ may be made while the window is open.
  connect(m_clusterWatch, &QFileSystemWatcher::directoryChanged, this, &MainWindow::readClusterProfiles);
  connect(m_clusterWatch, &QFileSystemWatcher::fileChanged, this, &MainWindow::readClusterProfiles);
  readClusterProfiles();
}

void MainWindow::readClusterProfiles() {
  const QString dir = m_ws.dir + QStringLiteral("/clusters");
  std::vector<ClusterProfile> profiles;
  QStringList problems;
  // The workspace only until clusters/ exists: its database's journal comes and goes there.
  QStringList watched{QDir(dir).exists() ? dir : m_ws.dir};
  for (const std::string& name : clusterProfileNames(m_ws.dir.toStdString())) {
    watched << dir + QLatin1Char('/') + QString::fromStdString(name) + QStringLiteral(".json");
    try {
      profiles.push_back(readClusterProfile(name, m_ws.dir.toStdString()));
    } catch (const Error& e) {
      problems << QStringLiteral("%1 (%2)").arg(QString::fromStdString(name), QString::fromStdString(e.message()));
    }
  }
  const QStringList now = m_clusterWatch->files() + m_clusterWatch->directories();
  if (!now.isEmpty()) m_clusterWatch->removePaths(now);
  m_clusterWatch->addPaths(watched);
  // The list is rebuilt only when what it offers changed (an open list stays open).
  QStringList offered = problems;
  for (const ClusterProfile& p : profiles) {
    offered << QStringLiteral("%1 %2 %3 %4")
                   .arg(QString::fromStdString(p.name))
                   .arg(p.nodes)
                   .arg(p.tasksPerNode)
                   .arg(QString::fromStdString(p.device));
  }
  if (offered == m_clustersOffered && !offered.isEmpty()) return;
  m_clustersOffered = offered;
  m_training->setClusterProfiles(profiles, problems);
}

}  // namespace latentlab::ui
