// The fused inference kernels of model/fused_ops.h (RMSNorm, the gated MLP
// activation, rotary embeddings) against the LibTorch operators they replace: every kernel
// build the CPU runs, fp32 and bf16, dims off the 16-lane grid, Gemma's
// (1 + w) norm, GELU as well as SiLU, inputs far into exp's tails; the fp32
// backward kernels' gradients against the operators'; and the routing.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "model/attention.h"
#include "model/decode_attention.h"
#include "model/fused_ops.h"
#include "model/kernels/cpu_kernels.h"
#include "model/llama.h"
#include "model/rope.h"
#include "model_test_util.h"

namespace latentlab::test {
namespace {

// The kernels switched off (the switch the benchmarks use) while one lives.
class KernelsOff {
 public:
  KernelsOff() { setFusedDecodeEnabled(false); }
  ~KernelsOff() { setFusedDecodeEnabled(m_was); }
  KernelsOff(const KernelsOff&) = delete;
  KernelsOff& operator=(const KernelsOff&) = delete;

 private:
  bool m_was = fusedDecodeEnabled();
};

// The operators' results, and their graph where one is built.
torch::Tensor operatorsRmsNorm(const torch::Tensor& x, const torch::Tensor& w, double eps, bool plusOne) {
  KernelsOff off;
  return rmsNorm(x, w, eps, plusOne);
}
torch::Tensor operatorsGated(const torch::Tensor& g, const torch::Tensor& u, bool gelu) {
  KernelsOff off;
  return gatedActivation(g, u, gelu);
}

template <class T>
T* bits(const torch::Tensor& t) {
  if constexpr (std::is_same_v<T, float>) {
    return t.data_ptr<float>();
  } else {
    return reinterpret_cast<T*>(t.data_ptr<at::BFloat16>());
  }
}

// fp32: within `rel` of the operators (relative to the row's scale). bf16: the
// same value, or the neighbouring bf16 value (one fp32 rounding of the sum of
// squares or of exp() apart), in at most 2% of the values.
void expectClose(const torch::Tensor& got, const torch::Tensor& want, double rel, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const auto g = got.to(torch::kFloat64), w = want.to(torch::kFloat64);
  const auto diff = (g - w).abs();
  if (got.scalar_type() == torch::kFloat32) {
    const double bound = rel * (w.abs().max().item<double>() + 1e-30);
    EXPECT_LE(diff.max().item<double>(), bound) << what;
    return;
  }
  // One bf16 step at w: 2^(exponent - 7).
  const auto step = torch::pow(2.0, torch::floor(torch::log2(w.abs().clamp_min(1e-30))) - 7);
  EXPECT_TRUE((diff <= step * 1.0001).all().item<bool>()) << what << ": max diff " << diff.max().item<double>();
  const double differing = (diff > 0).to(torch::kFloat64).mean().item<double>();
  EXPECT_LE(differing, 0.02) << what;
}

TEST(FusedOps, RmsNormOfEveryBuildMatchesTheOperators) {
  torch::manual_seed(5);
  const std::vector<std::tuple<std::int64_t, std::int64_t>> shapes = {{1, 576}, {7, 64}, {33, 37}, {300, 96}, {2, 5}};
  for (const auto& build : runnableBuilds()) {
    for (const auto& [rows, dim] : shapes) {
      for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        for (const bool plusOne : {false, true}) {
          const auto x = (torch::randn({rows, dim}) * 3).to(dtype);
          const auto w = (torch::randn({dim}) * 0.5 + (plusOne ? 0.0 : 1.0)).to(dtype);
          const auto want = operatorsRmsNorm(x, w, 1e-5, plusOne);
          auto got = torch::empty_like(x);
          const std::string what = std::string(build.isa) + " " + std::to_string(rows) + "x" + std::to_string(dim) +
                                   (dtype == torch::kFloat32 ? " fp32" : " bf16") + (plusOne ? " (1+w)" : "");
          if (dtype == torch::kFloat32) {
            kernels::RmsNormArgs<float> a{bits<float>(x), bits<float>(w), bits<float>(got), dim, dim, dim,
                                          1e-5f,          plusOne};
            build.rmsNormF32(a, 0, rows);
          } else {
            kernels::RmsNormArgs<std::uint16_t> a{bits<std::uint16_t>(x),
                                                  bits<std::uint16_t>(w),
                                                  bits<std::uint16_t>(got),
                                                  dim,
                                                  dim,
                                                  dim,
                                                  1e-5f,
                                                  plusOne};
            build.rmsNormBF16(a, 0, rows);
          }
          expectClose(got, want, 1e-6, what);
        }
      }
    }
  }
}

// tanh-approximated GELU, 0.5 x (1 + tanh(z)) = x sigmoid(2z), in fp64,
// rounded where the kernel rounds (the activation to the dtype, then the
// product). LibTorch's first form loses the value to cancellation below
// x = -4 or so in fp32 (-0 where the value is -8e-10 at x = -5.7), and even
// fp64 does further out; the second keeps it, so GELU is held to that.
torch::Tensor geluReference(const torch::Tensor& g, const torch::Tensor& u) {
  const auto x = g.to(torch::kFloat64);
  const auto z = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  const auto act = (x * torch::sigmoid(2 * z)).to(g.scalar_type()).to(torch::kFloat32);
  return (act * u.to(torch::kFloat32)).to(g.scalar_type());
}

TEST(FusedOps, GatedActivationOfEveryBuildMatchesTheOperators) {
  torch::manual_seed(6);
  // Values across exp's range and its tails (where exp(-|x|) underflows), zeros of both signs, a ragged tail.
  auto g = torch::cat({torch::randn({1000}) * 4, torch::tensor({0.0f, -0.0f, 30.0f, -30.0f, 90.0f, -90.0f, 1e-6f}),
                       torch::linspace(-12, 12, 93)});
  const auto n = g.numel();
  const auto u = torch::randn({n}) * 2;
  for (const auto& build : runnableBuilds()) {
    for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
      for (const bool gelu : {false, true}) {
        const auto gt = g.to(dtype), ut = u.to(dtype);
        const auto want = gelu ? geluReference(gt, ut) : operatorsGated(gt, ut, gelu);
        auto got = torch::empty_like(gt);
        const std::string what =
            std::string(build.isa) + (dtype == torch::kFloat32 ? " fp32" : " bf16") + (gelu ? " GELU" : " SiLU");
        // Split in two ranges at a vector boundary, as the routing hands them to threads.
        if (dtype == torch::kFloat32) {
          kernels::GatedArgs<float> a{bits<float>(gt), bits<float>(ut), bits<float>(got), gelu};
          build.gatedF32(a, 0, 512);
          build.gatedF32(a, 512, n);
        } else {
          kernels::GatedArgs<std::uint16_t> a{bits<std::uint16_t>(gt), bits<std::uint16_t>(ut),
                                              bits<std::uint16_t>(got), gelu};
          build.gatedBF16(a, 0, 512);
          build.gatedBF16(a, 512, n);
        }
        // Element by element for fp32: each value against its own magnitude.
        // GELU's exp() argument 2z is itself rounded, which costs |2z| times
        // fp32's epsilon relatively (up to 87 of them before exp underflows).
        if (dtype == torch::kFloat32) {
          const auto diff = (got - want).abs();
          const auto bound = want.abs() * (gelu ? 1e-5 : 1e-6) + 1e-30;
          const auto worst = (diff - bound).argmax().item<std::int64_t>();
          EXPECT_TRUE((diff <= bound).all().item<bool>())
              << what << ": max diff " << diff.max().item<float>() << " at g = " << gt[worst].item<float>() << ": "
              << got[worst].item<float>() << " against " << want[worst].item<float>();
        } else {
          expectClose(got, want, 0, what);
        }
      }
    }
  }
  // GELU also stays within rounding of LibTorch's operator where that has no cancellation.
  const auto x = torch::linspace(-3, 12, 301), ones = torch::ones({301});
  auto fused = torch::empty_like(x);
  kernels::GatedArgs<float> a{bits<float>(x), bits<float>(ones), bits<float>(fused), true};
  kernels::cpuKernels().gatedF32(a, 0, 301);
  const auto ops = operatorsGated(x, ones, true);
  EXPECT_LE((fused - ops).abs().max().item<float>(), 2e-6 * ops.abs().max().item<float>());
}

