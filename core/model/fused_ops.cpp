// Routing between the fused CPU kernels and LibTorch's operators.
#include "model/fused_ops.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "model/decode_attention.h"
#include "model/kernels/cpu_kernels.h"

namespace latentlab {

namespace {

thread_local int t_unfused = 0;

// Values a thread's share holds at least: below this a pass costs less than
// waking a thread (LibTorch's own grain for elementwise operators).
constexpr std::int64_t kGrainValues = 32768;

bool fusedApplies(std::initializer_list<const torch::Tensor*> tensors) {
  if (t_unfused > 0 || !fusedDecodeEnabled() || torch::GradMode::is_enabled()) return false;
  if (at::autocast::is_autocast_enabled(at::kCPU)) return false;
  const auto dtype = (*tensors.begin())->scalar_type();
  if (dtype != torch::kFloat32 && dtype != torch::kBFloat16) return false;
  return std::all_of(tensors.begin(), tensors.end(), [&](const torch::Tensor* t) {
    return t->defined() && t->device().is_cpu() && t->scalar_type() == dtype && t->numel() > 0;
  });
}

template <class T>
T* dataOf(const torch::Tensor& t) {
  if constexpr (std::is_same_v<T, float>) {
    return t.data_ptr<float>();
  } else {
    return reinterpret_cast<T*>(t.data_ptr<at::BFloat16>());
  }
}

// The build's fp32 or bf16 entry point, for the kernel's element type T.
template <class T, class F32, class BF16>
auto ofType(F32 f32, BF16 bf16) {
  if constexpr (std::is_same_v<T, float>) {
    return f32;
  } else {
    return bf16;
  }
}

// fn over [0, n) items of `perItem` values each: one call below the grain, else LibTorch's threads.
template <class Fn>
void forRanges(std::int64_t n, std::int64_t perItem, const Fn& fn) {
  if (n * perItem <= kGrainValues) {
    fn(0, n);
    return;
  }
  at::parallel_for(0, n, std::max<std::int64_t>(1, kGrainValues / perItem), fn);
}

template <class T>
torch::Tensor fusedRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps, bool plusOne) {
  const auto xc = x.contiguous();
  const auto wc = weight.contiguous();
  auto y = torch::empty_like(xc);
  kernels::RmsNormArgs<T> a;
  a.x = dataOf<T>(xc);
  a.w = dataOf<T>(wc);
  a.y = dataOf<T>(y);
  a.dim = x.size(-1);
  a.xs = a.ys = a.dim;
  a.eps = static_cast<float>(eps);
  a.plusOne = plusOne;
  const auto kernel = ofType<T>(kernels::cpuKernels().rmsNormF32, kernels::cpuKernels().rmsNormBF16);
  forRanges(xc.numel() / a.dim, a.dim, [&](std::int64_t b, std::int64_t e) { kernel(a, b, e); });
  return y;
}

template <class T>
torch::Tensor fusedGated(const torch::Tensor& gate, const torch::Tensor& up, bool gelu) {
  const auto g = gate.contiguous();
  const auto u = up.contiguous();
  auto y = torch::empty_like(g);
  kernels::GatedArgs<T> a;
  a.gate = dataOf<T>(g);
  a.up = dataOf<T>(u);
  a.y = dataOf<T>(y);
  a.gelu = gelu;
  const auto kernel = ofType<T>(kernels::cpuKernels().gatedF32, kernels::cpuKernels().gatedBF16);
  // Ranges of whole 16-value vectors, so that no two threads write one.
  const std::int64_t vectors = (g.numel() + 15) / 16, n = g.numel();
  forRanges(vectors, 16, [&](std::int64_t b, std::int64_t e) { kernel(a, b * 16, std::min(n, e * 16)); });
  return y;
}

template <class T>
torch::Tensor runRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto y = torch::empty_like(x);  // x's layout where x is dense (a transposed projection), else contiguous
  const auto c = cos.contiguous(), s = sin.contiguous();
  kernels::RopeArgs<T> a;
  a.x = dataOf<T>(x);
  a.y = dataOf<T>(y);
  a.cos = dataOf<T>(c);
  a.sin = dataOf<T>(s);
  a.heads = x.size(1);
  a.seq = x.size(2);
  a.dim = x.size(3);
  a.rd = c.size(1);
  a.xsb = x.stride(0);
  a.xsh = x.stride(1);
  a.xst = x.stride(2);
  a.ysb = y.stride(0);
  a.ysh = y.stride(1);
  a.yst = y.stride(2);
  const auto kernel = ofType<T>(kernels::cpuKernels().ropeF32, kernels::cpuKernels().ropeBF16);
  forRanges(x.numel() / a.dim, a.dim, [&](std::int64_t b, std::int64_t e) { kernel(a, b, e); });
  return y;
}

}  // namespace

torch::Tensor fusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (!fusedApplies({&x, &cos, &sin}) || x.dim() != 4 || cos.dim() != 2 || sin.sizes() != cos.sizes()) return {};
  if (cos.size(0) != x.size(2) || cos.size(1) > x.size(3) || cos.size(1) % 2 != 0 || x.stride(3) != 1) return {};
  return x.scalar_type() == torch::kFloat32 ? runRope<float>(x, cos, sin) : runRope<std::uint16_t>(x, cos, sin);
}

torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps, bool plusOne) {
  if (fusedApplies({&x, &weight}) && x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1)) {
    return x.scalar_type() == torch::kFloat32 ? fusedRmsNorm<float>(x, weight, eps, plusOne)
                                              : fusedRmsNorm<std::uint16_t>(x, weight, eps, plusOne);
  }
  const auto compute = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto xf = x.to(compute);
  auto var = xf.pow(2).mean(-1, /*keepdim=*/true);
  xf = xf * torch::rsqrt(var + eps);
  if (plusOne) return (xf * (weight.to(compute) + 1.0)).to(x.scalar_type());
  return weight * xf.to(x.scalar_type());
}

torch::Tensor gatedActivation(const torch::Tensor& gate, const torch::Tensor& up, bool geluTanh) {
  if (fusedApplies({&gate, &up}) && gate.sizes() == up.sizes()) {
    return gate.scalar_type() == torch::kFloat32 ? fusedGated<float>(gate, up, geluTanh)
                                                 : fusedGated<std::uint16_t>(gate, up, geluTanh);
  }
  namespace F = torch::nn::functional;
  const auto act = geluTanh ? F::gelu(gate, F::GELUFuncOptions().approximate("tanh")) : F::silu(gate);
  return act * up;
}

UnfusedOpsScope::UnfusedOpsScope() {
  ++t_unfused;
}
UnfusedOpsScope::~UnfusedOpsScope() {
  --t_unfused;
}

}  // namespace latentlab
