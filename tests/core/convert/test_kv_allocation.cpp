// A KV budget spread over layers (conversion.kv_budget, docs/conversion.md):
// the budget's forms and refusals, the greedy split against every split of
// the same steps, and a converted model whose cache, parameters and saved
// folder follow each layer's own d_kv.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "convert_test_util.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "latentlab/run_spec.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {
KvSettings highR2() {
  KvSettings s;
  s.method = KvMethod::Mha2Mla;
  s.ropePairs = 2;
  return s;
}
KvBudgetLimits limitsOf(const ModelConfig& cfg, const KvSettings& s, const std::string& text) {
  KvBudgetLimits lim;
  if (auto why = resolveKvBudget(cfg, s, DType::F32, text, "--kv-budget", &lim)) ADD_FAILURE() << text << ": " << *why;
  return lim;
}
std::string refusal(const ModelConfig& cfg, const KvSettings& s, const std::string& text) {
  return resolveKvBudget(cfg, s, DType::F32, text, "--kv-budget", nullptr).value_or("");
}
}  // namespace

TEST(KvAllocation, BudgetFormsAndRefusals) {
  const ModelConfig cfg = fourLayers();  // n_kv 2, d_h 16: with r = 2 a RoPE layer caches 2*(4 + d_kv) elements
  KvSettings s = highR2();
  s.dKv = 8;
  const std::int64_t atEight = computeKvBudget(cfg, s, DType::F32).bytesPerToken;
  EXPECT_EQ(atEight, 4 * 2 * (4 + 8) * 4);
  const KvBudgetLimits eight = limitsOf(cfg, highR2(), "d_kv:8");
  EXPECT_EQ(eight.budgetBytes, atEight);
  EXPECT_EQ(eight.uniformDKv, 8);
  EXPECT_EQ(eight.stepBytes, 2 * 4);  // n_kv latent dims in fp32
  EXPECT_EQ(eight.maxDKv, fullRankDkv(cfg, 2, SvdMethod::Joint));
  EXPECT_EQ(limitsOf(cfg, highR2(), std::to_string(atEight)).budgetBytes, atEight);
  EXPECT_EQ(limitsOf(cfg, highR2(), std::to_string(atEight + 7) + "B").uniformDKv, 8) << "under one more layer-step";
  // 75% saving: a quarter of the original 4 layers * 2 * 2 * 16 fp32 elements.
  const KvBudgetLimits quarter = limitsOf(cfg, highR2(), "75%");
  EXPECT_EQ(quarter.budgetBytes, 4 * 2 * 2 * 16 * 4 / 4);
  EXPECT_EQ(limitsOf(cfg, highR2(), "-75%").budgetBytes, quarter.budgetBytes);
  EXPECT_EQ(quarter.uniformDKv, 4);

  for (const std::string bad : {"abc", "12.5", "0%", "100%", "d_kv:0", "d_kv:x", "", "-3"}) {
    const std::string why = refusal(cfg, highR2(), bad);
    EXPECT_NE(why.find("--kv-budget"), std::string::npos) << "'" << bad << "': " << why;
  }
  EXPECT_NE(refusal(cfg, highR2(), "8").find("under the smallest cache"), std::string::npos);
  EXPECT_NE(refusal(cfg, highR2(), "d_kv:29").find("past the largest, 28"), std::string::npos);
  EXPECT_NE(refusal(cfg, highR2(), "100000").find("past the full-rank cache"), std::string::npos);
  KvSettings none = highR2();
  none.layers = std::vector<int>{};
  EXPECT_NE(refusal(cfg, none, "d_kv:8").find("no layer is converted"), std::string::npos);
  KvSettings deepseek = highR2();
  deepseek.method = KvMethod::DeepSeek;
  EXPECT_NE(refusal(cfg, deepseek, "d_kv:8").find("mha2mla"), std::string::npos);
}

