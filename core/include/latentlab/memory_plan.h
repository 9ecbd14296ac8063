// The memory a training run needs per device, predicted before anything is
// loaded: weights, master weights, gradients, optimiser state, activations
// (with and without recompute), the logits and loss buffers, communication
// buckets and allocator slack, and the largest micro-batch that fits.
// No torch: the workbench shows it live as settings change (docs/memory.md
// gives the model and how it was measured).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "latentlab/engine.h"
#include "latentlab/model_config.h"
#include "latentlab/run_spec.h"

namespace latentlab {

struct MemoryItem {
  std::string name;  // "weights", "activations", ...
  std::int64_t bytes = 0;
  std::string detail;  // how it was counted, e.g. "2 B x 135M parameters"
};

struct MemoryPlan {
  std::string precision;  // the policy after "auto" is resolved
  bool cuda = false;
  int ranks = 1;  // data-parallel ranks (devices in the spec)
  std::int64_t parameters = 0;
  std::int64_t tokensPerMicroBatch = 0;
  std::vector<MemoryItem> items;       // what one device holds at its peak; they sum to peakBytes
  std::int64_t peakBytes = 0;          // per device
  std::string peakPhase;               // when the peak falls: "start of backward", "end of backward", ...
  std::int64_t hostBytes = 0;          // host memory while the model is loaded (and converted) before it moves
  std::int64_t availableBytes = 0;     // per device; 0 = unknown
  int largestMicroBatch = 0;           // the largest micro_batch that fits with everything else as is (0: none)
  std::int64_t peakWithRecompute = 0;  // when recompute is off: the peak with it on (0 otherwise)
  std::string suggestion;              // when it does not fit: the nearest settings that do, or why none does

  bool known() const { return availableBytes > 0; }
  bool fits() const { return !known() || peakBytes <= availableBytes; }
};

// The plan for `spec` training the model `trained` (the model as the steps
// see it: after conversion or with its attention variant) on devices of
// `availableBytes` each (0: unknown). `sourceParameters` is the checkpoint a
// conversion starts from (0 when there is none).
MemoryPlan planMemory(const ModelConfig& trained, const RunSpec& spec, std::int64_t availableBytes,
                      std::int64_t sourceParameters = 0);

// The plan of an eval job (spec.kind "eval"): inference, so the weights in
// fp32 and the working set of its tasks and passkey grid, with no optimizer,
// gradients or training activations.
MemoryPlan planInferenceMemory(const ModelConfig& model, const RunSpec& spec, std::int64_t availableBytes);

// The model config a spec trains, read from what is cheap: the built-in
// architecture (with its attention variant) or the model folder's
// config.json (with the conversion's dims). Throws Error naming the file or
// field. `sourceParameters` receives the parameters of the model a
// conversion starts from.
ModelConfig plannedModelConfig(const RunSpec& spec, std::int64_t* sourceParameters = nullptr);

// The memory available on the devices of a spec's `device` ("cuda:0,cuda:1":
// the least free of them; "cuda": cuda:0; "cpu": the host's MemAvailable),
// from listDevices(); 0 when a device is not in the list or reports none.
std::int64_t availableBytesOn(const std::string& device, const std::vector<DeviceInfo>& devices);

// The GPU(s) a job that asks for "cuda" should run on: among the GPUs of
// `devices` not in `busy`, the one with the most free memory on which the
// plan fits; with ZeRO (zero_stage > 0) the fewest GPUs, most free memory
// first, over which the plan fits ("cuda:0,cuda:2", one rank each). Empty:
// wait (busy GPUs would hold it once free). When no GPUs could ever hold it,
// the free GPU with the most memory anyway (the engine then refuses the run
// with the plan's numbers), or "cuda" when none is free or there are none.
std::string chooseGpu(const RunSpec& spec, const ModelConfig& trained, std::int64_t sourceParameters,
                      const std::vector<DeviceInfo>& devices, const std::vector<std::string>& busy);

// "9.3 GiB" (IEC units, three significant digits).
std::string formatBytes(std::int64_t bytes);

// The plan as text: one line per item, the peak, the verdict against the
// available memory and the largest micro-batch that fits.
std::string describeMemoryPlan(const MemoryPlan& plan);

}  // namespace latentlab