TEST(FusedOps, RopeOfEveryBuildMatchesTheOperators) {
  torch::manual_seed(8);
  // (B, T, H, d) projections viewed as (B, H, T, d), as attention does; whole
  // and partial rotation (the rest passes through), halves off the 16-lane grid.
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 9, 300, 64, 64}, {2, 3, 5, 64, 16}, {1, 4, 33, 40, 40}, {2, 2, 1, 37, 20}, {1, 1, 17, 8, 6}};
  for (const auto& build : runnableBuilds()) {
    for (const auto& [B, H, T, d, rd] : shapes) {
      for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
        const auto x = torch::randn({B, T, H, d}).to(dtype).transpose(1, 2);
        const auto angles = torch::randn({T, rd}) * 3;
        const auto cos = angles.cos().to(dtype), sin = angles.sin().to(dtype);
        torch::Tensor want;
        {
          KernelsOff off;
          want = applyRope(x, cos, sin);
        }
        auto got = torch::empty_like(x);
        const auto fill = [&](auto& a) {
          a.heads = H;
          a.seq = T;
          a.dim = d;
          a.rd = rd;
          a.xsb = x.stride(0);
          a.xsh = x.stride(1);
          a.xst = x.stride(2);
          a.ysb = got.stride(0);
          a.ysh = got.stride(1);
          a.yst = got.stride(2);
        };
        const std::string what = std::string(build.isa) + " " + std::to_string(T) + " positions, " +
                                 std::to_string(rd) + " of " + std::to_string(d) +
                                 (dtype == torch::kFloat32 ? " fp32" : " bf16");
        const std::int64_t rows = B * H * T;
        if (dtype == torch::kFloat32) {
          kernels::RopeArgs<float> a{bits<float>(x), bits<float>(got), bits<float>(cos), bits<float>(sin)};
          fill(a);
          build.ropeF32(a, 0, rows / 2);
          build.ropeF32(a, rows / 2, rows);
          expectClose(got, want, 1e-6, what);
        } else {
          kernels::RopeArgs<std::uint16_t> a{bits<std::uint16_t>(x), bits<std::uint16_t>(got), bits<std::uint16_t>(cos),
                                             bits<std::uint16_t>(sin)};
          fill(a);
          build.ropeBF16(a, 0, rows / 2);
          build.ropeBF16(a, rows / 2, rows);
          EXPECT_TRUE(torch::equal(got, want)) << what << ": bf16 rounds as the operators do, bit for bit";
        }
      }
    }
  }
  // Routed: a narrowed (not dense) input gets a contiguous result of the same values.
  torch::NoGradGuard noGrad;
  const auto wide = torch::randn({1, 2, 6, 48}, torch::kBFloat16);
  const auto x = wide.narrow(3, 0, 32);
  const auto angles = torch::randn({6, 32});
  const auto cos = angles.cos().to(torch::kBFloat16), sin = angles.sin().to(torch::kBFloat16);
  const auto routed = applyRope(x, cos, sin);
  UnfusedOpsScope unfused;
  EXPECT_TRUE(torch::equal(routed, applyRope(x, cos, sin)));
}

