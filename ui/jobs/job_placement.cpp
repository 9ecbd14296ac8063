// Job placement on devices and slots; see job_placement.h.
#include "jobs/job_placement.h"

#include "latentlab/error.h"
#include "latentlab/memory_plan.h"
#include "latentlab/run_spec.h"

namespace latentlab::ui {

QStringList rankDevicesOf(const QString& device) {
  QStringList out;
  for (const std::string& d : deviceList(device.toStdString())) {
    if (!d.empty()) out.push_back(QString::fromStdString(d).trimmed());
  }
  if (out.isEmpty()) out.push_back(QStringLiteral("cpu"));
  return out;
}

QString slotOfDevice(const QString& device) {
  if (device.startsWith(QLatin1String("cuda")))
    return device == QLatin1String("cuda") ? QStringLiteral("cuda:0") : device;
  return QStringLiteral("cpu");
}

QHash<QString, int> slotNeedsOf(const QString& device) {
  QHash<QString, int> need;
  for (const QString& d : rankDevicesOf(device)) {
    const QString slot = slotOfDevice(d);
    need[slot] = slot == QLatin1String("cpu") ? 1 : need.value(slot) + 1;
  }
  return need;
}

void SlotPool::hold(const QString& device) {
  const QHash<QString, int> need = slotNeedsOf(device);
  for (auto it = need.cbegin(); it != need.cend(); ++it) m_busy[it.key()] += it.value();
}

bool SlotPool::fits(const QString& device) const {
  const QHash<QString, int> need = slotNeedsOf(device);
  for (auto it = need.cbegin(); it != need.cend(); ++it) {
    if (m_busy.value(it.key()) + it.value() > capacityOf(it.key())) return false;
  }
  return true;
}

std::vector<std::string> SlotPool::busySlots() const {
  std::vector<std::string> taken;
  for (auto it = m_busy.cbegin(); it != m_busy.cend(); ++it)
    if (it.value() > 0) taken.push_back(it.key().toStdString());
  return taken;
}

std::string placeOnGpu(const std::string& specJson, long long runId, const std::vector<DeviceInfo>& devices,
                       const std::vector<std::string>& busy) {
  try {
    const RunSpec spec = parseRunSpec(specJson, "run " + std::to_string(runId));
    std::int64_t sourceParameters = 0;
    const ModelConfig cfg = plannedModelConfig(spec, &sourceParameters);
    return chooseGpu(spec, cfg, sourceParameters, devices, busy);
  } catch (const Error&) {
    return "cuda";  // no plan (e.g. the model folder is gone): the engine says why when it starts
  }
}

}  // namespace latentlab::ui
