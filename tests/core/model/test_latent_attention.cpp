// From-scratch latent attention (MLA, GLA-k, MLRA-2/-4): absorbed decode over
// the latent cache equals the naive path and the full forward token by token,
// the cache holds exactly the bytes of the formula (total and per TP device),
// checkpoints round-trip, and the parameter count is what the module holds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "latentlab/architectures.h"
#include "latentlab/engine.h"
#include "latentlab/kv_budget.h"
#include "latentlab/kv_quant.h"
#include "model/latent_attention.h"
#include "model/weights.h"
#include "model_test_util.h"
#include "test_support.h"

namespace latentlab::test {

namespace {

// A tiny base (d 64, 4 heads) with `attention` and deliberately unequal latent
// dims (d_c 24, d_R 8, d_nope 12, d_v 10, q_lora 20), so a mixed-up axis fails.
ModelConfig tinyVariant(const std::string& attention, bool scaled, int layers = 2) {
  ModelConfig base = tinyConfig({.kvHeads = 4, .layers = layers});
  AttentionOptions o;
  o.dC = 24;
  o.dRope = 8;
  o.dNope = 12;
  o.dV = 10;
  o.qLoraRank = 20;
  o.scaled = scaled;
  o.match = "none";
  return attentionVariant(base, attention, o, "test");
}

const std::vector<std::string> kLatentVariants = {"mla", "gla-2", "mlra-2", "mlra-4"};

std::int64_t numelOf(CausalLm& model) {
  std::int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}
}  // namespace

TEST(LatentAttention, AbsorbedDecodeEqualsNaiveAndFullForwardTokenByToken) {
  for (const auto& variant : kLatentVariants) {
    for (bool scaled : {true, false}) {
      auto cfg = tinyVariant(variant, scaled);
      auto model = randomModel(cfg, torch::kFloat64, 21);
      torch::NoGradGuard g;
      auto ids = torch::randint(0, cfg.vocabSize, {2, 20}, torch::kInt64);
      auto full = model->forward(ids);
      KvCache absorbedCache(cfg.numLayers), naiveCache(cfg.numLayers);
      setLatentDecode(*model, MlaDecode::Absorbed);
      auto absorbed = decodeIncrementally(*model, ids, absorbedCache);
      setLatentDecode(*model, MlaDecode::Naive);
      auto naive = decodeIncrementally(*model, ids, naiveCache);
      const std::string what = variant + (scaled ? " scaled" : " no scale");
      EXPECT_LT(maxAbsDiff(absorbed, naive), 1e-10) << what;
      EXPECT_LT(maxAbsDiff(absorbed, full), 1e-10) << what;
      EXPECT_LT(maxAbsDiff(naive, full), 1e-10) << what;
      EXPECT_GT(full.abs().max().item<double>(), 1e-3) << what << ": logits must not be trivially zero";
      EXPECT_EQ(absorbedCache.length(), 20);
    }
  }
}

// A quantized latent cache (docs/kv_quant.md): the absorbed decode reads the
// latent heads and the RoPE key a block of 512 tokens at a time and equals
// the naive path over the same cache dequantized whole (1e-9 of the logits'
// scale, fp64), for every variant, with the newest 8 tokens exact; the cache
// holds the documented bytes.
TEST(LatentAttention, AbsorbedDecodeOverAQuantizedCacheEqualsNaiveOverItsDequantizedCache) {
  for (const auto& variant : kLatentVariants) {
    auto cfg = tinyVariant(variant, true);
    auto model = randomModel(cfg, torch::kFloat64, 23);
    torch::NoGradGuard g;
    auto ids = torch::randint(0, cfg.vocabSize, {2, 1060}, torch::kInt64);
    const std::vector<std::int64_t> chunks = {1030, 20};
    // Groups of 8, 4 or 2 channels: several to a latent row of 24, 12 or 6 and to the RoPE key's 8.
    int group = 8;
    while (cfg.latent->latentDim() % group != 0) group /= 2;
    for (const int bits : {8, 4}) {
      const KvQuantSettings q{bits, group, 8, 512};
      const std::string what = variant + " " + kvQuantName(bits);
      ASSERT_FALSE(checkKvQuant(q, cfg, 2048)) << what;
      KvCache absorbedCache(cfg.numLayers), naiveCache(cfg.numLayers);
      absorbedCache.setQuant(q);
      naiveCache.setQuant(q);
      setLatentDecode(*model, MlaDecode::Absorbed);
      const auto absorbed = decodeAfterPrompt(*model, ids, absorbedCache, chunks);
      setLatentDecode(*model, MlaDecode::Naive);
      const auto naive = decodeAfterPrompt(*model, ids, naiveCache, chunks);
      EXPECT_LT(maxAbsDiff(absorbed, naive), 1e-9 * naive.abs().max().item<double>()) << what;
      EXPECT_EQ(absorbedCache.bytes(), 2 * kvQuantBudget(cfg, q, DType::F64).bytesFor(1060)) << what;
    }
  }
}

TEST(LatentAttention, MhaAndGqaVariantsDecodeLikeTheirFullForward) {
  for (const std::string variant : {"mha", "gqa"}) {
    ModelConfig base = tinyConfig({.kvHeads = 4});
    AttentionOptions o;
    o.gqaGroup = 2;
    o.match = "none";
    auto cfg = attentionVariant(base, variant, o, "test");
    EXPECT_EQ(cfg.numKvHeads, variant == "mha" ? 4 : 2);
    auto model = randomModel(cfg, torch::kFloat64, 22);
    torch::NoGradGuard g;
    auto ids = torch::randint(0, cfg.vocabSize, {2, 16}, torch::kInt64);
    KvCache cache(cfg.numLayers);
    EXPECT_LT(maxAbsDiff(decodeIncrementally(*model, ids, cache), model->forward(ids)), 1e-10) << variant;
  }
}

TEST(LatentAttention, ScaleFactorsChangeTheFunction) {
  // Same weights, scaled vs not: the factors must reach the output (else the ablation compares equal models).
  for (const auto& variant : kLatentVariants) {
    auto scaled = randomModel(tinyVariant(variant, true), torch::kFloat64, 23);
    auto plain = randomModel(tinyVariant(variant, false), torch::kFloat64, 23);
    torch::NoGradGuard g;
    auto ids = torch::randint(0, 128, {1, 9}, torch::kInt64);
    EXPECT_GT(maxAbsDiff(scaled->forward(ids), plain->forward(ids)), 1e-3) << variant;
  }
}

TEST(LatentAttention, CacheBytesFromTensorsEqualTheFormulaTotalAndPerTpDevice) {
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    for (const auto& variant : kLatentVariants) {
      auto cfg = tinyVariant(variant, true, /*layers=*/3);
      const LatentAttention& a = *cfg.latent;
      auto model = randomModel(cfg, dtype, 24);
      torch::NoGradGuard g;
      const int N = 13;
      auto ids = torch::randint(0, cfg.vocabSize, {1, N}, torch::kInt64);
      KvCache cache(cfg.numLayers);
      decodeIncrementally(*model, ids, cache);
      const std::int64_t elem = dtype == torch::kFloat64 ? 8 : 4;
      const DType cacheType = dtype == torch::kFloat64 ? DType::F64 : DType::F32;
      // Formula: d_c + d_R elements per token and layer.
      EXPECT_EQ(cache.bytes(), (24 + 8) * N * cfg.numLayers * elem) << variant;
      EXPECT_EQ(cache.bytes(), currentKvBudget(cfg, cacheType).bytesPerToken * N) << variant;
      // The cache is the shared RoPE key (1 head) and the latent heads (L heads of d_c/L).
      EXPECT_EQ(cache.layer(0).view(0).sizes(), (std::vector<std::int64_t>{1, 1, N, 8}));
      EXPECT_EQ(cache.layer(0).view(1).sizes(), (std::vector<std::int64_t>{1, a.latentHeads, N, 24 / a.latentHeads}));
      for (int tp : {1, 2, 4, 8}) {
        // One device keeps the RoPE key and its share of the latent heads: measure those slices.
        std::int64_t device = 0;
        for (int l = 0; l < cfg.numLayers; ++l) {
          auto rope = cache.layer(l).view(0);
          auto latent = cache.layer(l).view(1).narrow(1, 0, headsPerDevice(a.latentHeads, tp));
          device += rope.numel() * rope.element_size() + latent.numel() * latent.element_size();
        }
        const auto budget = currentKvBudget(cfg, cacheType, tp);
        EXPECT_EQ(device, budget.perDeviceBytesPerToken * N) << variant << " tp " << tp;
      }
      // The papers' statements: MLA d_c + d_R at any degree, GLA-2 d_c/2 + d_R at 2, MLRA d_c/4 + d_R at 4.
      const auto perLayer = [&](int tp) { return currentKvBudget(cfg, cacheType, tp).perDevicePerTokenPerLayer; };
      if (variant == "mla") {
        EXPECT_EQ(perLayer(8), 24 + 8);
      } else if (variant == "gla-2") {
        EXPECT_EQ(perLayer(2), 12 + 8);
      } else {
        EXPECT_EQ(perLayer(4), 6 + 8);
      }
    }
  }
}