TEST(FusedOps, InferenceUsesTheKernelsAndAutogradTheOperators) {
  torch::manual_seed(7);
  const auto x = torch::randn({40, 96}, torch::kBFloat16);
  const auto w = (torch::randn({96}) + 1).to(torch::kBFloat16);
  const auto g = torch::randn({40, 256}, torch::kBFloat16), u = torch::randn({40, 256}, torch::kBFloat16);
  const auto normOps = operatorsRmsNorm(x, w, 1e-6, false);
  const auto gatedOps = operatorsGated(g, u, false);

  // Grad mode with a parameter that needs its gradient: the operators, bit for bit, with their graph.
  const auto wp = w.clone().requires_grad_(true);
  const auto trained = rmsNorm(x, wp, 1e-6, false);
  EXPECT_TRUE(trained.requires_grad());
  EXPECT_TRUE(torch::equal(trained.detach(), normOps));

  torch::NoGradGuard noGrad;
  const auto fusedNorm = rmsNorm(x, w, 1e-6, false);
  const auto fusedGated = gatedActivation(g, u, false);
  expectClose(fusedNorm, normOps, 0, "routed RMSNorm");
  expectClose(fusedGated, gatedOps, 0, "routed SiLU");
  // The kernel ran: its exp() is not LibTorch's, so some of 10,240 fp32 results differ in their last bits.
  const auto g32 = g.to(torch::kFloat32), u32 = u.to(torch::kFloat32);
  const auto fused32 = gatedActivation(g32, u32, false);
  EXPECT_FALSE(torch::equal(fused32, operatorsGated(g32, u32, false)));
  expectClose(fused32, operatorsGated(g32, u32, false), 1e-6, "routed fp32 SiLU");

  // Switched off (the benchmark's and the tests' switch): the operators again.
  setFusedDecodeEnabled(false);
  const auto off = rmsNorm(x, w, 1e-6, false);
  setFusedDecodeEnabled(true);
  EXPECT_TRUE(torch::equal(off, normOps));

  // Non-contiguous input and a batch dimension: the same values as its contiguous copy.
  const auto wide = torch::randn({3, 40, 192}, torch::kFloat32);
  const auto view = wide.narrow(2, 10, 96);
  const auto w32 = w.to(torch::kFloat32);
  EXPECT_TRUE(torch::equal(rmsNorm(view, w32, 1e-6, false), rmsNorm(view.contiguous(), w32, 1e-6, false)));
  expectClose(rmsNorm(view, w32, 1e-6, false), operatorsRmsNorm(view, w32, 1e-6, false), 1e-6, "fp32 view");
}

