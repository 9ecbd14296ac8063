// The distillation loss (see distillation.h).
#include "train/distillation.h"

#include "model/fused_ops.h"

namespace latentlab {

namespace F = torch::nn::functional;

DistillationLoss distillationLoss(CausalLm& student, const Distillation& d, const torch::Tensor& windows) {
  const auto T = windows.size(1) - 1;
  const auto inputs = windows.narrow(1, 0, T);
  const auto targets = windows.narrow(1, 1, T).reshape({-1});
  const auto lossType = [](const torch::Tensor& logits) {  // the loss in fp32 under bf16, as languageModelLoss
    return logits.scalar_type() == torch::kFloat64 ? logits : logits.to(torch::kFloat32);
  };
  torch::Tensor teacherLogp;
  {
    torch::NoGradGuard noGrad;
    auto t = lossType(d.teacher->forward(inputs));
    teacherLogp = torch::log_softmax(t.reshape({-1, t.size(-1)}) / d.temperature, -1);
  }
  auto logits = lossType(student.forward(inputs));
  logits = logits.reshape({-1, logits.size(-1)});
  const auto positions = static_cast<double>(logits.size(0));
  const auto kdOf = [&](const torch::Tensor& studentLogits) {
    const auto studentLogp = torch::log_softmax(studentLogits / d.temperature, -1);
    return F::kl_div(studentLogp, teacherLogp, F::KLDivFuncOptions().reduction(torch::kSum).log_target(true)) /
           positions;
  };
  DistillationLoss out;
  if (d.alpha == 0) {  // the plain loss exactly; the KL as a reading
    out.total = crossEntropy(logits, targets);
    torch::NoGradGuard noGrad;
    out.kd = kdOf(logits.detach());
    out.ce = out.total.detach();
    return out;
  }
  const auto kd = kdOf(logits);
  const double kdWeight = d.alpha * d.temperature * d.temperature;
  if (d.alpha == 1) {
    out.total = kd * kdWeight;
    torch::NoGradGuard noGrad;
    out.ce = crossEntropy(logits.detach(), targets);
  } else {
    const auto ce = crossEntropy(logits, targets);
    out.total = kd * kdWeight + ce * (1 - d.alpha);
    out.ce = ce.detach();
  }
  out.kd = kd.detach();
  return out;
}

}  // namespace latentlab