TEST(LatentAttention, ParameterCountEqualsTheTensorsTheModelHolds) {
  for (const auto& variant : kLatentVariants) {
    auto cfg = tinyVariant(variant, true);
    auto model = randomModel(cfg, torch::kFloat32, 25);
    EXPECT_EQ(countParameters(cfg), numelOf(*model)) << variant;
  }
}

TEST(LatentAttention, CheckpointRoundTripKeepsTheVariantAndItsLogits) {
  const auto dir = scratchDir("latent-roundtrip");
  for (const auto& variant : kLatentVariants) {
    auto cfg = tinyVariant(variant, variant != "mla");
    auto model = randomModel(cfg, torch::kFloat64, 26);
    const auto out = dir / variant;
    saveModel(*model, out, DType::F64);
    ModelSummary s = inspectModel(out, 2);
    ASSERT_TRUE(s.config.latent.has_value()) << variant;
    EXPECT_EQ(s.config.latent->name(), variant);
    EXPECT_EQ(s.config.latent->scaled, variant != "mla");
    EXPECT_TRUE(s.unusedKeys.empty());
    EXPECT_EQ(s.parameters, countParameters(cfg));
    EXPECT_EQ(s.kv.perTokenPerLayer, 24 + 8);
    EXPECT_EQ(s.kv.tpDegree, 2);
    auto loaded = loadModel(out, torch::kCPU, torch::kFloat64);
    loaded->eval();
    torch::NoGradGuard g;
    auto ids = torch::randint(0, cfg.vocabSize, {1, 10}, torch::kInt64);
    EXPECT_LT(maxAbsDiff(loaded->forward(ids), model->forward(ids)), 1e-12) << variant;
  }
  // The inspect verb reports the variant and the KV cache per device under the chosen degree.
  std::string text;
  ASSERT_EQ(runCommand(std::string(LATENTLAB_ENGINE_EXE) + " inspect " + shellQuote((dir / "gla-2").string()) +
                           " --json --tp 2",
                       &text),
            0)
      << text;
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j.at("latent").at("variant"), "gla-2");
  EXPECT_EQ(j.at("tp_degree"), 2);
  EXPECT_EQ(j.at("kv_elements_per_token_per_layer"), 24 + 8);
  EXPECT_EQ(j.at("kv_elements_per_token_per_layer_per_device"), 12 + 8);
  EXPECT_EQ(j.at("kv_bytes_per_token_per_device"), (12 + 8) * 2 * 8);  // 2 layers, F64
}

}  // namespace latentlab::test