// fp32 training: the norm, the activation and RoPE build their own graph node,
// whose gradients are the operators' within fp32 roundings, for inputs and
// weights alike, dims off the 16-lane grid, (1 + w) norms, SiLU and GELU, and
// a frozen weight or input; recomputing a layer's forward (grad off) gives
// the very values of the graph's forward.
TEST(FusedOps, Fp32TrainingKernelsGiveTheOperatorsGradients) {
  torch::manual_seed(11);
  const auto relErr = [](const torch::Tensor& got, const torch::Tensor& want) {
    return (got - want).abs().max().item<double>() / (want.abs().max().item<double>() + 1e-30);
  };
  for (const std::int64_t d : {96, 100, 576}) {
    for (const bool plusOne : {false, true}) {
      const auto x = torch::randn({3, 7, d}).requires_grad_(true);
      const auto w = (plusOne ? torch::randn({d}) * 0.1 : torch::randn({d}) + 1).requires_grad_(true);
      const auto gy = torch::randn({3, 7, d});
      const auto y = rmsNorm(x, w, 1e-6, plusOne);
      ASSERT_TRUE(y.requires_grad());
      EXPECT_NE(y.grad_fn()->name(), "MulBackward0") << "the operators ran";
      y.backward(gy);
      const auto x2 = x.detach().clone().requires_grad_(true), w2 = w.detach().clone().requires_grad_(true);
      const auto want = operatorsRmsNorm(x2, w2, 1e-6, plusOne);
      want.backward(gy);
      const std::string what = "RMSNorm d " + std::to_string(d) + (plusOne ? " (1 + w)" : "");
      EXPECT_LE(relErr(y.detach(), want.detach()), 1e-6) << what;
      EXPECT_LE(relErr(x.grad(), x2.grad()), 1e-5) << what << " input gradient";
      EXPECT_LE(relErr(w.grad(), w2.grad()), 1e-5) << what << " weight gradient";
      torch::NoGradGuard noGrad;
      EXPECT_TRUE(torch::equal(rmsNorm(x.detach(), w.detach(), 1e-6, plusOne), y.detach())) << what;
    }
  }
  for (const bool gelu : {false, true}) {
    // Values into exp's tails and around 0.
    const auto g = (torch::randn({5, 37}) * 4).requires_grad_(true), u = torch::randn({5, 37}).requires_grad_(true);
    const auto gy = torch::randn({5, 37});
    const auto y = gatedActivation(g, u, gelu);
    y.backward(gy);
    const auto g2 = g.detach().clone().requires_grad_(true), u2 = u.detach().clone().requires_grad_(true);
    operatorsGated(g2, u2, gelu).backward(gy);
    const std::string what = gelu ? "GELU" : "SiLU";
    EXPECT_LE(relErr(g.grad(), g2.grad()), 1e-5) << what << " gate gradient";
    EXPECT_LE(relErr(u.grad(), u2.grad()), 1e-5) << what << " up gradient";
    torch::NoGradGuard noGrad;
    EXPECT_TRUE(torch::equal(gatedActivation(g.detach(), u.detach(), gelu), y.detach())) << what;
  }
  // RoPE on (B, T, H, d) projections viewed as (B, H, T, d), whole and
  // partial rotation, halves off the 16-lane grid, a gradient in another
  // layout than the output's; tables of unequal halves (the backward's
  // rotation holds for any).
  for (const auto& [B, H, T, d, rd] :
       std::vector<std::array<std::int64_t, 5>>{{2, 3, 9, 64, 64}, {1, 4, 7, 40, 16}, {2, 2, 5, 37, 20}}) {
    const auto x = torch::randn({B, T, H, d}).transpose(1, 2).requires_grad_(true);
    const auto angles = torch::randn({T, rd}) * 3;
    const auto cos = angles.cos(), sin = angles.sin();
    const auto gy = torch::randn({B, H, d, T}).transpose(2, 3);
    const auto y = applyRope(x, cos, sin);
    ASSERT_TRUE(y.requires_grad());
    EXPECT_NE(y.grad_fn()->name(), "AddBackward0") << "the operators ran";
    y.backward(gy);
    const auto x2 = x.detach().clone().requires_grad_(true);
    torch::Tensor want;
    {
      KernelsOff off;
      want = applyRope(x2, cos, sin);
    }
    want.backward(gy);
    const std::string what = "RoPE " + std::to_string(rd) + " of " + std::to_string(d);
    EXPECT_LE(relErr(y.detach(), want.detach()), 1e-6) << what;
    EXPECT_LE(relErr(x.grad(), x2.grad()), 1e-6) << what << " input gradient";
    torch::NoGradGuard noGrad;
    EXPECT_TRUE(torch::equal(applyRope(x.detach(), cos, sin), y.detach())) << what;
  }
  // A row whose sum of squares overflows fp32 has no finite normalisation:
  // NaN gradients (the trainer's finite check then stops the run), not zeros.
  {
    const auto huge = (torch::randn({2, 64}) * 1e30).requires_grad_(true);
    rmsNorm(huge, torch::ones({64}), 1e-6, false).sum().backward();
    EXPECT_TRUE(huge.grad().isnan().all().item<bool>());
  }
  // A frozen weight: only the input's gradient; a frozen input: only the weight's.
  const auto w = torch::randn({64});
  const auto x = torch::randn({4, 64}).requires_grad_(true);
  rmsNorm(x, w, 1e-6, false).sum().backward();
  EXPECT_TRUE(x.grad().defined());
  const auto wp = torch::randn({64}).requires_grad_(true);
  rmsNorm(torch::randn({4, 64}), wp, 1e-6, false).sum().backward();
  EXPECT_TRUE(wp.grad().defined());
}