TEST(KvAllocation, GreedyKeepsTheMostOfEverySplitWithinTheBudget) {
  // Three converted layers and an unconverted one, falling gains, d_kv at most 5.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::vector<double>> gains(4);
    for (std::size_t l : {0U, 1U, 3U}) {
      double g = u(rng);
      for (int k = 0; k < 5; ++k) gains[l].push_back(g *= u(rng));
    }
    for (int extra = 0; extra <= 12; ++extra) {
      KvBudgetLimits lim;
      lim.convertedLayers = 3;
      lim.maxDKv = 5;
      lim.stepBytes = 8;
      lim.minBytes = 1000;
      lim.maxBytes = lim.minBytes + 3 * 4 * lim.stepBytes;
      lim.budgetBytes = lim.minBytes + extra * lim.stepBytes + (extra % 3);  // a few bytes past a step: still under
      lim.uniformDKv = std::min(5, 1 + extra / 3);
      const KvAllocation a = allocateKvBudget(lim, gains);
      ASSERT_EQ(a.layerDKv.size(), 4U);
      EXPECT_EQ(a.layerDKv[2], 0) << "the unconverted layer";
      int steps = 0;
      double kept = 0.0;
      for (std::size_t l : {0U, 1U, 3U}) {
        EXPECT_GE(a.layerDKv[l], 1);
        EXPECT_LE(a.layerDKv[l], 5);
        steps += a.layerDKv[l] - 1;
        for (int k = 0; k < a.layerDKv[l]; ++k) kept += gains[l][static_cast<std::size_t>(k)];
      }
      EXPECT_EQ(steps, extra) << "every step the budget pays for is spent";
      EXPECT_EQ(a.bytesPerToken, lim.minBytes + extra * lim.stepBytes);
      EXPECT_LE(a.bytesPerToken, lim.budgetBytes);
      EXPECT_GT(a.bytesPerToken + lim.stepBytes, lim.budgetBytes) << "within one step of the budget";
      // Against every split of the same steps.
      double best = 0.0;
      for (int d0 = 1; d0 <= 5; ++d0)
        for (int d1 = 1; d1 <= 5; ++d1)
          for (int d3 = 1; d3 <= 5; ++d3) {
            if (d0 + d1 + d3 - 3 != extra) continue;
            double k = 0.0;
            for (int i = 0; i < d0; ++i) k += gains[0][static_cast<std::size_t>(i)];
            for (int i = 0; i < d1; ++i) k += gains[1][static_cast<std::size_t>(i)];
            for (int i = 0; i < d3; ++i) k += gains[3][static_cast<std::size_t>(i)];
            best = std::max(best, k);
          }
      EXPECT_NEAR(kept, best, 1e-12) << "trial " << trial << ", " << extra << " steps";
    }
  }
}

TEST(KvAllocation, ConvertedModelCachesParametersAndFolderFollowEachLayer) {
  const ModelConfig cfg = fourLayers();
  auto base = randomModel(cfg, torch::kFloat32, 21);
  // Layer 2's keys and values made nearly rank 2: its spectrum needs few dims.
  {
    torch::NoGradGuard g;
    auto* a = dynamic_cast<LlamaAttention*>(base->layer(2)->self_attn.get());
    for (auto* w : {&a->k_proj->weight, &a->v_proj->weight}) {
      auto [uu, ss, vh] = at::linalg_svd(*w, false);
      ss.narrow(0, 2, ss.size(0) - 2).mul_(0.01);
      w->copy_(torch::matmul(uu * ss.unsqueeze(0), vh));
    }
  }
  ConversionOptions o = mlaOptions(RopeStrategy::High, 2, 0);
  o.kvBudget = limitsOf(cfg, highR2(), "d_kv:6");
  ConversionStats stats;
  std::shared_ptr<CausalLm> uniform;
  NullProgress quiet;
  CancelToken cancel;
  auto model = convertModel(*base, o, {}, quiet, cancel, &stats, &uniform);
  ASSERT_TRUE(stats.allocation);
  const auto& dkv = stats.allocation->layerDKv;
  EXPECT_LT(dkv[2], 6) << "the nearly low-rank layer gives dims away";
  EXPECT_EQ(dkv[0] + dkv[1] + dkv[2] + dkv[3], 4 * 6) << "the steps of d_kv 6 everywhere";
  EXPECT_EQ(stats.allocation->bytesPerToken, o.kvBudget.budgetBytes);
  EXPECT_EQ(uniform->config().mla->dKv, 6);
  EXPECT_TRUE(uniform->config().mla->layerDKv.empty());

  // The cache a prefill holds is the allocation's bytes per token.
  const ModelConfig& mcfg = model->config();
  EXPECT_EQ(mcfg.mla->layerDKv, dkv);
  const KvBudget budget = currentKvBudget(mcfg, DType::F32);
  EXPECT_EQ(budget.bytesPerToken, stats.allocation->bytesPerToken);
  torch::NoGradGuard g;
  const auto ids = torch::randint(0, 128, {1, 24}, torch::kInt64);
  KvCache cache(mcfg.numLayers);
  const auto logits = model->forward(ids, &cache);
  EXPECT_EQ(cache.bytes(), 24 * budget.bytesPerToken);
  // One token at a time through the cache (the decode path, each layer's
  // latent its own width): the full forward's logits at those positions.
  const auto next = torch::randint(0, 128, {1, 4}, torch::kInt64);
  const auto whole = model->forward(torch::cat({ids, next}, 1));
  for (int t = 0; t < 4; ++t) {
    const auto step = model->forward(next.narrow(1, t, 1), &cache);
    EXPECT_LT((step[0][0] - whole[0][24 + t]).abs().max().item<double>(), 1e-4) << "decode step " << t;
  }
  EXPECT_EQ(cache.bytes(), 28 * budget.bytesPerToken);
  for (int l = 0; l < mcfg.numLayers; ++l) {
    EXPECT_EQ(budget.layerElements[static_cast<std::size_t>(l)], 2 * (4 + dkv[static_cast<std::size_t>(l)]))
        << "layer " << l;
  }
  std::int64_t numel = 0;
  for (const auto& p : model->parameters()) numel += p.numel();
  EXPECT_EQ(countParameters(mcfg), numel);

  // Saved and loaded: the same per-layer d_kv and the same logits.
  const fs::path dir = scratchDir("kv-allocation") / "model";
  saveModel(*model, dir, DType::F32, {});
  auto loaded = loadModel(dir, torch::kCPU, torch::kFloat32);
  EXPECT_EQ(loaded->config().mla->layerDKv, dkv);
  EXPECT_TRUE(torch::equal(loaded->forward(ids), model->forward(ids)));
  EXPECT_LT((logits - model->forward(ids)).abs().max().item<double>(), 1e-5) << "through the cache";
}

