// Routing between the fused CPU kernels and LibTorch's operators.
#include "model/fused_ops.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

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

bool buildsGraph(std::initializer_list<const torch::Tensor*> tensors) {
  return torch::GradMode::is_enabled() &&
         std::any_of(tensors.begin(), tensors.end(), [](const torch::Tensor* t) { return t->requires_grad(); });
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
torch::Tensor fusedRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps, bool plusOne,
                           torch::Tensor* rstd = nullptr) {
  const auto xc = x.contiguous();
  const auto wc = weight.contiguous();
  auto y = torch::empty_like(xc);
  if (rstd != nullptr) *rstd = torch::empty({xc.numel() / x.size(-1)}, xc.options().dtype(torch::kFloat32));
  kernels::RmsNormArgs<T> a;
  if (rstd != nullptr) a.rstd = rstd->data_ptr<float>();
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

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// fp32 RMSNorm whose backward is the kernel's: the rows' r kept from the forward.
struct RmsNormFn : torch::autograd::Function<RmsNormFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight, double eps,
                               bool plusOne) {
    torch::Tensor rstd;
    auto y = fusedRmsNorm<float>(x, weight, eps, plusOne, &rstd);
    ctx->save_for_backward({x.contiguous(), weight.contiguous(), rstd});
    ctx->saved_data["plus_one"] = plusOne;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto gy = grads[0].contiguous();
    kernels::RmsNormBackwardArgs a;
    a.x = x.data_ptr<float>();
    a.w = saved[1].data_ptr<float>();
    a.rstd = saved[2].data_ptr<float>();
    a.gy = gy.data_ptr<float>();
    a.dim = x.size(-1);
    a.plusOne = ctx->saved_data["plus_one"].toBool();
    auto gx = torch::empty_like(x);
    a.gx = gx.data_ptr<float>();
    // One gw buffer per thread, summed after: no two threads add to one.
    auto partial = torch::zeros({at::get_num_threads(), a.dim}, x.options());
    const auto kernel = kernels::cpuKernels().rmsNormBackwardF32;
    forRanges(x.numel() / a.dim, 2 * a.dim, [&](std::int64_t b, std::int64_t e) {
      kernels::RmsNormBackwardArgs mine = a;
      mine.gw = partial[at::get_thread_num()].data_ptr<float>();
      kernel(mine, b, e);
    });
    return {gx.view(grads[0].sizes()), partial.sum(0), torch::Tensor(), torch::Tensor()};
  }
};

// fp32 act(gate) * up whose backward is the kernel's.
struct GatedFn : torch::autograd::Function<GatedFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate, const torch::Tensor& up, bool gelu) {
    auto y = fusedGated<float>(gate, up, gelu);
    ctx->save_for_backward({gate.contiguous(), up.contiguous()});
    ctx->saved_data["gelu"] = gelu;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto gy = grads[0].contiguous();
    auto ggate = torch::empty_like(saved[0]), gup = torch::empty_like(saved[1]);
    kernels::GatedBackwardArgs a;
    a.gate = saved[0].data_ptr<float>();
    a.up = saved[1].data_ptr<float>();
    a.gy = gy.data_ptr<float>();
    a.ggate = ggate.data_ptr<float>();
    a.gup = gup.data_ptr<float>();
    a.gelu = ctx->saved_data["gelu"].toBool();
    const auto kernel = kernels::cpuKernels().gatedBackwardF32;
    const std::int64_t vectors = (gy.numel() + 15) / 16, n = gy.numel();
    forRanges(vectors, 16, [&](std::int64_t b, std::int64_t e) { kernel(a, b * 16, std::min(n, e * 16)); });
    return {ggate, gup, torch::Tensor()};
  }
};

// fp32 RoPE whose backward is the kernel's. With y1 = x1 c1 - x2 s1 and
// y2 = x2 c2 + x1 s2 on the two halves, gx1 = g1 c1 + g2 s2 and
// gx2 = g2 c2 - g1 s1: the same rotation of the gradient with sin's halves
// swapped and negated, exact for any tables; the pass-through dims copy the
// gradient.
struct RopeFn : torch::autograd::Function<RopeFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return runRope<float>(x, cos, sin);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& sin = saved[1];
    const auto half = sin.size(1) / 2;
    const auto sinBack = torch::cat({sin.narrow(1, half, half), sin.narrow(1, 0, half)}, 1).neg_();
    const auto gy = grads[0].stride(3) == 1 ? grads[0] : grads[0].contiguous();
    return {runRope<float>(gy, saved[0], sinBack), torch::Tensor(), torch::Tensor()};
  }
};

// Each row's log-sum-exp and loss (lse, loss: (N)) from the kernel.
void crossEntropyForward(const torch::Tensor& x, const torch::Tensor& targets, torch::Tensor& lse,
                         torch::Tensor& loss) {
  lse = torch::empty({x.size(0)}, x.options());
  loss = torch::empty({x.size(0)}, x.options());
  kernels::CrossEntropyArgs a;
  a.logits = x.data_ptr<float>();
  a.targets = targets.data_ptr<std::int64_t>();
  a.lse = lse.data_ptr<float>();
  a.loss = loss.data_ptr<float>();
  a.vocab = x.size(1);
  const auto kernel = kernels::cpuKernels().crossEntropyF32;
  forRanges(x.size(0), 2 * a.vocab, [&](std::int64_t b, std::int64_t e) { kernel(a, b, e); });
}