// The training loss: the mean cross-entropy is LibTorch's within fp32
// roundings and its gradient as near the fp64 one as LibTorch's, vocabularies on and off the 16-lane grid, wide
// logits; a row with NaN or an infinity makes the loss and that row's
// gradient NaN (the trainer's finite check then stops the run); a target
// outside the vocabulary goes to LibTorch, which refuses it.
TEST(FusedOps, CrossEntropyAndItsGradientAreLibTorchsWithinFp32Rounding) {
  torch::manual_seed(12);
  const auto relErr = [](const torch::Tensor& got, const torch::Tensor& want) {
    return (got - want).abs().max().item<double>() / (want.abs().max().item<double>() + 1e-30);
  };
  for (const auto& [rows, vocab] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{7, 100}, {33, 4096}, {5, 49152}, {3, 13}}) {
    const auto x = (torch::randn({rows, vocab}) * 6).requires_grad_(true);
    const auto targets = torch::randint(0, vocab, {rows}, torch::kLong);
    const auto loss = crossEntropy(x, targets);
    EXPECT_NE(loss.grad_fn()->name(), "NllLossBackward0") << "the operators ran";
    (loss * 3).backward();
    const auto x2 = x.detach().clone().requires_grad_(true);
    const auto want = torch::nn::functional::cross_entropy(x2, targets);
    (want * 3).backward();
    // The gradient in fp64: ours within 1e-6 of it, or of LibTorch's own distance from it.
    const auto x64 = x.detach().to(torch::kFloat64).requires_grad_(true);
    (torch::nn::functional::cross_entropy(x64, targets) * 3).backward();
    const std::string what = std::to_string(rows) + " x " + std::to_string(vocab);
    EXPECT_LE(relErr(loss.detach(), want.detach()), 1e-6) << what;
    const double ours = relErr(x.grad().to(torch::kFloat64), x64.grad()),
                 theirs = relErr(x2.grad().to(torch::kFloat64), x64.grad());
    std::printf("%s: gradient from fp64 %.2e, LibTorch's %.2e\n", what.c_str(), ours, theirs);
    EXPECT_LE(ours, std::max(1e-6, 1.5 * theirs)) << what << " gradient";
    torch::NoGradGuard noGrad;
    EXPECT_TRUE(torch::equal(crossEntropy(x.detach(), targets), loss.detach())) << what;
  }
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto raw = torch::randn({4, 40});
    raw[2][5] = bad;
    const auto x = raw.requires_grad_(true);
    const auto loss = crossEntropy(x, torch::tensor({1, 2, 3, 4}, torch::kLong));
    EXPECT_TRUE(loss.isnan().item<bool>());
    loss.backward();
    EXPECT_TRUE(x.grad()[2].isnan().all().item<bool>());
    EXPECT_TRUE(x.grad()[0].isfinite().all().item<bool>());
  }
  EXPECT_ANY_THROW(crossEntropy(torch::randn({2, 10}), torch::tensor({3, 10}, torch::kLong)));
}

