// One optimiser step exactly as the trainer takes it, shared by the trainer,
// the training benchmark and the GPU check, so that their figures describe
// the step users run.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <vector>

#include "model/llama.h"

namespace latentlab {

class BatchLoader;
class DataParallel;
class MasterWeights;
class ShardedAdamW;
struct Distillation;

struct StepSettings {
  int gradAccum = 1;                      // micro-batches per step; each backward is of loss / gradAccum
  bool autocastBf16 = false;              // forward under bf16 autocast (fp32 master weights)
  double clip = 0;                        // max gradient norm; 0: no clipping (the norm is still measured)
  MasterWeights* master = nullptr;        // bf16 weights: the optimiser steps these fp32 masters
  const Distillation* distill = nullptr;  // a teacher: the distillation loss (train/distillation.h)
};

// Seconds per phase, added to when given (the device is synchronised at each
// phase boundary then, so the figures are real; the trainer passes none).
struct StepPhases {
  double data = 0, forwardBackward = 0, optimizer = 0, sync = 0;
};

struct StepOutcome {
  double loss = 0;      // mean over the micro-batches (and ranks)
  double gradNorm = 0;  // before clipping
  bool finite = true;   // false: the optimiser did not step
  // Distilling: the loss's cross-entropy and KL parts, means as `loss`.
  std::optional<double> ce, kd;
};

// The validation loss as the trainer records it (val/loss): the mean loss of
// the first `batches` batches of `val` (rewound), in eval mode and no-grad,
// under bf16 autocast when the training steps use it; with several ranks
// each scores its share and the mean over ranks is taken.
double evaluateLoss(CausalLm& model, BatchLoader& val, int batches, torch::Device device, DataParallel* dp,
                    bool autocastBf16);

// zero_grad, gradAccum x (nextWindows(), forward, backward), gradients moved
// to the fp32 masters (when there are), averaged over `dp`'s ranks, clipping,
// one host sync for loss and norm, then the optimiser step when both are
// finite (and the masters copied into the model). `params` are the tensors
// the optimiser steps: the model's parameters, or the masters.
StepOutcome trainStep(CausalLm& model, torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& params,
                      const std::function<torch::Tensor()>& nextWindows, const StepSettings& settings,
                      DataParallel* dp = nullptr, StepPhases* phases = nullptr);

// The same step with the optimiser state sharded over the ranks (ZeRO stage
// 1 or 2, train/zero.h): the gradients are averaged into each rank's slices,
// the norm is the global one, and the updated slices are all-gathered into
// the model.
StepOutcome trainStep(CausalLm& model, ShardedAdamW& optimizer, const std::function<torch::Tensor()>& nextWindows,
                      const StepSettings& settings, DataParallel* dp = nullptr, StepPhases* phases = nullptr);

}  // namespace latentlab
