// Decoding a converted model: the latent cache with absorbed attention equals
// the naive path and the full-sequence forward, and the cache holds exactly
// the bytes of algorithms.md §2.3.
#include <gtest/gtest.h>

#include <string>

#include "convert_test_util.h"
#include "latentlab/architectures.h"
#include "latentlab/kv_budget.h"
#include "latentlab/kv_quant.h"

namespace latentlab::test {

namespace {
// The converted model decoded token by token twice: absorbed, then naive,
// each through its own cache.
struct BothDecodes {
  torch::Tensor absorbed, naive;
  KvCache absorbedCache, naiveCache;
};
BothDecodes decodeBothWays(CausalLm& mla, const torch::Tensor& ids) {
  BothDecodes d{{}, {}, KvCache(mla.numLayers()), KvCache(mla.numLayers())};
  setMlaDecode(mla, MlaDecode::Absorbed);
  d.absorbed = decodeIncrementally(mla, ids, d.absorbedCache);
  setMlaDecode(mla, MlaDecode::Naive);
  d.naive = decodeIncrementally(mla, ids, d.naiveCache);
  return d;
}

// Both decodes of `ids` (fp64) against the full-sequence forward, to 1e-10,
// with every token cached.
BothDecodes expectBothDecodesMatchFull(CausalLm& mla, const torch::Tensor& ids, const std::string& what) {
  auto full = mla.forward(ids);
  auto d = decodeBothWays(mla, ids);
  EXPECT_LT(maxAbsDiff(d.absorbed, full), 1e-10) << what;
  EXPECT_LT(maxAbsDiff(d.naive, full), 1e-10) << what;
  EXPECT_EQ(d.absorbedCache.length(), ids.size(1)) << what;
  return d;
}

// A random fp64 GQA model with attention biases (2 KV heads) and its
// conversion at r 2, d_kv 5.
std::pair<std::shared_ptr<CausalLm>, std::shared_ptr<CausalLm>> biasedGqaConverted(SvdMethod svd, std::uint64_t seed) {
  auto base = randomModel(tinyConfig({.kvHeads = 2, .attentionBias = true}), torch::kFloat64, seed);
  auto mla = convertModel(*base, mlaOptions(RopeStrategy::Uniform, 2, 5, svd));
  return {base, mla};
}
}  // namespace

TEST(MlaDecode, AbsorbedDecodeEqualsNaiveAndFullForward) {
  for (SvdMethod svd : {SvdMethod::Joint, SvdMethod::Split}) {
    for (TinyShape s : {TinyShape{.kvHeads = 4}, TinyShape{.kvHeads = 2}, TinyShape{.kvHeads = 2, .modelType = "qwen2"},
                        TinyShape{.kvHeads = 1, .attentionBias = true}}) {
      auto cfg = tinyConfig(s);
      auto base = randomModel(cfg, torch::kFloat64, 12);
      // A truncated latent (d_kv 5): the equality must hold at any rank.
      auto mla = convertModel(*base, mlaOptions(RopeStrategy::Uniform, 2, 5, svd));
      torch::NoGradGuard g;
      auto ids = torch::randint(0, s.vocab, {2, 20}, torch::kInt64);
      const std::string what = (svd == SvdMethod::Split ? "split kv " : "joint kv ") + std::to_string(s.kvHeads);
      auto d = expectBothDecodesMatchFull(*mla, ids, what);
      EXPECT_LT(maxAbsDiff(d.absorbed, d.naive), 1e-10) << what;
    }
  }
}

// Absorbed decoding folds W_up_k into the query projection and W_up_v into
// the output projection once, ahead of the first step. Updating the
// parameters in place (as an optimizer step or a checkpoint load does) must
// rebuild those products: decoding after each update still equals the full
// forward of the updated model.
TEST(MlaDecode, AbsorbedDecodeFollowsInPlaceWeightUpdates) {
  for (SvdMethod svd : {SvdMethod::Joint, SvdMethod::Split}) {
    auto [base, mla] = biasedGqaConverted(svd, 16);
    torch::NoGradGuard g;
    auto ids = torch::randint(0, base->config().vocabSize, {2, 12}, torch::kInt64);
    const std::string what = svd == SvdMethod::Split ? "split" : "joint";
    expectBothDecodesMatchFull(*mla, ids, what + " before");
    for (auto& item : mla->named_parameters()) {
      if (item.key().find("self_attn") != std::string::npos) item.value().mul_(1.25).add_(0.01);
    }
    const auto d = expectBothDecodesMatchFull(*mla, ids, what + " after");
    EXPECT_GT(maxAbsDiff(d.absorbed, base->forward(ids)), 1e-3) << what;  // the update did change the model
  }
}

// The cache buffers start at 64 tokens and double; absorbed attention reads
// them in place as strided prefixes, so decoding across both growth steps
// (64 -> 128 -> 256) must stay exact, with a batch whose rows differ.
TEST(MlaDecode, AbsorbedDecodeStaysExactAcrossCacheGrowth) {
  for (SvdMethod svd : {SvdMethod::Joint, SvdMethod::Split}) {
    auto [base, mla] = biasedGqaConverted(svd, 15);
    torch::NoGradGuard g;
    auto ids = torch::randint(0, base->config().vocabSize, {3, 140}, torch::kInt64);
    auto d = expectBothDecodesMatchFull(*mla, ids, svd == SvdMethod::Split ? "split" : "joint");
    EXPECT_EQ(d.absorbedCache.bytes(), d.naiveCache.bytes());
  }
}

TEST(MlaDecode, FullRopeAbsorbedDecodeEqualsOriginalDecode) {
  auto cfg = tinyConfig({.kvHeads = 2});
  auto base = randomModel(cfg, torch::kFloat64, 13);
  auto mla =
      convertModel(*base, mlaOptions(RopeStrategy::Full, 0, fullRankDkv(cfg, cfg.headDim / 2, SvdMethod::Joint)));
  torch::NoGradGuard g;
  auto ids = torch::randint(0, cfg.vocabSize, {1, 16}, torch::kInt64);
  KvCache a(cfg.numLayers), b(cfg.numLayers);
  EXPECT_LT(maxAbsDiff(decodeIncrementally(*mla, ids, a), decodeIncrementally(*base, ids, b)), 1e-9);
}

// A quantized latent cache (docs/kv_quant.md): the absorbed decode reads the
// codes a block of 512 tokens at a time and must equal the naive path, which
// rebuilds K and V from the same cache dequantized whole (1e-9 of the
// logits' scale in fp64: both read the same values, so any gap is the
// blockwise reading itself), for joint and split latents, with attention biases
// and with QK norms; a prompt of 1030 tokens, a chunk of 40 and single
// tokens, the newest 8 tokens exact, so the codes span three blocks. The cache
// holds the documented bytes, and fewer bits move the logits further.
TEST(MlaDecode, AbsorbedDecodeOverAQuantizedLatentEqualsNaiveOverItsDequantizedCache) {
  ModelConfig qk = tinyConfig({.kvHeads = 2});
  qk.qkNorm = true;
  for (const ModelConfig& cfg : {tinyConfig({.kvHeads = 2, .attentionBias = true}), qk}) {
    for (SvdMethod svd : {SvdMethod::Joint, SvdMethod::Split}) {
      auto base = randomModel(cfg, torch::kFloat64, 31);
      auto mla = convertModel(*base, mlaOptions(RopeStrategy::Uniform, 2, 8, svd));  // latent rows of 16
      torch::NoGradGuard g;
      auto ids = torch::randint(0, cfg.vocabSize, {2, 1075}, torch::kInt64);
      const std::vector<std::int64_t> chunks = {1030, 40};
      KvCache plainCache(cfg.numLayers);
      setMlaDecode(*mla, MlaDecode::Absorbed);
      const auto plain = decodeAfterPrompt(*mla, ids, plainCache, chunks);
      const double scale = plain.abs().max().item<double>();
      double previous = 0;
      for (const int bits : {8, 4, 2}) {
        const KvQuantSettings q{bits, 8, 8, 512};
        const std::string what = std::string(cfg.qkNorm ? "qk norm " : "biased ") +
                                 (svd == SvdMethod::Split ? "split " : "joint ") + kvQuantName(bits);
        KvCache absorbedCache(cfg.numLayers), naiveCache(cfg.numLayers);
        absorbedCache.setQuant(q);
        naiveCache.setQuant(q);
        const auto absorbed = decodeAfterPrompt(*mla, ids, absorbedCache, chunks);
        setMlaDecode(*mla, MlaDecode::Naive);
        const auto naive = decodeAfterPrompt(*mla, ids, naiveCache, chunks);
        setMlaDecode(*mla, MlaDecode::Absorbed);
        EXPECT_LT(maxAbsDiff(absorbed, naive), 1e-9 * scale) << what;
        const double moved = maxAbsDiff(absorbed, plain);
        EXPECT_GT(moved, previous) << what << ": fewer bits, further from the plain cache";
        if (bits == 8) {
          EXPECT_LT(moved, 0.05 * scale) << what;
        }
        previous = moved;
        // Every token fed, for both rows of the batch.
        EXPECT_EQ(absorbedCache.bytes(), kvQuantBudget(mla->config(), q, DType::F64).bytesFor(1075) * 2) << what;
        EXPECT_EQ(naiveCache.bytes(), absorbedCache.bytes()) << what;
      }
    }
  }
}

TEST(MlaDecode, CacheBytesMeasuredFromTensorsEqualTheFormula) {
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    for (SvdMethod svd : {SvdMethod::Joint, SvdMethod::Split}) {
      for (int kvHeads : {4, 2}) {
        auto cfg = tinyConfig({.kvHeads = kvHeads, .layers = 3});
        auto base = randomModel(cfg, dtype, 14);
        const int r = 2, dKv = 6, N = 13;
        auto opts = mlaOptions(RopeStrategy::High, r, dKv, svd);
        auto mla = convertModel(*base, opts);
        torch::NoGradGuard g;
        auto ids = torch::randint(0, cfg.vocabSize, {1, N}, torch::kInt64);
        KvCache cache(cfg.numLayers);
        decodeIncrementally(*mla, ids, cache);
        const std::int64_t latentPerHead = svd == SvdMethod::Joint ? dKv : 2 * dKv;
        const std::int64_t elemSize = dtype == torch::kFloat64 ? 8 : 4;
        const std::int64_t expected = kvHeads * (2 * r + latentPerHead) * N * cfg.numLayers * elemSize;
        EXPECT_EQ(cache.bytes(), expected);
        const DType cacheType = dtype == torch::kFloat64 ? DType::F64 : DType::F32;
        const auto budget = computeKvBudget(cfg, kvSettings(opts), cacheType);
        EXPECT_EQ(cache.bytes(), budget.bytesPerToken * N);
        EXPECT_EQ(currentKvBudget(mla->config(), cacheType).bytesPerToken, budget.bytesPerToken);
        // The latent is one vector per token shared by all heads; the RoPE key is per KV head.
        EXPECT_EQ(cache.layer(0).view(0).sizes(), (std::vector<std::int64_t>{1, kvHeads, N, 2 * r}));
        EXPECT_EQ(cache.layer(0).view(1).sizes(), (std::vector<std::int64_t>{1, 1, N, kvHeads * dKv}));
      }
    }
  }
}