// Causal self-attention in fp32 (model/fused_attention.h) against LibTorch's
// in fp64: the output and the three gradients as near the fp64 ones as
// LibTorch's own fp32 attention is (or within 2e-6), for MHA, GQA, a
// value width other than the key's (MLA), lengths on and off the 64-query
// blocks and a single position; inputs laid out as projections viewed as
// heads, a gradient in another layout; the no-grad forward equal bit for bit
// to the graph's; NaN in one query reaching that query's row alone.
TEST(FusedOps, CausalAttentionAndItsGradientsAreLibTorchsWithinFp32Rounding) {
  torch::manual_seed(13);
  const auto relErr = [](const torch::Tensor& got, const torch::Tensor& want) {
    return (got.to(torch::kFloat64) - want).abs().max().item<double>() / (want.abs().max().item<double>() + 1e-30);
  };
  for (const auto& [B, H, Hk, T, D, Dv] : std::vector<std::array<std::int64_t, 6>>{
           {2, 9, 3, 256, 64, 64}, {1, 4, 4, 130, 32, 32}, {2, 4, 2, 70, 40, 24}, {1, 3, 1, 64, 8, 8}}) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const auto q = (torch::randn({B, T, H, D}) * 2).transpose(1, 2).requires_grad_(true);
    const auto k = (torch::randn({B, T, Hk, D}) * 2).transpose(1, 2).requires_grad_(true);
    const auto v = torch::randn({B, T, Hk, Dv}).transpose(1, 2).requires_grad_(true);
    const auto gy = torch::randn({B, H, Dv, T}).transpose(2, 3);
    const auto y = causalAttention(q, k, v, scale);
    ASSERT_TRUE(y.requires_grad());
    EXPECT_NE(std::string(y.grad_fn()->name()).find("CausalAttentionFn"), std::string::npos) << y.grad_fn()->name();
    y.backward(gy);
    // LibTorch's attention in fp32 and in fp64, the kernels off.
    std::vector<torch::Tensor> in32, in64;
    torch::Tensor y32, y64;
    {
      KernelsOff off;
      for (const auto* t : {&q, &k, &v}) {
        in32.push_back(t->detach().clone().requires_grad_(true));
        in64.push_back(t->detach().to(torch::kFloat64).requires_grad_(true));
      }
      y32 = causalAttention(in32[0], in32[1], in32[2], scale);
      y64 = causalAttention(in64[0], in64[1], in64[2], scale);
    }
    y32.backward(gy);
    y64.backward(gy.to(torch::kFloat64));
    char shape[96];
    std::snprintf(shape, sizeof shape, "B%ld H%ld Hk%ld T%ld D%ld Dv%ld", static_cast<long>(B), static_cast<long>(H),
                  static_cast<long>(Hk), static_cast<long>(T), static_cast<long>(D), static_cast<long>(Dv));
    const std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs = {
        {y.detach(), y32.detach()}, {q.grad(), in32[0].grad()}, {k.grad(), in32[1].grad()}, {v.grad(), in32[2].grad()}};
    const std::vector<torch::Tensor> exact = {y64.detach(), in64[0].grad(), in64[1].grad(), in64[2].grad()};
    const char* names[] = {"output", "q gradient", "k gradient", "v gradient"};
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const double ours = relErr(pairs[i].first, exact[i]), theirs = relErr(pairs[i].second, exact[i]);
      std::printf("%s %s: from fp64 %.2e, LibTorch's %.2e\n", shape, names[i], ours, theirs);
      EXPECT_LE(ours, std::max(2e-6, 1.5 * theirs)) << shape << " " << names[i];
    }
    torch::NoGradGuard noGrad;
    EXPECT_TRUE(torch::equal(causalAttention(q.detach(), k.detach(), v.detach(), scale), y.detach())) << shape;
  }
  // A single position sees itself alone: the output is v, v's gradient the
  // output's, and q's and k's are zero but for roundings of dO . v.
  {
    const auto q1 = torch::randn({2, 1, 4, 16}).transpose(1, 2).requires_grad_(true);
    const auto k1 = torch::randn({2, 1, 2, 16}).transpose(1, 2).requires_grad_(true);
    const auto v1 = torch::randn({2, 1, 2, 16}).transpose(1, 2).requires_grad_(true);
    const auto gy = torch::randn({2, 4, 1, 16});
    const auto y = causalAttention(q1, k1, v1, 0.25);
    y.backward(gy);
    EXPECT_TRUE(torch::equal(y.detach(), v1.detach().repeat_interleave(2, 1)));
    EXPECT_TRUE(torch::allclose(v1.grad(), gy.view({2, 2, 2, 1, 16}).sum(2), 1e-6, 1e-6));
    EXPECT_LE(q1.grad().abs().max().item<double>(), 1e-5);
    EXPECT_LE(k1.grad().abs().max().item<double>(), 1e-5);
  }
  // NaN in one query: that query's output row (and gradient) alone.
  auto q = torch::randn({1, 6, 2, 16}).transpose(1, 2);
  q[0][1][3][5] = std::numeric_limits<float>::quiet_NaN();
  const auto qg = q.requires_grad_(true);
  const auto y = causalAttention(qg, torch::randn({1, 2, 6, 16}), torch::randn({1, 2, 6, 16}), 0.25);
  y.sum().backward();
  EXPECT_TRUE(y[0][1][3].isnan().all().item<bool>());
  EXPECT_TRUE(y[0][1][2].isfinite().all().item<bool>() && y[0][0].isfinite().all().item<bool>());
  EXPECT_TRUE(qg.grad()[0][1][3].isnan().all().item<bool>());
  EXPECT_TRUE(qg.grad()[0][0].isfinite().all().item<bool>());
}

