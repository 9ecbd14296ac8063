// Routing between the small-row CPU kernel and LibTorch's linear.
#include "model/decode_linear.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>

#include <algorithm>

#include "model/decode_attention.h"
#include "model/kernels/cpu_kernels.h"

namespace latentlab {

namespace {

bool needsGrad(const torch::Tensor& t) {
  return t.defined() && t.requires_grad();
}

bool kernelApplies(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (!fusedDecodeEnabled() || x.dim() < 1 || w.dim() != 2 || x.numel() == 0) return false;
  if (at::autocast::is_autocast_enabled(at::kCPU)) return false;  // autocast picks the dtype: LibTorch's linear
  if (!x.device().is_cpu() || !w.device().is_cpu() || (b.defined() && !b.device().is_cpu())) return false;
  if (x.scalar_type() != torch::kFloat32 || w.scalar_type() != torch::kFloat32) return false;
  if (b.defined() && (b.scalar_type() != torch::kFloat32 || b.dim() != 1 || b.size(0) != w.size(0))) return false;
  if (x.size(-1) != w.size(1) || x.numel() / x.size(-1) > kDecodeLinearMaxRows) return false;
  return !(torch::GradMode::is_enabled() && (needsGrad(x) || needsGrad(w) || needsGrad(b)));
}

}  // namespace

torch::Tensor linearForward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!kernelApplies(x, weight, bias)) return at::linear(x, weight, bias);
  const std::int64_t dim = x.size(-1), rows = x.numel() / dim, outs = weight.size(0);
  auto x2 = x.reshape({rows, dim});
  if (x2.stride(1) != 1) x2 = x2.contiguous();
  const auto w = weight.stride(1) == 1 ? weight : weight.contiguous();
  const auto b = bias.defined() ? bias.contiguous() : bias;
  auto y = torch::empty({rows, outs}, x.options());

  kernels::LinearKernelArgs<float> a;
  a.x = x2.data_ptr<float>();
  a.xs = x2.stride(0);
  a.w = w.data_ptr<float>();
  a.ws = w.stride(0);
  a.bias = b.defined() ? b.data_ptr<float>() : nullptr;
  a.y = y.data_ptr<float>();
  a.ys = outs;
  a.rows = rows;
  a.outs = outs;
  a.dim = dim;
  const auto kernel = kernels::cpuKernels().linearF32;
  // Outputs come 16 at a time; a thread's share reads at least 2 MiB of
  // weights, or waking it (tens of microseconds) costs more than it saves.
  const std::int64_t blocks = (outs + 15) / 16;
  const std::int64_t blockBytes = 16 * dim * static_cast<std::int64_t>(sizeof(float));
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{2} << 20) / blockBytes);
  at::parallel_for(0, blocks, grain,
                   [&](std::int64_t b0, std::int64_t b1) { kernel(a, b0 * 16, std::min(outs, b1 * 16)); });
  auto sizes = x.sizes().vec();
  sizes.back() = outs;
  return y.view(sizes);
}

}  // namespace latentlab