// The rows' mean, summed in fp64 as LibTorch's reduction of a float tensor does not.
torch::Tensor meanOf(const torch::Tensor& rowLoss) {
  return rowLoss.to(torch::kFloat64).mean().to(torch::kFloat32);
}

// Mean cross-entropy whose backward is the kernel's: softmax minus the
// target, scaled by the loss's gradient over the rows, in one pass per row.
struct CrossEntropyFn : torch::autograd::Function<CrossEntropyFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits, const torch::Tensor& targets) {
    const auto x = logits.contiguous(), t = targets.contiguous();
    torch::Tensor lse, loss;
    crossEntropyForward(x, t, lse, loss);
    ctx->save_for_backward({x, t, lse});
    return meanOf(loss);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    auto gx = torch::empty_like(x);
    kernels::CrossEntropyArgs a;
    a.logits = x.data_ptr<float>();
    a.targets = saved[1].data_ptr<std::int64_t>();
    a.lse = saved[2].data_ptr<float>();
    a.grad = gx.data_ptr<float>();
    a.vocab = x.size(1);
    a.scale = static_cast<float>(grads[0].item<double>() / static_cast<double>(x.size(0)));
    const auto kernel = kernels::cpuKernels().crossEntropyBackwardF32;
    forRanges(x.size(0), 2 * a.vocab, [&](std::int64_t b, std::int64_t e) { kernel(a, b, e); });
    return {gx, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor crossEntropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  const bool shapes = logits.dim() == 2 && targets.dim() == 1 && targets.scalar_type() == torch::kLong &&
                      targets.device().is_cpu() && targets.size(0) == logits.size(0) && logits.size(0) > 0;
  if (shapes && fp32KernelsApply({&logits}) && !targets.requires_grad()) {
    const auto [lo, hi] = torch::aminmax(targets);
    if (lo.item<std::int64_t>() >= 0 && hi.item<std::int64_t>() < logits.size(1)) {
      if (buildsGraph({&logits})) return CrossEntropyFn::apply(logits, targets);
      torch::Tensor lse, loss;
      crossEntropyForward(logits.contiguous(), targets.contiguous(), lse, loss);
      return meanOf(loss);
    }
  }
  return torch::nn::functional::cross_entropy(logits, targets);
}

torch::Tensor fusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (!x.defined() || !cos.defined() || !sin.defined()) return {};
  if (x.dim() != 4 || cos.dim() != 2 || sin.sizes() != cos.sizes()) return {};
  if (cos.size(0) != x.size(2) || cos.size(1) > x.size(3) || cos.size(1) % 2 != 0 || x.stride(3) != 1) return {};
  if (fp32KernelsApply({&x, &cos, &sin})) {
    if (buildsGraph({&x, &cos, &sin})) {
      if (cos.requires_grad() || sin.requires_grad()) return {};  // tables being learned: the operators
      return RopeFn::apply(x, cos, sin);
    }
    return runRope<float>(x, cos, sin);
  }
  if (!fusedApplies({&x, &cos, &sin})) return {};
  return x.scalar_type() == torch::kFloat32 ? runRope<float>(x, cos, sin) : runRope<std::uint16_t>(x, cos, sin);
}

torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps, bool plusOne) {
  if (fp32KernelsApply({&x, &weight}) && x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1)) {
    if (buildsGraph({&x, &weight})) return RmsNormFn::apply(x, weight, eps, plusOne);
    return fusedRmsNorm<float>(x, weight, eps, plusOne);
  }
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
  if (fp32KernelsApply({&gate, &up}) && gate.sizes() == up.sizes()) {
    if (buildsGraph({&gate, &up})) return GatedFn::apply(gate, up, geluTanh);
    return fusedGated<float>(gate, up, geluTanh);
  }
  if (fusedApplies({&gate, &up}) && gate.sizes() == up.sizes()) {
    return gate.scalar_type() == torch::kFloat32 ? fusedGated<float>(gate, up, geluTanh)
                                                 : fusedGated<std::uint16_t>(gate, up, geluTanh);
  }
  namespace F = torch::nn::functional;
  const auto act = geluTanh ? F::gelu(gate, F::GELUFuncOptions().approximate("tanh")) : F::silu(gate);
  return act * up;
}

bool fp32KernelsApply(std::initializer_list<const torch::Tensor*> tensors) {
  if (!fusedDecodeEnabled() || at::autocast::is_autocast_enabled(at::kCPU)) return false;
  return std::all_of(tensors.begin(), tensors.end(), [](const torch::Tensor* t) {
    return t->defined() && t->device().is_cpu() && t->scalar_type() == torch::kFloat32 && t->numel() > 0;
  });
}

UnfusedOpsScope::UnfusedOpsScope() {
  ++t_unfused;
}
UnfusedOpsScope::~UnfusedOpsScope() {
  --t_unfused;
}

}  // namespace latentlab
