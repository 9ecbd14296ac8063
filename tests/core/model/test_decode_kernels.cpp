// The CPU decode kernels against LibTorch. Fused decode attention
// (model/decode_attention.h) against the softmax attention written out with
// LibTorch operators in fp64: every build of the kernel the CPU runs, fp32 and
// fp64, GQA grouping, the second (RoPE) score term, causal chunks, key splits,
// dims that leave vector tails, cache views narrowed from larger buffers. The
// small-row linear layer (model/decode_linear.h) against at::linear, in fp32
// and bf16. Then whole models decoding with and without the kernels.
#include <gtest/gtest.h>

#include <limits>
#include <tuple>

#include "latentlab/error.h"
#include "model/decode_attention.h"
#include "model/decode_linear.h"
#include "model/kernels/cpu_kernels.h"
#include "model_test_util.h"

namespace latentlab::test {
namespace {

// softmax(scale * (q k^T + qRope kRope^T), causal) v in fp64, from the definition.
torch::Tensor reference(const DecodeAttentionInputs& in) {
  const auto B = in.q.size(0), H = in.q.size(1), R = in.q.size(2), Tk = in.k.size(2);
  auto s = torch::matmul(in.q.to(torch::kFloat64), in.k.to(torch::kFloat64).transpose(-1, -2));  // (B, H, R, Tk)
  if (in.qRope.defined()) {
    auto sr = torch::matmul(in.qRope.to(torch::kFloat64), in.kRope.to(torch::kFloat64).transpose(-1, -2));
    s = s + sr.reshape({B, H, R, Tk});  // global row h*R + r = hr*Rr + rr
  }
  s = s * in.scale;
  auto row = torch::arange(R, torch::kInt64).remainder(in.queries).unsqueeze(1) + (Tk - in.queries);  // (R, 1)
  auto masked = torch::arange(Tk, torch::kInt64).unsqueeze(0) > row;                                  // (R, Tk)
  s = s.masked_fill(masked, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(s, -1), in.v.to(torch::kFloat64));
}

// A (B, H, T, d) cache view: the first T positions of a buffer of `cap`, as the decode cache holds it.
torch::Tensor cacheView(std::int64_t B, std::int64_t H, std::int64_t T, std::int64_t d, torch::ScalarType type) {
  return torch::randn({B, H, T + 37, d}, torch::kFloat64).to(type).narrow(2, 0, T);
}

struct Case {
  std::int64_t batch, heads, groups, queries, keys, dk, dv, ropeHeads, dRope;
  int splits;
};

DecodeAttentionInputs makeInputs(const Case& c, torch::ScalarType type) {
  DecodeAttentionInputs in;
  const std::int64_t R = c.groups * c.queries;
  in.q = torch::randn({c.batch, c.heads, R, c.dk}, torch::kFloat64).to(type);
  in.k = cacheView(c.batch, c.heads, c.keys, c.dk, type);
  in.v = cacheView(c.batch, c.heads, c.keys, c.dv, type);
  if (c.ropeHeads > 0) {
    in.qRope = torch::randn({c.batch, c.ropeHeads, c.heads * R / c.ropeHeads, c.dRope}, torch::kFloat64).to(type);
    in.kRope = cacheView(c.batch, c.ropeHeads, c.keys, c.dRope, type);
  }
  in.queries = c.queries;
  in.scale = 1.0 / std::sqrt(static_cast<double>(c.dk + c.dRope));
  in.splits = c.splits;
  return in;
}

const std::vector<Case> kCases = {
    // batch, heads, groups, queries, keys, dk, dv, ropeHeads, dRope, splits
    {1, 1, 1, 1, 1, 16, 16, 0, 0, 0},        // a single cached key
    {2, 2, 3, 1, 65, 64, 64, 0, 0, 1},       // GQA: 3 query heads per KV head, one key past a tile
    {2, 3, 3, 1, 300, 64, 64, 0, 0, 3},      // three key splits
    {1, 1, 9, 1, 130, 48, 48, 3, 8, 0},      // MHA2MLA: one latent, a RoPE key per KV group
    {3, 1, 9, 2, 129, 48, 48, 3, 8, 2},      // ... two queries (causal), split
    {2, 2, 4, 3, 70, 24, 24, 1, 8, 0},       // from-scratch MLA: latent heads, one shared RoPE key
    {1, 2, 2, 1, 64, 5, 7, 0, 0, 0},         // dims below a vector, dk != dv
    {1, 1, 5, 1, 200, 70, 70, 5, 6, 4},      // 64 + 6 dims: the 8-lane and scalar tails
    {2, 1, 6, 6, 97, 40, 32, 2, 4, 2},       // six queries per step, a split inside their causal band
    {1, 1, 3, 1, 1030, 512, 512, 1, 16, 0},  // a wide latent (Llama-2-7B at d_kv 16)
    // From six rows per cache head on, keys are transposed into vector lanes:
    {1, 2, 6, 1, 100, 32, 32, 3, 8, 0},    // RoPE key heads that straddle cache heads
    {2, 2, 8, 1, 150, 36, 20, 4, 2, 0},    // 16 + 16 + 4 key dims, 16 + 4 value dims, 2 RoPE dims
    {1, 1, 16, 1, 777, 64, 64, 4, 16, 3},  // 16 rows (more than a register block), splits
    {2, 1, 7, 1, 33, 48, 48, 7, 8, 0},     // a RoPE key head per row, a part-filled last tile
    {1, 1, 40, 1, 20, 16, 80, 0, 0, 0},    // 40 rows, no RoPE term, dv of 5 chunks
};

// (rows, dim, outs) of the linear kernel tests: one to eight rows; dims and
// outputs off the 16-lane grid, and dims off the 32-value grid of the bf16
// instructions.
const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> kLinearShapes = {
    {1, 64, 48}, {3, 70, 37}, {4, 5, 16}, {5, 576, 192}, {8, 24, 100}, {2, 48, 21}, {7, 1536, 33}};

// The kernel's arguments for y = x w^T + bias over contiguous (rows, dim)
// x, (outs, dim) w and (rows, outs) y (bias undefined: none); T is float for
// fp32 tensors, std::uint16_t (the bits) for bf16 ones.
template <class T>
kernels::LinearKernelArgs<T> linearArgs(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                                        const torch::Tensor& y) {
  auto ptr = [](const torch::Tensor& t) { return static_cast<T*>(t.data_ptr()); };
  kernels::LinearKernelArgs<T> a;
  a.x = ptr(x);
  a.xs = x.size(1);
  a.w = ptr(w);
  a.ws = w.size(1);
  a.bias = bias.defined() ? ptr(bias) : nullptr;
  a.y = ptr(y);
  a.ys = y.size(1);
  a.rows = x.size(0);
  a.outs = w.size(0);
  a.dim = x.size(1);
  return a;
}

}  // namespace

TEST(DecodeAttention, EveryKernelBuildMatchesTheSoftmaxDefinition) {
  torch::manual_seed(7);
  for (const auto& variant : runnableBuilds()) {
    for (const auto& c : kCases) {
      for (auto type : {torch::kFloat64, torch::kFloat32}) {
        auto in = makeInputs(c, type);
        in.isa = variant.isa;
        const auto got = fusedDecodeAttention(in);
        const auto want = reference(in);
        ASSERT_EQ(got.sizes(), want.sizes());
        const double tol = type == torch::kFloat64 ? 1e-12 : 2e-5;
        const double err = (got.to(torch::kFloat64) - want).abs().max().item<double>();
        EXPECT_LT(err, tol) << variant.isa << " " << c10::toString(type) << " case B" << c.batch << " H" << c.heads
                            << " G" << c.groups << " Tq" << c.queries << " Tk" << c.keys << " dk" << c.dk << " dv"
                            << c.dv << " rope " << c.ropeHeads << "x" << c.dRope << " splits " << c.splits;
      }
    }
  }
}

TEST(DecodeAttention, SplitsChangeOnlyTheSummationOrder) {
  torch::manual_seed(8);
  auto in = makeInputs({2, 3, 3, 1, 1000, 64, 64, 0, 0, 1}, torch::kFloat64);
  const auto one = fusedDecodeAttention(in);
  for (int splits : {2, 3, 4, 16}) {
    in.splits = splits;
    EXPECT_LT((fusedDecodeAttention(in) - one).abs().max().item<double>(), 1e-13) << splits << " splits";
  }
}

TEST(DecodeAttention, LargeScoresStayFinite) {
  // Scores around 1e3 apart: exp would overflow without the running max.
  torch::manual_seed(9);
  auto in = makeInputs({1, 1, 3, 1, 200, 16, 16, 0, 0, 2}, torch::kFloat32);
  in.q = in.q * 300;
  const auto got = fusedDecodeAttention(in);
  EXPECT_TRUE(torch::isfinite(got).all().item<bool>());
  EXPECT_LT((got.to(torch::kFloat64) - reference(in)).abs().max().item<double>(), 1e-4);
}

TEST(DecodeAttention, AppliesOnlyWhereItIsExact) {
  auto q = torch::randn({1, 2, 1, 8}), k = torch::randn({1, 2, 5, 8});
  EXPECT_TRUE(fusedDecodeApplies(q, k, 1));
  EXPECT_FALSE(fusedDecodeApplies(q.to(torch::kBFloat16), k.to(torch::kBFloat16), 1));  // LibTorch's ops for bf16
  EXPECT_FALSE(fusedDecodeApplies(q, k, kFusedDecodeMaxQueries + 1));                   // long chunks: SDPA
  {
    auto qg = q.clone().requires_grad_(true);
    EXPECT_FALSE(fusedDecodeApplies(qg, k, 1));  // training needs autograd
    torch::NoGradGuard g;
    EXPECT_TRUE(fusedDecodeApplies(qg, k, 1));
  }
  setFusedDecodeEnabled(false);
  EXPECT_FALSE(fusedDecodeApplies(q, k, 1));
  setFusedDecodeEnabled(true);
}

TEST(DecodeAttention, InconsistentShapesAreRefused) {
  DecodeAttentionInputs in;
  in.q = torch::randn({1, 2, 3, 8});
  in.k = torch::randn({1, 2, 5, 8});
  in.v = torch::randn({1, 2, 4, 8});  // one key short
  EXPECT_THROW(fusedDecodeAttention(in), Error);
  in.v = torch::randn({1, 2, 5, 8});
  in.queries = 2;  // 3 rows are not whole queries
  EXPECT_THROW(fusedDecodeAttention(in), Error);
  in.queries = 1;
  in.qRope = torch::randn({1, 1, 5, 4});  // 5 rows for 6 query rows
  in.kRope = torch::randn({1, 1, 5, 4});
  EXPECT_THROW(fusedDecodeAttention(in), Error);
}

TEST(DecodeLinear, EveryKernelBuildMatchesLibTorchLinear) {
  torch::manual_seed(11);
  for (const auto& variant : runnableBuilds()) {
    for (auto [rows, dim, outs] : kLinearShapes) {
      for (bool withBias : {false, true}) {
        auto x = torch::randn({rows, dim}), w = torch::randn({outs, dim});
        auto bias = withBias ? torch::randn({outs}) : torch::Tensor();
        auto y = torch::empty({rows, outs});
        variant.linearF32(linearArgs<float>(x, w, bias, y), 0, outs);
        const auto want = at::linear(x.to(torch::kFloat64), w.to(torch::kFloat64),
                                     withBias ? bias.to(torch::kFloat64) : torch::Tensor());
        const double scale = std::sqrt(static_cast<double>(dim));
        EXPECT_LT((y.to(torch::kFloat64) - want).abs().max().item<double>(), 2e-6 * scale)
            << variant.isa << " rows " << rows << " dim " << dim << " outs " << outs << " bias " << withBias;
      }
    }
  }
}

// bf16 weights, rows and outputs, fp32 sums: each output is the exact
// product of the bf16 values rounded to bf16 (to nearest, ties to even),
// save where the fp32 sum lands next to a rounding boundary.
TEST(DecodeLinear, EveryKernelBuildMatchesTheExactProductInBf16) {
  torch::manual_seed(14);
  for (const auto& variant : runnableBuilds()) {
    for (auto [rows, dim, outs] : kLinearShapes) {
      for (bool withBias : {false, true}) {
        auto x = torch::randn({rows, dim}).to(torch::kBFloat16), w = torch::randn({outs, dim}).to(torch::kBFloat16);
        auto bias = withBias ? torch::randn({outs}).to(torch::kBFloat16) : torch::Tensor();
        auto y = torch::empty({rows, outs}, torch::kBFloat16);
        variant.linearBF16(linearArgs<std::uint16_t>(x, w, bias, y), 0, outs);
        const auto exact = at::linear(x.to(torch::kFloat64), w.to(torch::kFloat64),
                                      withBias ? bias.to(torch::kFloat64) : torch::Tensor());
        const auto rounded = exact.to(torch::kFloat32).to(torch::kBFloat16).to(torch::kFloat64);
        const auto got = y.to(torch::kFloat64);
        const std::string where = std::string(variant.isa) + " rows " + std::to_string(rows) + " dim " +
                                  std::to_string(dim) + " outs " + std::to_string(outs) + (withBias ? " bias" : "");
        // Within one bf16 step of the exact value everywhere...
        EXPECT_TRUE(((got - exact).abs() <= exact.abs() * (1.0 / 128) + 1e-6 * dim).all().item<bool>()) << where;
        // ...and the rounded exact value itself nearly everywhere (truncating
        // instead of rounding would miss about half).
        const double same = (got == rounded).to(torch::kFloat64).mean().item<double>();
        EXPECT_GE(same, 0.95) << where;
      }
    }
    // A NaN in a row makes that row's outputs NaN (not a finite rounding of its bits).
    auto x = torch::randn({2, 40}).to(torch::kBFloat16), w = torch::randn({20, 40}).to(torch::kBFloat16);
    x[1][7] = std::numeric_limits<float>::quiet_NaN();
    auto y = torch::empty({2, 20}, torch::kBFloat16);
    variant.linearBF16(linearArgs<std::uint16_t>(x, w, torch::Tensor(), y), 0, 20);
    EXPECT_TRUE(torch::isfinite(y[0]).all().item<bool>()) << variant.isa;
    EXPECT_TRUE(torch::isnan(y[1]).all().item<bool>()) << variant.isa;
  }
}

// bf16 tensors of a decode step go to the kernel and agree with LibTorch's
// bf16 linear to a bf16 step; fp16 stays with LibTorch.
TEST(DecodeLinear, Bf16DecodeShapesAgreeWithLibTorch) {
  torch::manual_seed(15);
  auto x = torch::randn({1, 3, 96}).to(torch::kBFloat16);
  auto w = torch::randn({70, 96}).to(torch::kBFloat16), b = torch::randn({70}).to(torch::kBFloat16);
  const auto want = at::linear(x.to(torch::kFloat64), w.to(torch::kFloat64), b.to(torch::kFloat64));
  const auto got = linearForward(x, w, b);
  ASSERT_EQ(got.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(((got.to(torch::kFloat64) - want).abs() <= want.abs() / 128 + 1e-4).all().item<bool>());
  const auto half = torch::randn({2, 16}).to(torch::kHalf), wh = torch::randn({8, 16}).to(torch::kHalf);
  EXPECT_TRUE(torch::equal(linearForward(half, wh), at::linear(half, wh)));
}

TEST(DecodeLinear, RoutesOnlyDecodeShapesToTheKernel) {
  torch::manual_seed(12);
  auto w = torch::randn({40, 24}), b = torch::randn({40});
  auto x = torch::randn({2, 3, 24});  // six rows in a (B, T, d) tensor
  auto y = linearForward(x, w, b);
  EXPECT_EQ(y.sizes(), (std::vector<std::int64_t>{2, 3, 40}));
  EXPECT_LT((y - at::linear(x, w, b)).abs().max().item<double>(), 1e-5);
  // Nine rows, autograd, fp64: LibTorch's linear, bit for bit.
  auto many = torch::randn({9, 24});
  EXPECT_TRUE(torch::equal(linearForward(many, w, b), at::linear(many, w, b)));
  auto wg = w.clone().requires_grad_(true);
  auto yg = linearForward(x, wg, b);
  EXPECT_TRUE(yg.requires_grad());
  yg.sum().backward();
  EXPECT_TRUE(wg.grad().defined());
  auto x64 = x.to(torch::kFloat64);
  EXPECT_TRUE(torch::equal(linearForward(x64, w.to(torch::kFloat64)), at::linear(x64, w.to(torch::kFloat64))));
}

TEST(DecodeLinear, SeveralLayersInOneRangeMatchEachOnItsOwn) {
  torch::manual_seed(13);
  // Output counts off the 16-lane grid, so the joint range's blocks straddle
  // layers; a layer large enough that the range is split over threads.
  auto x = torch::randn({2, 1, 96});
  std::vector<std::pair<torch::Tensor, torch::Tensor>> layers = {{torch::randn({37, 96}), torch::randn({37})},
                                                                 {torch::randn({5, 96}), torch::Tensor()},
                                                                 {torch::randn({16, 96}), torch::randn({16})},
                                                                 {torch::randn({6000, 96}), torch::Tensor()}};
  const auto ys = linearForwardMany(x, layers);
  ASSERT_EQ(ys.size(), layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& [w, b] = layers[i];
    EXPECT_EQ(ys[i].sizes(), (std::vector<std::int64_t>{2, 1, w.size(0)})) << i;
    EXPECT_TRUE(torch::equal(ys[i], linearForward(x, w, b))) << "layer " << i;
    EXPECT_LT((ys[i] - at::linear(x, w, b)).abs().max().item<double>(), 1e-4) << "layer " << i;
  }
  // With autograd: each layer through LibTorch, gradients reach every weight.
  auto wg = layers[0].first.clone().requires_grad_(true);
  const auto yg = linearForwardMany(x, {{wg, layers[0].second}, layers[1]});
  EXPECT_TRUE(torch::equal(yg[1], at::linear(x, layers[1].first)));
  yg[0].sum().backward();
  EXPECT_TRUE(wg.grad().defined());
}

TEST(DecodeAttention, ModelDecodeWithAndWithoutTheKernelAgrees) {
  // A GQA model decoding 80 tokens one at a time (past a 64-key tile), fp32:
  // the kernel path and LibTorch's SDPA give the same logits.
  auto model = randomModel(tinyConfig(TinyShape{.kvHeads = 2}), torch::kFloat32, 31);
  torch::NoGradGuard g;
  auto ids = torch::randint(0, 128, {3, 80}, torch::kInt64);
  auto decode = [&](bool fused) {
    setFusedDecodeEnabled(fused);
    KvCache cache(2);
    std::vector<torch::Tensor> out{model->forward(ids.narrow(1, 0, 4), &cache)};
    for (int t = 4; t < 80; ++t) out.push_back(model->forward(ids.narrow(1, t, 1), &cache));
    setFusedDecodeEnabled(true);
    return torch::cat(out, 1);
  };
  const auto fused = decode(true), aten = decode(false);
  EXPECT_LT(maxAbsDiff(fused, aten), 1e-4);
  EXPECT_GT(fused.abs().max().item<double>(), 1.0);  // logits of real size, not zeros
}

}  // namespace latentlab::test
