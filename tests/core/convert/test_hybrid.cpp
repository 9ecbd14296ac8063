// Hybrid conversion (conversion.layers, docs/conversion.md): only the listed
// decoder layers get MHA2MLA attention, the others keep the original's
// attention, weights and K/V cache. Converting no layer is the original model
// bit for bit; every layer, today's conversion bit for bit; some layers at
// full rank with full RoPE reproduce the original; the cache, the parameter
// count and config.json describe each layer kind; bad selections name the flag.
#include <gtest/gtest.h>

#include "convert_test_util.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "latentlab/run_spec.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

TEST(Hybrid, NoLayerConvertedIsTheOriginalAndEveryLayerIsTheFullConversion) {
  const ModelConfig cfg = fourLayers();
  auto base = randomModel(cfg, torch::kFloat32, 11);
  torch::NoGradGuard g;
  const auto ids = torch::randint(0, 128, {2, 20}, torch::kInt64);
  const auto original = base->forward(ids);

  ConversionOptions none = mlaOptions(RopeStrategy::High, 2, 4);
  none.layers = std::vector<int>{};
  auto unconverted = convertModel(*base, none);
  EXPECT_TRUE(torch::equal(unconverted->forward(ids), original)) << "no layer converted: the original, bit for bit";
  for (int l = 0; l < cfg.numLayers; ++l)
    EXPECT_NE(dynamic_cast<LlamaAttention*>(unconverted->layer(l)->self_attn.get()), nullptr) << "layer " << l;

  ConversionOptions every = mlaOptions(RopeStrategy::High, 2, 4);
  every.layers = std::vector<int>{0, 1, 2, 3};
  auto listed = convertModel(*base, every);
  auto all = convertModel(*base, mlaOptions(RopeStrategy::High, 2, 4));
  EXPECT_TRUE(torch::equal(listed->forward(ids), all->forward(ids))) << "every layer listed: today's conversion";
  EXPECT_EQ(countParameters(listed->config()), countParameters(all->config()));
}

TEST(Hybrid, SomeLayersAtFullRankReproduceTheOriginal) {
  const ModelConfig cfg = fourLayers();
  auto base = randomModel(cfg, torch::kFloat64, 12);
  ConversionOptions o = mlaOptions(RopeStrategy::Full, 0, fullRankDkv(cfg, cfg.headDim / 2, SvdMethod::Joint));
  o.layers = std::vector<int>{1, 3};
  auto hybrid = convertModel(*base, o);
  EXPECT_NE(dynamic_cast<LlamaAttention*>(hybrid->layer(0)->self_attn.get()), nullptr);
  EXPECT_NE(dynamic_cast<MlaAttention*>(hybrid->layer(1)->self_attn.get()), nullptr);
  EXPECT_NE(dynamic_cast<LlamaAttention*>(hybrid->layer(2)->self_attn.get()), nullptr);
  EXPECT_NE(dynamic_cast<MlaAttention*>(hybrid->layer(3)->self_attn.get()), nullptr);
  torch::NoGradGuard g;
  const auto ids = torch::randint(0, 128, {2, 24}, torch::kInt64);
  const auto want = base->forward(ids);
  EXPECT_LT(maxAbsDiff(hybrid->forward(ids), want), 1e-9);

  // Decoding through both caches (the original K/V in layers 0 and 2, the
  // latent in 1 and 3) gives the full forward's last logits at every step.
  KvCache cache(cfg.numLayers);
  hybrid->forward(ids.narrow(1, 0, 16), &cache);
  for (int t = 16; t < 24; ++t) {
    const auto step = hybrid->forward(ids.narrow(1, t, 1), &cache);
    EXPECT_LT(maxAbsDiff(step.select(1, 0), want.select(1, t)), 1e-9) << "position " << t;
  }
}

// The partial conversion's cache per token: converted layers at the latent's
// size, the others at the original 2 n_kv d_h; the parameter count and a save
// and load keep the layer list.
TEST(Hybrid, CacheParametersAndConfigDescribeEachLayerKind) {
  const ModelConfig cfg = fourLayers();
  auto base = randomModel(cfg, torch::kFloat32, 13);
  ConversionOptions o = mlaOptions(RopeStrategy::High, 2, 4);
  o.layers = std::vector<int>{2, 3};
  auto hybrid = convertModel(*base, o);
  const KvBudget b = currentKvBudget(hybrid->config(), DType::F32);
  const std::int64_t original = 2LL * cfg.numKvHeads * cfg.headDim, latent = cfg.numKvHeads * (2 * 2 + 4);
  EXPECT_EQ(b.originalLayers, 2);
  EXPECT_EQ(b.perTokenPerLayer, latent);
  EXPECT_EQ(b.perToken, 2 * original + 2 * latent);
  EXPECT_EQ(b.bytesPerToken, 4 * (2 * original + 2 * latent));
  EXPECT_NEAR(b.saving, static_cast<double>(2 * latent - 2 * original) / (4.0 * original), 1e-12);
  std::int64_t counted = 0;
  for (const auto& p : hybrid->parameters()) counted += p.numel();
  EXPECT_EQ(countParameters(hybrid->config()), counted);

  const fs::path dir = scratchDir("hybrid-save") / "m";
  saveModel(*hybrid, dir, DType::F32);
  auto loaded = loadModel(dir, torch::kCPU, torch::kFloat32);
  ASSERT_TRUE(loaded->config().mla && loaded->config().mla->layers);
  EXPECT_EQ(*loaded->config().mla->layers, (std::vector<int>{2, 3}));
  torch::NoGradGuard g;
  const auto ids = torch::randint(0, 128, {1, 12}, torch::kInt64);
  EXPECT_TRUE(torch::equal(loaded->forward(ids), hybrid->forward(ids)));
}

TEST(Hybrid, LayerSelectionsResolveAndBadOnesNameTheFlag) {
  EXPECT_FALSE(resolveLayerSelection("all", 6, "--layers").has_value());
  EXPECT_EQ(*resolveLayerSelection("none", 6, "--layers"), std::vector<int>{});
  EXPECT_EQ(*resolveLayerSelection("every:2", 6, "--layers"), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(*resolveLayerSelection("every:3", 7, "--layers"), (std::vector<int>{2, 5}));
  EXPECT_EQ(*resolveLayerSelection("last:2", 6, "--layers"), (std::vector<int>{4, 5}));
  EXPECT_EQ(*resolveLayerSelection("5, 0,2", 6, "--layers"), (std::vector<int>{0, 2, 5}));
  for (const char* bad : {"6", "0,0", "every:0", "last:7", "first:2", "1;2", ""}) {
    if (std::string(bad).empty()) continue;  // empty is "all"
    try {
      resolveLayerSelection(bad, 6, "--layers");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("--layers '" + std::string(bad) + "'"), std::string::npos) << e.message();
    }
  }
  // The spec: a list or the text form; a bad form is refused naming the field.
  EXPECT_EQ(parseRunSpec(R"({"kind":"convert-finetune","model_dir":"m","conversion":{"layers":[3,1]}})", "s")
                .conversion.layers,
            "3,1");
  EXPECT_EQ(parseRunSpec(R"({"kind":"convert-finetune","model_dir":"m","conversion":{"layers":"last:2"}})", "s")
                .conversion.layers,
            "last:2");
  try {
    parseRunSpec(R"({"kind":"convert-finetune","model_dir":"m","conversion":{"layers":"half"}})", "s");
    ADD_FAILURE() << "layers 'half' was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("conversion.layers 'half'"), std::string::npos) << e.message();
  }
}

}  // namespace latentlab::test
