// The training step (see train_step.h).
#include "train/train_step.h"

#include <ATen/autocast_mode.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "train/data_parallel.h"
#include "train/optimizer.h"

namespace latentlab {
namespace {

// bf16 autocast for one scope (off again however the scope ends).
class AutocastBf16 {
public:
  AutocastBf16(torch::DeviceType type, bool on) : m_type(type), m_on(on) {
    if (!m_on) return;
    at::autocast::set_autocast_enabled(m_type, true);
    at::autocast::set_autocast_dtype(m_type, torch::kBFloat16);
  }
  ~AutocastBf16() {
    if (!m_on) return;
    at::autocast::set_autocast_enabled(m_type, false);
    at::autocast::clear_cache();
  }
  AutocastBf16(const AutocastBf16&) = delete;
  AutocastBf16& operator=(const AutocastBf16&) = delete;

private:
  torch::DeviceType m_type;
  bool m_on;
};

} // namespace

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
  torch::Tensor lossSum;   // on the device: one host sync per step, for the loss and the norm together
  for (int micro = 0; micro < settings.gradAccum; ++micro) {
    const torch::Tensor windows = nextWindows();
    lap(&StepPhases::data);
    torch::Tensor loss;
    {
      AutocastBf16 autocast(device.type(), settings.autocastBf16);
      loss = languageModelLoss(model, windows);
    }
    (loss / settings.gradAccum).backward();
    lossSum = micro == 0 ? loss.detach().to(torch::kFloat64) : lossSum + loss.detach().to(torch::kFloat64);
    lap(&StepPhases::forwardBackward);
  }
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
    lap(&StepPhases::optimizer);
  }
  return out;
}

} // namespace latentlab
