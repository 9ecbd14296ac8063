// The training step's optimiser and gradient clipping as few kernels as
// LibTorch offers: AdamW through the fused one-pass kernel (one launch per
// parameter group instead of ~7 per parameter) and the global gradient norm
// through the foreach kernels, with one host sync per step at most.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace latentlab {

// torch::optim::AdamW with the same options, parameter groups and state
// (AdamWParamState: step, exp_avg, exp_avg_sq), so checkpoints written by
// either load into the other; only step() differs: the update
//   p -= lr*wd*p;  m = lerp(m, g, 1-b1);  v = b2*v + (1-b2)*g*g;
//   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// runs in at::_fused_adamw_ (same formula, float reassociation only).
// amsgrad falls back to the reference implementation.
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
  // The next step() first multiplies every gradient by `factor` (0-dim, on
  // the gradients' device: a clip coefficient) inside the fused kernel and
  // leaves the gradients so scaled, as scaling them before the step would,
  // with one pass over them fewer. An undefined tensor cancels it.
  void scaleGradientsInStep(torch::Tensor factor) { m_gradFactor = std::move(factor); }

 private:
  torch::Tensor m_gradFactor;
};

// The trainer's AdamW parameter groups, each with every option of `base`:
// tensors with two or more dims keep base's weight decay, norms and biases
// get none.
std::vector<torch::optim::OptimizerParamGroup> adamWParamGroups(const std::vector<torch::Tensor>& params,
                                                                const torch::optim::AdamWOptions& base);

// Scales the gradients of `params` so their global 2-norm is at most
// `maxNorm` (no scaling for maxNorm = inf) and returns the norm before
// scaling as a 0-dim tensor on the gradients' device (no host sync). Matches
// torch::nn::utils::clip_grad_norm_ up to float reassociation.
torch::Tensor clipGradNorm(const std::vector<torch::Tensor>& params, double maxNorm);
// The same norm without scaling (zero without gradients), and the factor
// clipping to `maxNorm` scales the gradients by: maxNorm / (norm + 1e-6), at most 1.
torch::Tensor gradNorm(const std::vector<torch::Tensor>& params);
torch::Tensor clipCoefficient(const torch::Tensor& norm, double maxNorm);

// fp32 master copies of a model's low-precision (bf16) parameters, the usual
// mixed-precision recipe: the optimiser steps the masters, its AdamW state is
// fp32, and the model receives the masters rounded after every step.
// Gradients move to the masters (fp32) after backward and the model's
// low-precision gradients are freed, so a step holds per parameter 2 bytes
// of weights, 4 of master, 4 of master gradient and 8 of AdamW state.
class MasterWeights {
 public:
  // `fp32Params` are the model's parameters while still fp32 (built or
  // loaded); the masters copy them exactly, then the caller casts the model.
  explicit MasterWeights(const std::vector<torch::Tensor>& fp32Params);
  // Binds the (now low-precision) model parameters, in the same order.
  void bind(const std::vector<torch::Tensor>& modelParams);
  const std::vector<torch::Tensor>& masters() const { return m_masters; }
  // master.grad = float(model.grad); the model's gradient is released.
  void gradientsToMasters();
  // model = masters rounded to the model's dtype.
  void mastersToModel();
  // Drops the model's gradients (before a step's first backward).
  void zeroModelGradients();

 private:
  std::vector<torch::Tensor> m_masters;
  std::vector<torch::Tensor> m_model;
};

}  // namespace latentlab