// A model's whole training loss through the fp32 kernels (norms, activation,
// RoPE, attention, the loss, a tied embedding's sparse lookup gradient)
// against LibTorch's operators: every parameter's gradient within 1e-5 of
// theirs, and the tied embedding's gradient dense, the output layer's and
// the lookup's summed.
TEST(FusedOps, ModelGradientsThroughTheKernelsAreTheOperators) {
  for (const bool tied : {true, false}) {
    TinyShape shape;
    shape.tied = tied;
    shape.layers = 2;
    const auto model = randomModel(tinyConfig(shape), torch::kFloat32, 21);
    model->train();
    const auto windows = torch::randint(0, shape.vocab, {3, 70}, torch::kLong);
    const auto gradients = [&] {
      model->zero_grad();
      languageModelLoss(*model, windows).backward();
      std::vector<torch::Tensor> g;
      for (const auto& p : model->parameters()) g.push_back(p.grad().clone());
      return g;
    };
    const auto ours = gradients();
    std::vector<torch::Tensor> theirs;
    {
      KernelsOff off;
      theirs = gradients();
    }
    const auto names = model->named_parameters().keys();
    for (std::size_t i = 0; i < ours.size(); ++i) {
      const std::string what = names[i] + (tied ? " (tied)" : "");
      ASSERT_FALSE(ours[i].is_sparse()) << what;
      const double rel =
          (ours[i] - theirs[i]).abs().max().item<double>() / (theirs[i].abs().max().item<double>() + 1e-30);
      EXPECT_LE(rel, 1e-5) << what;
    }
  }
}

}  // namespace
}  // namespace latentlab::test
