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
};

// Scales the gradients of `params` so their global 2-norm is at most
// `maxNorm` (no scaling for maxNorm = inf) and returns the norm before
// scaling as a 0-dim tensor on the gradients' device (no host sync). Matches
// torch::nn::utils::clip_grad_norm_ up to float reassociation.
torch::Tensor clipGradNorm(const std::vector<torch::Tensor>& params, double maxNorm);

} // namespace latentlab
