// Fused AdamW step and foreach gradient clipping.
#include "train/optimizer.h"

#include <cmath>
#include <map>
#include <utility>

namespace latentlab {

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard noGrad;
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enable(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    auto& opts = static_cast<torch::optim::AdamWOptions&>(group.options());
    if (opts.amsgrad()) return torch::optim::AdamW::step(nullptr);
    // The kernel takes lists of one device, dtype and step count each.
    struct Bucket {
      std::vector<torch::Tensor> params, grads, expAvg, expAvgSq;
    };
    std::map<std::tuple<std::string, int, std::int64_t>, Bucket> buckets;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "FusedAdamW does not support sparse gradients");
      auto key = p.unsafeGetTensorImpl();
      auto it = state().find(key);
      if (it == state().end()) {
        auto st = std::make_unique<torch::optim::AdamWParamState>();
        st->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        st->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = state().emplace(key, std::move(st)).first;
      }
      auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
      st.step(st.step() + 1);
      auto& b = buckets[{p.device().str(), static_cast<int>(p.scalar_type()), st.step()}];
      b.params.push_back(p);
      b.grads.push_back(p.grad());
      b.expAvg.push_back(st.exp_avg());
      b.expAvgSq.push_back(st.exp_avg_sq());
    }
    const auto [beta1, beta2] = opts.betas();
    for (auto& [key, b] : buckets) {
      // One fp32 step count shared by the whole list (the kernel only reads it).
      auto stepCount = torch::full({}, static_cast<double>(std::get<2>(key)),
                                   torch::TensorOptions().dtype(torch::kFloat32).device(b.params.front().device()));
      std::vector<torch::Tensor> steps(b.params.size(), stepCount);
      at::_fused_adamw_(b.params, b.grads, b.expAvg, b.expAvgSq, /*max_exp_avg_sqs=*/{}, steps, opts.lr(), beta1,
                        beta2, opts.weight_decay(), opts.eps(), /*amsgrad=*/false, /*maximize=*/false);
    }
  }
  return loss;
}

torch::Tensor clipGradNorm(const std::vector<torch::Tensor>& params, double maxNorm) {
  torch::NoGradGuard noGrad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return torch::zeros({});
  // Per-tensor norms in one foreach launch, then the norm of the norms.
  auto total = torch::stack(at::_foreach_norm(grads, 2)).norm(2);
  if (std::isfinite(maxNorm)) {
    auto coef = torch::clamp(maxNorm / (total + 1e-6), std::nullopt, 1.0);  // 0-dim, on device
    at::_foreach_mul_(grads, coef);
  }
  return total;
}

} // namespace latentlab
