// Knowledge distillation from a teacher model inside the training step
// (docs/run_spec.md "distill", docs/conversion.md): the student's loss on a
// micro-batch is
//   a T^2 KL(p_teacher || p_student) + (1 - a) CE(student, next tokens),
// where p = softmax(logits / T) and the KL is the mean over the batch's
// predicted positions of sum_v p_t(v) (log p_t(v) - log p_s(v)). The teacher
// runs on the same windows in no-grad, under the step's autocast state, on
// the student's device; its logits live only for the micro-batch.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "model/llama.h"

namespace latentlab {

struct Distillation {
  std::shared_ptr<CausalLm> teacher;  // in eval mode, no gradients
  double alpha = 0.5;                 // a: the KL's weight; 1 - a the cross-entropy's
  double temperature = 1.0;           // T
};

// One micro-batch's loss and its two parts (the parts detached).
struct DistillationLoss {
  torch::Tensor total;  // what backward runs on
  torch::Tensor ce;     // cross-entropy of the student on the next tokens
  torch::Tensor kd;     // KL(teacher || student) at temperature T, mean per position
};

// windows (B, T + 1) token ids: inputs are the first T, targets the last T.
// A term whose weight is 0 is computed without gradient (a = 0 trains as the
// plain loss does, bit for bit).
DistillationLoss distillationLoss(CausalLm& student, const Distillation& d, const torch::Tensor& windows);

}  // namespace latentlab
