// The training step (see train_step.h).
#include "train/train_step.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "model/autocast_scope.h"
#include "train/data_parallel.h"
#include "train/distillation.h"
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

// Sums over the micro-batches, on the device until the step's one host sync:
// the loss, and when distilling its two parts.
struct LossSums {
  torch::Tensor loss, ce, kd;
  void add(torch::Tensor& sum, const torch::Tensor& value) {
    sum = sum.defined() ? sum + value.detach().to(torch::kFloat64) : value.detach().to(torch::kFloat64);
  }
};

// gradAccum x (nextWindows(), forward, backward of loss / gradAccum).
LossSums forwardBackward(CausalLm& model, const std::function<torch::Tensor()>& nextWindows,
                         const StepSettings& settings, PhaseClock& clock) {
  LossSums sums;
  for (int micro = 0; micro < settings.gradAccum; ++micro) {
    const torch::Tensor windows = nextWindows();
    clock.lap(&StepPhases::data);
    torch::Tensor loss;
    {
      AutocastScope autocast(clock.device.type(), settings.autocastBf16);
      if (settings.distill != nullptr) {
        const DistillationLoss d = distillationLoss(model, *settings.distill, windows);
        loss = d.total;
        sums.add(sums.ce, d.ce);
        sums.add(sums.kd, d.kd);
      } else {
        loss = languageModelLoss(model, windows);
      }
    }
    (loss / settings.gradAccum).backward();
    sums.add(sums.loss, loss);
    clock.lap(&StepPhases::forwardBackward);
  }
  return sums;
}

// The losses and the norm in one host sync; finite or not.
StepOutcome settle(const LossSums& sums, const torch::Tensor& norm, const StepSettings& settings, DataParallel* dp) {
  std::vector<torch::Tensor> parts = {sums.loss, norm.to(torch::kFloat64)};
  if (sums.ce.defined()) parts.insert(parts.end(), {sums.ce, sums.kd});
  auto host = torch::stack(parts).cpu();
  if (dp != nullptr) {  // losses averaged over the ranks (the norm is already global)
    std::vector<double> losses = {host[0].item<double>()};
    if (sums.ce.defined()) losses.insert(losses.end(), {host[2].item<double>(), host[3].item<double>()});
    losses = dp->sum(losses);
    host[0] = losses[0] / dp->worldSize();
    if (sums.ce.defined()) {
      host[2] = losses[1] / dp->worldSize();
      host[3] = losses[2] / dp->worldSize();
    }
  }
  StepOutcome out;
  out.loss = host[0].item<double>() / settings.gradAccum;
  out.gradNorm = host[1].item<double>();
  if (sums.ce.defined()) {
    out.ce = host[2].item<double>() / settings.gradAccum;
    out.kd = host[3].item<double>() / settings.gradAccum;
  }
  out.finite = std::isfinite(out.loss) && std::isfinite(out.gradNorm);
  return out;
}

// A tied embedding's lookup gives a sparse gradient, which autograd adds to
// the output layer's dense one (model/llama.cpp); should a loss reach the
// lookup alone, the clip and the optimizers get it dense.
void densifyGradients(CausalLm& model) {
  for (auto& p : model.parameters())
    if (p.grad().defined() && p.grad().is_sparse()) p.mutable_grad() = p.grad().to_dense();
}

}  // namespace

StepOutcome trainStep(CausalLm& model, torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& params,
                      const std::function<torch::Tensor()>& nextWindows, const StepSettings& settings, DataParallel* dp,
                      StepPhases* phases) {
  PhaseClock clock{params.front().device(), phases};
  optimizer.zero_grad();
  if (settings.master != nullptr) settings.master->zeroModelGradients();
  const LossSums sums = forwardBackward(model, nextWindows, settings, clock);
  densifyGradients(model);
  if (settings.master != nullptr) settings.master->gradientsToMasters();
  if (dp != nullptr) dp->averageGradients(params);
  // The fused AdamW scales the gradients inside its own pass over them.
  auto* fused = dynamic_cast<FusedAdamW*>(&optimizer);
  torch::Tensor norm;
  if (fused != nullptr && settings.clip > 0) {
    norm = gradNorm(params);
    fused->scaleGradientsInStep(clipCoefficient(norm, settings.clip));
  } else {
    norm = clipGradNorm(params, settings.clip > 0 ? settings.clip : std::numeric_limits<double>::infinity());
  }
  clock.lap(&StepPhases::optimizer);
  const StepOutcome out = settle(sums, norm, settings, dp);
  clock.lap(&StepPhases::sync);
  if (!out.finite && fused != nullptr) fused->scaleGradientsInStep({});
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
  const LossSums sums = forwardBackward(model, nextWindows, settings, clock);
  densifyGradients(model);
  optimizer.reduceGradients();
  const torch::Tensor norm = optimizer.gradNorm();
  if (settings.clip > 0) {
    torch::NoGradGuard noGrad;
    optimizer.scaleGradients(torch::clamp(settings.clip / (norm + 1e-6), std::nullopt, 1.0));
  }
  clock.lap(&StepPhases::optimizer);
  const StepOutcome out = settle(sums, norm, settings, dp);
  clock.lap(&StepPhases::sync);
  if (out.finite) {
    optimizer.step();
    clock.lap(&StepPhases::optimizer);
  }
  return out;
}

}  // namespace latentlab