TEST(KvAllocation, FullRankBudgetReproducesTheOriginal) {
  const ModelConfig cfg = fourLayers();
  auto base = randomModel(cfg, torch::kFloat64, 22);
  KvSettings full;
  full.method = KvMethod::Mha2Mla;
  full.fullRope = true;
  ConversionOptions o = mlaOptions(RopeStrategy::Full, 0, 0);
  const int max = fullRankDkv(cfg, cfg.headDim / 2, SvdMethod::Joint);
  o.kvBudget = limitsOf(cfg, full, "d_kv:" + std::to_string(max));
  ConversionStats stats;
  NullProgress quiet;
  CancelToken cancel;
  auto model = convertModel(*base, o, {}, quiet, cancel, &stats);
  EXPECT_EQ(stats.allocation->layerDKv, std::vector<int>(4, max));
  torch::NoGradGuard g;
  const auto ids = torch::randint(0, 128, {2, 16}, torch::kInt64);
  EXPECT_LT((model->forward(ids) - base->forward(ids)).abs().max().item<double>(), 1e-8);
}

TEST(KvAllocation, ConfigAndSpecFields) {
  ModelConfig cfg = fourLayers();
  MlaConversion m;
  m.ropeStrategy = RopeStrategy::High;
  m.ropePairs = 2;
  m.dKv = 9;
  m.layerDKv = {3, 9, 0, 5};
  m.layers = std::vector<int>{0, 1, 3};
  m.pairs.assign(4, std::vector<std::vector<int>>(2, std::vector<int>{0, 1}));
  cfg.mla = m;
  const fs::path dir = scratchDir("kv-allocation-config");
  writeHfConfig(cfg, dir / "config.json");
  EXPECT_EQ(readHfConfig(dir / "config.json").mla->layerDKv, m.layerDKv);
  KvSettings s = highR2();
  s.dKv = 9;
  s.layers = m.layers;
  s.layerDKv = m.layerDKv;
  ModelConfig original = cfg;
  original.mla.reset();
  EXPECT_EQ(currentKvBudget(cfg, DType::F32).perToken, computeKvBudget(original, s, DType::F32).perToken);
  EXPECT_EQ(currentKvBudget(cfg, DType::F32).perToken, 2 * (4 + 3) + 2 * (4 + 9) + 2 * 2 * 16 + 2 * (4 + 5));

  const auto refusedWith = [&](const std::function<void(MlaConversion&)>& edit) {
    ModelConfig c = cfg;
    edit(*c.mla);
    try {
      c.validate("config.json");
    } catch (const Error& e) {
      return e.message();
    }
    return std::string();
  };
  EXPECT_NE(refusedWith([](MlaConversion& x) { x.layerDKv.pop_back(); }).find("d_kv_per_layer"), std::string::npos);
  EXPECT_NE(refusedWith([](MlaConversion& x) { x.layerDKv[1] = 0; }).find("layer 1 is converted"), std::string::npos);
  EXPECT_NE(refusedWith([](MlaConversion& x) { x.layerDKv[2] = 4; }).find("layer 2 is not converted"),
            std::string::npos);
  EXPECT_NE(refusedWith([](MlaConversion& x) { x.dKv = 10; }).find("latentlab_mla.d_kv"), std::string::npos);

  const std::string head =
      R"({"kind": "convert-finetune", "model_dir": "m", "data": {"corpus": "demo"}, "conversion": {"rope_strategy": "high", )";
  const RunSpec text = parseRunSpec(head + R"("kv_budget": "d_kv:8"}})", "spec");
  EXPECT_EQ(text.conversion.kvBudget, "d_kv:8");
  EXPECT_EQ(parseRunSpec(runSpecToJson(text), "again").conversion.kvBudget, "d_kv:8");
  EXPECT_EQ(parseRunSpec(head + R"("kv_budget": 12288}})", "spec").conversion.kvBudget, "12288");
  try {
    parseRunSpec(head + R"("target": "deepseek", "kv_budget": "75%"}})", "spec");
    ADD_FAILURE() << "a budget for the deepseek target was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("conversion.kv_budget"), std::string::npos) << e.message();
  }
}

}  // namespace latentlab::test