TEST(MlaDecode, SmolLmSavingsMatchThePaper) {
  for (const char* name : {"smollm-135m", "smollm-360m", "smollm-1.7b"}) {
    const auto cfg = builtinArchitecture(name);
    ASSERT_EQ(cfg.headDim, 64) << name;
    for (auto [dKv, saving] : {std::pair{32, -0.6875}, std::pair{16, -0.8125}, std::pair{8, -0.875}}) {
      const auto b = computeKvBudget(cfg, kvSettings(mlaOptions(RopeStrategy::TwoNorm, 4, dKv)), DType::BF16);
      EXPECT_DOUBLE_EQ(b.saving, saving) << name << " d_kv " << dKv;
      EXPECT_EQ(b.perTokenPerLayer, cfg.numKvHeads * (8 + dKv));
    }
  }
}

// Partial RoPE on Llama-3.x (llama3) and yarn models: absorbed decoding over
// the latent cache equals the naive path and the full forward, past the
// model's context too.
TEST(MlaDecode, AbsorbedDecodeIsExactForScaledRope) {
  for (const auto& [name, cfg] : scaledRopeConfigs({.kvHeads = 2, .attentionBias = true})) {
    if (name != "llama3" && name != "yarn") continue;
    auto base = randomModel(cfg, torch::kFloat64, 21);
    for (SvdMethod svd : {SvdMethod::Joint, SvdMethod::Split}) {
      auto mla = convertModel(*base, mlaOptions(RopeStrategy::Uniform, 2, 5, svd));
      torch::NoGradGuard g;
      auto ids = torch::randint(0, 128, {2, 24}, torch::kInt64);
      const std::string what = name + (svd == SvdMethod::Split ? " split" : " joint");
      auto d = expectBothDecodesMatchFull(*mla, ids, what);
      EXPECT_LT(maxAbsDiff(d.absorbed, d.naive), 1e-10) << what;
    }
  }
}

}  // namespace latentlab::test
