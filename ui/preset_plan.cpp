// A preset's runs planned on this machine's GPUs; see preset_plan.h.
#include "preset_plan.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <algorithm>
#include <climits>

#include "latentlab/memory_plan.h"

namespace latentlab::ui {

bool presetWantsGpu(const Preset& preset) {
  return std::any_of(preset.runs.begin(), preset.runs.end(), [](const RunSpec& s) {
    return QString::fromStdString(s.device).startsWith(QLatin1String("cuda"));
  });
}

std::vector<DeviceInfo> cudaDevices(const std::vector<DeviceInfo>& devices) {
  std::vector<DeviceInfo> gpus;
  for (const DeviceInfo& d : devices)
    if (d.id.rfind("cuda:", 0) == 0) gpus.push_back(d);
  return gpus;
}

QStringList presetGpuPlan(const Preset& preset, const std::vector<DeviceInfo>& gpus) {
  QStringList lines, seen;
  if (gpus.empty()) return lines;
  for (const RunSpec& s : preset.runs) {
    if (s.kind == RunKind::Eval) continue;  // evaluations run where their model is, after it
    // Per model: where a run of it goes on these GPUs when they are free.
    const QString model =
        QFileInfo(QString::fromStdString(s.modelDir.empty() ? s.architecture : s.modelDir)).fileName();
    if (seen.contains(model)) continue;
    seen << model;
    std::int64_t sourceParameters = 0;
    const ModelConfig cfg = plannedModelConfig(s, &sourceParameters);
    const std::string placed = chooseGpu(s, cfg, sourceParameters, gpus, {});
    RunSpec there = s;
    there.device = placed.empty() || placed == "cuda" ? gpus.front().id : placed;
    std::int64_t least = INT64_MAX;
    for (const std::string& d : deviceList(there.device)) least = std::min(least, availableBytesOn(d, gpus));
    const MemoryPlan plan = planMemory(cfg, there, least, sourceParameters);
    const int ranks = static_cast<int>(deviceList(there.device).size());
    const QString peak = QString::fromStdString(formatBytes(plan.peakBytes));
    const char* context = "latentlab::ui::MainWindow";  // where these lines were written before
    lines << (plan.fits()
                  ? QCoreApplication::translate(context, "%1 runs need %2 per GPU on %3 GPU(s)")
                        .arg(model, peak)
                        .arg(ranks)
                  : QCoreApplication::translate(context, "%1 runs need %2 per GPU and do not fit these GPUs (%3)")
                        .arg(model, peak, QString::fromStdString(plan.suggestion)));
  }
  return lines;
}

}  // namespace latentlab::ui
