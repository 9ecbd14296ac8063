// The training step (see train_step.h).
#include "train/train_step.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "model/autocast_scope.h"
#include "train/data_parallel.h"
#include "train/optimizer.h"
#include "train/zero.h"

namespace latentlab {

namespace {

using Clock = std::chrono::steady_clock;

// Adds the time since the last mark to a phase (after the device finishes).
struct PhaseClock {
  torch::Device device;
  StepPhases* phases;
  Clock::time_point mark = Clock::now();
  void lap(double StepPhases::*slot) {
    if (phases == nullptr) return;
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    const auto now = Clock::now();
    phases->*slot += std::chrono::duration<double>(now - mark).count();
    mark = now;
  }
};

// gradAccum x (nextWindows(), forward, backward of loss / gradAccum); the
// summed loss stays on the device (one host sync per step, later).
torch::Tensor forwardBackward(CausalLm& model, const std::function<torch::Tensor()>& nextWindows,
                              const StepSettings& settings, PhaseClock& clock) {
  torch::Tensor lossSum;
  for (int micro = 0; micro < settings.gradAccum; ++micro) {
    const torch::Tensor windows = nextWindows();
    clock.lap(&StepPhases::data);
    torch::Tensor loss;
    {
      AutocastScope autocast(clock.device.type(), settings.autocastBf16);
      loss = languageModelLoss(model, windows);
    }
    (loss / settings.gradAccum).backward();
    lossSum = micro == 0 ? loss.detach().to(torch::kFloat64) : lossSum + loss.detach().to(torch::kFloat64);
    clock.lap(&StepPhases::forwardBackward);
  }
  return lossSum;
}

// The loss and the norm in one host sync; finite or not.
StepOutcome settle(torch::Tensor lossSum, const torch::Tensor& norm, const StepSettings& settings, DataParallel* dp) {
  if (dp != nullptr) lossSum = torch::full_like(lossSum, dp->sum({lossSum.item<double>()})[0] / dp->worldSize());
  const auto host = torch::stack({lossSum, norm.to(torch::kFloat64)}).cpu();
  StepOutcome out;
  out.loss = host[0].item<double>() / settings.gradAccum;
  out.gradNorm = host[1].item<double>();
  out.finite = std::isfinite(out.loss) && std::isfinite(out.gradNorm);
  return out;
}

}  // namespace

StepOutcome trainStep(CausalLm& model, torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& params,
                      const std::function<torch::Tensor()>& nextWindows, const StepSettings& settings, DataParallel* dp,
                      StepPhases* phases) {
  PhaseClock clock{params.front().device(), phases};
  optimizer.zero_grad();
  if (settings.master != nullptr) settings.master->zeroModelGradients();
  torch::Tensor lossSum = forwardBackward(model, nextWindows, settings, clock);
  if (settings.master != nullptr) settings.master->gradientsToMasters();
  if (dp != nullptr) dp->averageGradients(params);
  const auto norm = clipGradNorm(params, settings.clip > 0 ? settings.clip : std::numeric_limits<double>::infinity());
  clock.lap(&StepPhases::optimizer);
  const StepOutcome out = settle(lossSum, norm, settings, dp);
  clock.lap(&StepPhases::sync);
  if (out.finite) {
    optimizer.step();
    if (settings.master != nullptr) settings.master->mastersToModel();
    clock.lap(&StepPhases::optimizer);
  }
  return out;
}

StepOutcome trainStep(CausalLm& model, ShardedAdamW& optimizer, const std::function<torch::Tensor()>& nextWindows,
                      const StepSettings& settings, DataParallel* dp, StepPhases* phases) {
  PhaseClock clock{model.parameters().front().device(), phases};
  optimizer.zeroGrad();
  torch::Tensor lossSum = forwardBackward(model, nextWindows, settings, clock);
  optimizer.reduceGradients();
  const torch::Tensor norm = optimizer.gradNorm();
  if (settings.clip > 0) {
    torch::NoGradGuard noGrad;
    optimizer.scaleGradients(torch::clamp(settings.clip / (norm + 1e-6), std::nullopt, 1.0));
  }
  clock.lap(&StepPhases::optimizer);
  const StepOutcome out = settle(lossSum, norm, settings, dp);
  clock.lap(&StepPhases::sync);
  if (out.finite) {
    optimizer.step();
    clock.lap(&StepPhases::optimizer);
  }
  return out;
}

}  // namespace latentlab
