// Where the job controller's jobs run: a job's devices, one per rank; the
// slot each device takes (a GPU of its own, or a share of the CPU); the slots
// running jobs hold, so a queued job starts only when every one of its
// devices has room; and the GPU a job that asks for "cuda" is placed on.
#pragma once

#include <QHash>
#include <QString>
#include <QStringList>
#include <string>
#include <vector>

#include "latentlab/engine.h"

namespace latentlab::ui {

// The devices of one job, one per rank: "cuda:0,cuda:1" -> {cuda:0, cuda:1}.
QStringList rankDevicesOf(const QString& device);

// The slot a device takes: itself for a GPU ("cuda" is cuda:0), "cpu" for the CPU.
QString slotOfDevice(const QString& device);

// The slots one job needs: one per GPU rank; the CPU ranks of one job share
// the cores, so they take one CPU slot together.
QHash<QString, int> slotNeedsOf(const QString& device);

// The slots held by running jobs against what each can take (one job a GPU,
// `cpuSlots` jobs on the CPU).
class SlotPool {
 public:
  explicit SlotPool(int cpuSlots) : m_cpuSlots(cpuSlots) {}
  void hold(const QString& device);
  bool fits(const QString& device) const;
  // The slots some job holds now (GPUs, and "cpu").
  std::vector<std::string> busySlots() const;

 private:
  int capacityOf(const QString& slot) const { return slot == QLatin1String("cpu") ? m_cpuSlots : 1; }
  int m_cpuSlots;
  QHash<QString, int> m_busy;
};

// For a job that asks for "cuda": the free GPU with the most memory on which
// the run's memory plan fits (empty: wait, only busy GPUs would hold it), or
// "cuda" when the spec has no plan (the engine says why when it starts).
std::string placeOnGpu(const std::string& specJson, long long runId, const std::vector<DeviceInfo>& devices,
                       const std::vector<std::string>& busy);

}  // namespace latentlab::ui
