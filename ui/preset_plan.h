// A preset's runs against this machine's devices, before anything is queued:
// whether they need a GPU, and where each model's runs would go on the GPUs
// with the memory plan of one run there (the same planner and GPU choice the
// engine and the job controller use).
#pragma once

#include <QString>
#include <QStringList>
#include <vector>

#include "latentlab/engine.h"
#include "preset_loader.h"

namespace latentlab::ui {

// True when any run of the preset is for a CUDA device.
bool presetWantsGpu(const Preset& preset);

// The CUDA devices among `devices`.
std::vector<DeviceInfo> cudaDevices(const std::vector<DeviceInfo>& devices);

// One line per model of the preset: the memory one of its runs needs per GPU
// on the GPU(s) chosen for it, or that it does not fit them and what would.
QStringList presetGpuPlan(const Preset& preset, const std::vector<DeviceInfo>& gpus);

}  // namespace latentlab::ui
