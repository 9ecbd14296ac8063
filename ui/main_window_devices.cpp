// The window's devices: `latentlab-engine devices --json` asked at start,
// given to the Training panel's memory plan, the job controller's GPU
// placement and the presets' check.
#include <QProcess>
#include "jobs/engine_path.h"
#include "jobs/job_controller.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
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

}  // namespace latentlab::ui
