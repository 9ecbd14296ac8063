// The training step (see train_step.h).
#include "train/train_step.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "model/autocast_scope.h"
#include "train/data_parallel.h"
#include "train/optimizer.h"

namespace latentlab {

StepOutcome trainStep(CausalLm& model, torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& params,
                      const std::function<torch::Tensor()>& nextWindows, const StepSettings& settings,
                      DataParallel* dp, StepPhases* phases) {
  using Clock = std::chrono::steady_clock;
  const torch::Device device = params.front().device();
  auto mark = Clock::now();
  // Adds the time since the last mark to `slot` (after the device finishes).
  auto lap = [&](double StepPhases::*slot) {
    if (phases == nullptr) return;
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    const auto now = Clock::now();
    phases->*slot += std::chrono::duration<double>(now - mark).count();
    mark = now;
  };
  optimizer.zero_grad();
  if (settings.master != nullptr) settings.master->zeroModelGradients();
  torch::Tensor lossSum;   // on the device: one host sync per step, for the loss and the norm together
  for (int micro = 0; micro < settings.gradAccum; ++micro) {
    const torch::Tensor windows = nextWindows();
    lap(&StepPhases::data);
    torch::Tensor loss;
    {
      AutocastScope autocast(device.type(), settings.autocastBf16);
      loss = languageModelLoss(model, windows);
    }
    (loss / settings.gradAccum).backward();
    lossSum = micro == 0 ? loss.detach().to(torch::kFloat64) : lossSum + loss.detach().to(torch::kFloat64);
    lap(&StepPhases::forwardBackward);
  }
  if (settings.master != nullptr) settings.master->gradientsToMasters();
  if (dp != nullptr) {
    dp->averageGradients(params);
    lossSum = torch::full_like(lossSum, dp->sum({lossSum.item<double>()})[0] / dp->worldSize());
  }
  const auto norm = clipGradNorm(params, settings.clip > 0 ? settings.clip : std::numeric_limits<double>::infinity());
  lap(&StepPhases::optimizer);
  const auto host = torch::stack({lossSum, norm.to(torch::kFloat64)}).cpu();
  StepOutcome out;
  out.loss = host[0].item<double>() / settings.gradAccum;
  out.gradNorm = host[1].item<double>();
  out.finite = std::isfinite(out.loss) && std::isfinite(out.gradNorm);
  lap(&StepPhases::sync);
  if (out.finite) {
    optimizer.step();
    if (settings.master != nullptr) settings.master->mastersToModel();
    lap(&StepPhases::optimizer);
  }
  return out;
}

} // namespace latentlab
