// Fused AdamW step and foreach gradient clipping.
#include "train/optimizer.h"

#include <cmath>
#include <map>
#include <optional>
#include <utility>

namespace latentlab {

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard noGrad;
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enable(true);
    loss = closure();
  }
  const torch::Tensor factor = std::exchange(m_gradFactor, torch::Tensor());
  for (auto& group : param_groups()) {
    if (!static_cast<torch::optim::AdamWOptions&>(group.options()).amsgrad()) continue;
    // amsgrad: LibTorch's step, on gradients scaled first.
    if (factor.defined()) {
      for (auto& g : param_groups())
        for (auto& p : g.params())
          if (p.grad().defined()) p.mutable_grad().mul_(factor.to(p.grad().device()));
    }
    return torch::optim::AdamW::step(nullptr);
  }
  for (auto& group : param_groups()) {
    auto& opts = static_cast<torch::optim::AdamWOptions&>(group.options());
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
      // fp32: the kernel divides the gradients by grad_scale (a float) and
      // stores them so; other dtypes are scaled first, by the factor as it is.
      std::optional<torch::Tensor> gradScale;
      if (factor.defined()) {
        const auto device = b.params.front().device();
        if (b.grads.front().scalar_type() == torch::kFloat32)
          gradScale = torch::reciprocal(factor.to(device, torch::kFloat32));
        else
          at::_foreach_mul_(b.grads, factor.to(device));
      }
      at::_fused_adamw_(b.params, b.grads, b.expAvg, b.expAvgSq, /*max_exp_avg_sqs=*/{}, steps, opts.lr(), beta1, beta2,
                        opts.weight_decay(), opts.eps(), /*amsgrad=*/false, /*maximize=*/false, gradScale);
    }
  }
  return loss;
}

std::vector<torch::optim::OptimizerParamGroup> adamWParamGroups(const std::vector<torch::Tensor>& params,
                                                                const torch::optim::AdamWOptions& base) {
  std::vector<torch::Tensor> decay, noDecay;
  for (const auto& p : params) (p.dim() >= 2 ? decay : noDecay).push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto optsDecay = std::make_unique<torch::optim::AdamWOptions>(base);
  auto optsNo = std::make_unique<torch::optim::AdamWOptions>(base);
  optsNo->weight_decay(0.0);
  groups.emplace_back(decay, std::move(optsDecay));
  groups.emplace_back(noDecay, std::move(optsNo));
  return groups;
}

namespace {

std::vector<torch::Tensor> gradsOf(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

// Per-tensor norms in one foreach launch, then the norm of the norms.
torch::Tensor normOf(const std::vector<torch::Tensor>& grads) {
  return grads.empty() ? torch::zeros({}) : torch::stack(at::_foreach_norm(grads, 2)).norm(2);
}

}  // namespace

torch::Tensor gradNorm(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard noGrad;
  return normOf(gradsOf(params));
}

torch::Tensor clipCoefficient(const torch::Tensor& norm, double maxNorm) {
  torch::NoGradGuard noGrad;
  return torch::clamp(maxNorm / (norm + 1e-6), std::nullopt, 1.0);  // 0-dim, on the norm's device
}

torch::Tensor clipGradNorm(const std::vector<torch::Tensor>& params, double maxNorm) {
  torch::NoGradGuard noGrad;
  const auto grads = gradsOf(params);
  auto total = normOf(grads);
  if (!grads.empty() && std::isfinite(maxNorm)) at::_foreach_mul_(grads, clipCoefficient(total, maxNorm));
  return total;
}

MasterWeights::MasterWeights(const std::vector<torch::Tensor>& fp32Params) {
  torch::NoGradGuard noGrad;
  m_masters.reserve(fp32Params.size());
  for (const auto& p : fp32Params) {
    TORCH_CHECK(p.scalar_type() == torch::kFloat32, "master weights are copied from fp32 parameters");
    m_masters.push_back(p.detach().clone().set_requires_grad(true));
  }
}

void MasterWeights::bind(const std::vector<torch::Tensor>& modelParams) {
  TORCH_CHECK(modelParams.size() == m_masters.size(), "master weights: ", m_masters.size(), " masters for ",
              modelParams.size(), " parameters");
  for (std::size_t i = 0; i < modelParams.size(); ++i)
    TORCH_CHECK(modelParams[i].sizes() == m_masters[i].sizes(), "master weights: parameter ", i, " changed shape");
  m_model = modelParams;
}

void MasterWeights::gradientsToMasters() {
  torch::NoGradGuard noGrad;
  for (std::size_t i = 0; i < m_model.size(); ++i) {
    auto& g = m_model[i].mutable_grad();
    if (!g.defined()) continue;
    m_masters[i].mutable_grad() = g.to(torch::kFloat32);
    g.reset();
  }
}

void MasterWeights::mastersToModel() {
  torch::NoGradGuard noGrad;
  std::vector<torch::Tensor> dst(m_model.begin(), m_model.end());
  at::_foreach_copy_(dst, m_masters);  // rounds to the model's dtype
}

void MasterWeights::zeroModelGradients() {
  for (auto& p : m_model) p.mutable_grad().reset();
}

}  // namespace latentlab
