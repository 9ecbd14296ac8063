// MHA2MLA conversion of the 2025-26 families' layer options: QK norms (Qwen3)
// kept exact in the latent cache, NoPE layers (SmolLM3) converted to a pure
// latent, partially rotating heads (Phi-3) choosing among their rotating
// pairs. Against the independent partial-RoPE reference in float64: full rank
// reproduces it (logits and loss), absorbed decode equals the naive path and
// the training forward at low rank, and the cache holds the documented bytes.
#include <gtest/gtest.h>

#include <iostream>

#include "convert_test_util.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "model/weights.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

struct Family {
  std::string name;
  ModelConfig cfg;
  int r;  // RoPE pairs kept at low rank
};

// Qwen3: QK norms and an explicit head_dim wider than hidden / heads.
ModelConfig qwen3Config(int kvHeads) {
  ModelConfig c = tinyConfig({.kvHeads = kvHeads});
  c.modelType = "qwen3";
  c.architecture = "Qwen3ForCausalLM";
  c.qkNorm = true;
  c.headDim = 24;
  return c;
}

// SmolLM3: layers 1 and 3 of 4 without RoPE.
ModelConfig smollm3Config(int kvHeads) {
  ModelConfig c = tinyConfig({.kvHeads = kvHeads, .layers = 4});
  c.modelType = "smollm3";
  c.architecture = "SmolLM3ForCausalLM";
  c.nopeLayers = {1, 3};
  c.tieWordEmbeddings = true;
  return c;
}

// Phi-3: 12 of 16 head dims rotate (partial_rotary_factor 0.75), fused projections.
ModelConfig phi3Config(int kvHeads) {
  ModelConfig c = tinyConfig({.kvHeads = kvHeads});
  c.modelType = "phi3";
  c.architecture = "Phi3ForCausalLM";
  c.rotaryDim = 12;
  c.fusedProjections = true;
  return c;
}

// Phi-4-mini's RoPE: longrope past an original context of 8 (attention factor
// sqrt(2) on the 12 rotating dims of 16).
ModelConfig phi4miniConfig(int kvHeads) {
  ModelConfig c = phi3Config(kvHeads);
  c.maxPositionEmbeddings = 64;
  c.ropeScaling.type = "longrope";
  c.ropeScaling.originalMaxPositionEmbeddings = 8;
  c.ropeScaling.factor = 8;
  c.ropeScaling.shortFactor = {1.0, 1.3, 1.7, 2.0, 1.1, 1.5};
  c.ropeScaling.longFactor = {2.0, 3.5, 5.0, 2.5, 6.0, 4.0};
  return c;
}

// Gemma-3: (1 + w) norms (QK norms among them), the sandwich, scaled
// embeddings, GeGLU, softmax scale 1/sqrt(20), layers 0 and 2 windowed to 8
// tokens at their own RoPE base, logits soft-capped.
ModelConfig gemma3Config(int kvHeads) {
  ModelConfig c = tinyConfig({.kvHeads = kvHeads, .layers = 3});
  c.modelType = "gemma3_text";
  c.architecture = "Gemma3ForCausalLM";
  c.headDim = 24;
  c.qkNorm = c.normPlusOne = c.sandwichNorms = c.scaleEmbeddings = c.geluTanh = true;
  c.queryScalar = 20.0;
  c.slidingWindow = 8;
  c.slidingLayers = {0, 2};
  c.ropeTheta = 1e6;
  c.localRopeTheta = 1e4;
  c.finalLogitSoftcap = 30.0;
  c.tieWordEmbeddings = true;
  return c;
}

// A window of 4 tokens, so that the chunks of decodeIncrementally start past it.
ModelConfig gemma3Window4() {
  ModelConfig c = gemma3Config(1);
  c.slidingWindow = 4;
  return c;
}

// Qwen3-MoE: Qwen3's attention, layers 0 and 2 of 3 with 4 experts (top 2).
ModelConfig qwen3MoeConfig(int kvHeads) {
  ModelConfig c = qwen3Config(kvHeads);
  c.numLayers = 3;
  c.modelType = "qwen3_moe";
  c.architecture = "Qwen3MoeForCausalLM";
  c.moe = MoeConfig{.experts = 4, .topK = 2, .intermediate = 16, .normTopK = true, .sparseStep = 1, .denseLayers = {1}};
  return c;
}

std::vector<Family> families() {
  return {{"qwen3-gqa", qwen3Config(2), 4},      {"qwen3-mha", qwen3Config(4), 3},
          {"smollm3-mha", smollm3Config(4), 2},  {"smollm3-gqa", smollm3Config(2), 2},
          {"phi3-gqa", phi3Config(2), 2},        {"phi4mini-longrope", phi4miniConfig(2), 2},
          {"gemma3-gqa", gemma3Config(2), 3},    {"gemma3-mqa-window4", gemma3Window4(), 4},
          {"qwen3moe-gqa", qwen3MoeConfig(2), 4}};
}

// Random weights with QK-norm gains spread over [1, 3], so that the norms
// decide which keys each query attends to.
std::shared_ptr<CausalLm> familyModel(const ModelConfig& cfg, torch::ScalarType dtype, std::uint64_t seed) {
  auto m = randomModel(cfg, dtype, seed);
  torch::NoGradGuard g;
  for (auto& p : m->named_parameters()) {
    if (p.key().find("q_norm") != std::string::npos || p.key().find("k_norm") != std::string::npos) {
      p.value().uniform_(1.0, 3.0);
    }
  }
  return m;
}

// The full-rank d_kv of the RoPE layers: rank [W_k_nope; W_v] / n_kv.
int ropeRank(const ModelConfig& c, int r) {
  return std::min(c.numKvHeads * (2 * c.headDim - 2 * r), c.hiddenSize);
}
int exactDkv(const ModelConfig& c, int r) {
  return ropeRank(c, r) / c.numKvHeads;
}

// Whether that latent factorises every layer exactly: n_kv divides the RoPE
// layers' rank, and a NoPE layer (rank min(2 n_kv d_h, d)) needs no more.
bool exactEverywhere(const ModelConfig& c, int r) {
  const int lat = exactDkv(c, r) * c.numKvHeads;
  const int nopeRank = std::min(2 * c.numKvHeads * c.headDim, c.hiddenSize);
  return lat == ropeRank(c, r) && (c.nopeLayers.empty() || lat >= nopeRank);
}

torch::Tensor windows(int vocab, std::int64_t batch, std::int64_t len, std::uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, vocab, {batch, len + 1}, torch::kInt64);
}

}  // namespace

TEST(Families, FullRankPartialRopeReproducesTheReferenceLogitsAndLoss) {
  double worstLogit = 0.0, worstLoss = 0.0;
  for (const auto& f : families()) {
    for (RopeStrategy rope : {RopeStrategy::High, RopeStrategy::Low, RopeStrategy::TwoNorm, RopeStrategy::Full}) {
      const int r = rope == RopeStrategy::Full ? f.cfg.ropeDim() / 2 : f.r;
      if (!exactEverywhere(f.cfg, r)) continue;  // a GQA NoPE layer has more rank than the latent holds
      auto base = familyModel(f.cfg, torch::kFloat64, 3);
      auto calib = randomBatches(128, 2, 2, 12, 7);
      ConversionStats stats;
      NullProgress progress;
      CancelToken cancel;
      auto mla = convertModel(*base, mlaOptions(rope, r, exactDkv(f.cfg, r)), calib, progress, cancel, &stats);
      auto ref = partialRopeReference(*base, stats.pairs);
      torch::NoGradGuard g;
      auto w = windows(128, 2, 24, 5);
      auto ids = w.narrow(1, 0, 24);
      auto expected = ref->forward(ids);
      const double diff = maxAbsDiff(mla->forward(ids), expected);
      EXPECT_LT(diff, 1e-9) << f.name << " " << ropeStrategyName(rope);
      if (rope != RopeStrategy::Full) {  // not vacuous: dropping RoPE from most pairs changes the model
        EXPECT_GT(maxAbsDiff(base->forward(ids), expected), 1e-3) << f.name;
      } else {  // every rotating pair kept: the original model
        EXPECT_LT(maxAbsDiff(base->forward(ids), expected), 1e-9) << f.name;
      }
      worstLogit = std::max(worstLogit, diff);
      // The loss in float32, as a fine-tune starts from it.
      mla->to(torch::kFloat32);
      ref->to(torch::kFloat32);
      const double loss =
          std::abs(languageModelLoss(*mla, w).item<double>() - languageModelLoss(*ref, w).item<double>());
      EXPECT_LT(loss, 1e-4) << f.name << " " << ropeStrategyName(rope);
      worstLoss = std::max(worstLoss, loss);
    }
  }
  std::cout << "[ families ] full rank vs partial-RoPE reference: max |logit diff| (fp64) " << worstLogit
            << ", max |loss diff| (fp32) " << worstLoss << "\n";
}

TEST(Families, AbsorbedDecodeEqualsNaiveDecodeAndTheTrainingForwardAtLowRank) {
  for (const auto& f : families()) {
    auto base = familyModel(f.cfg, torch::kFloat64, 4);
    auto mla = convertModel(*base, mlaOptions(RopeStrategy::High, f.r, 3));
    torch::NoGradGuard g;
    torch::manual_seed(9);
    auto ids = torch::randint(0, 128, {2, 20}, torch::kInt64);
    auto full = mla->forward(ids);
    KvCache absorbedCache(f.cfg.numLayers), naiveCache(f.cfg.numLayers);
    setMlaDecode(*mla, MlaDecode::Absorbed);
    auto absorbed = decodeIncrementally(*mla, ids, absorbedCache);
    setMlaDecode(*mla, MlaDecode::Naive);
    auto naive = decodeIncrementally(*mla, ids, naiveCache);
    EXPECT_LT(maxAbsDiff(absorbed, naive), 1e-10) << f.name;
    if (f.cfg.ropeScaling.type == "longrope") {
      // longrope rotates the first 8 positions with its short factors when they
      // are cached alone, the whole forward with its long ones: the chunk that
      // crosses the original context is compared with the forward of its prefix.
      auto prefix = mla->forward(ids.narrow(1, 0, 11));
      EXPECT_LT(maxAbsDiff(absorbed.narrow(1, 0, 7), mla->forward(ids.narrow(1, 0, 7))), 1e-10) << f.name;
      EXPECT_GT(maxAbsDiff(absorbed.narrow(1, 7, 4), prefix.narrow(1, 7, 4)), 1e-6) << f.name;
    } else {
      EXPECT_LT(maxAbsDiff(absorbed, full), 1e-10) << f.name;
    }
    EXPECT_GT(maxAbsDiff(full, base->forward(ids)), 1e-3) << f.name << ": low rank should change the model";
    // The cache holds exactly the documented elements per token (float64 here).
    KvSettings kv;
    kv.method = KvMethod::Mha2Mla;
    kv.ropePairs = f.r;
    kv.dKv = 3;
    const KvBudget b = computeKvBudget(f.cfg, kv, DType::F64);
    EXPECT_EQ(absorbedCache.bytes(), b.bytesPerToken * 2 * 20) << f.name;
    EXPECT_EQ(b.keyScalePerTokenPerLayer, f.cfg.qkNorm ? f.cfg.numKvHeads : 0);
    EXPECT_EQ(b.nopeLayers, static_cast<int>(f.cfg.nopeLayers.size()));
  }
}

TEST(Families, CacheFormulaPerLayerKind) {
  // Qwen3-0.6B's attention: 8 KV heads of 128, 28 layers; r = 8, d_kv = 16.
  ModelConfig q = qwen3Config(2);
  q.numLayers = 28;
  q.numHeads = 16;
  q.numKvHeads = 8;
  q.headDim = 128;
  q.hiddenSize = 1024;
  KvSettings kv;
  kv.method = KvMethod::Mha2Mla;
  kv.ropePairs = 8;
  kv.dKv = 16;
  KvBudget b = computeKvBudget(q, kv, DType::BF16);
  EXPECT_EQ(b.originalPerTokenPerLayer, 2 * 8 * 128);
  EXPECT_EQ(b.perTokenPerLayer, 8 * (16 + 16 + 1));  // RoPE key, latent, one key-norm scale per KV head
  EXPECT_EQ(b.bytesPerToken, 28 * 8 * 33 * 2);
  // SmolLM3-3B: 36 layers, every 4th without RoPE, 4 KV heads of 128.
  ModelConfig s = smollm3Config(4);
  s.numLayers = 36;
  s.numHeads = 16;
  s.headDim = 128;
  s.hiddenSize = 2048;
  s.nopeLayers.clear();
  for (int l = 3; l < 36; l += 4) s.nopeLayers.push_back(l);
  b = computeKvBudget(s, kv, DType::BF16);
  EXPECT_EQ(b.nopeLayers, 9);
  EXPECT_EQ(b.perTokenPerLayer, 4 * (16 + 16));
  EXPECT_EQ(b.nopePerTokenPerLayer, 4 * 16);
  EXPECT_EQ(b.perToken, 27 * 4 * 32 + 9 * 4 * 16);
  EXPECT_NEAR(b.saving, static_cast<double>(27 * 128 + 9 * 64 - 36 * 1024) / (36 * 1024), 1e-12);
}

TEST(Families, TwoNormOnAQkNormModelMeasuresWhatRopeTurns) {
  // The raw projections favour pair 5, the norms' gains pair 2: after the
  // norm (what RoPE rotates) pair 2 dominates, so S_2-norm keeps it.
  ModelConfig c = qwen3Config(2);
  c.numLayers = 1;
  auto base = familyModel(c, torch::kFloat64, 6);
  const int half = c.headDim / 2;
  {
    torch::NoGradGuard g;
    auto* a = dynamic_cast<LlamaAttention*>(base->layer(0)->self_attn.get());
    for (auto* norm : {&a->q_norm, &a->k_norm}) {
      (*norm)->weight.fill_(0.01);
      (*norm)->weight.narrow(0, 2, 1).fill_(10.0);
      (*norm)->weight.narrow(0, 2 + half, 1).fill_(10.0);
    }
    for (auto* proj : {&a->q_proj, &a->k_proj}) {
      auto w = (*proj)->weight.view({-1, c.headDim, c.hiddenSize});
      w.select(1, 5).mul_(50.0);
      w.select(1, 5 + half).mul_(50.0);
    }
  }
  ConversionStats stats;
  NullProgress progress;
  CancelToken cancel;
  convertModel(*base, mlaOptions(RopeStrategy::TwoNorm, 1, 4), randomBatches(128, 2, 2, 16, 3), progress, cancel,
               &stats);
  for (const auto& head : stats.pairs[0]) EXPECT_EQ(head, std::vector<int>{2});
}

TEST(Families, ConvertedModelsSaveAndReloadWithTheirLayerOptions) {
  for (const auto& f : families()) {
    auto base = familyModel(f.cfg, torch::kFloat32, 8);
    auto mla = convertModel(*base, mlaOptions(RopeStrategy::Uniform, f.r == 3 ? 4 : f.r, 4));
    const fs::path dir = scratchDir("families-" + f.name) / "mla";
    saveModel(*mla, dir, DType::F32);
    auto back = loadModel(dir, torch::kCPU, torch::kFloat32);
    EXPECT_EQ(back->config().qkNorm, f.cfg.qkNorm) << f.name;
    EXPECT_EQ(back->config().nopeLayers, f.cfg.nopeLayers) << f.name;
    EXPECT_EQ(back->config().rotaryDim, f.cfg.rotaryDim) << f.name;
    torch::NoGradGuard g;
    auto ids = torch::randint(0, 128, {1, 16}, torch::kInt64);
    EXPECT_LT(maxAbsDiff(back->forward(ids), mla->forward(ids)), 1e-5) << f.name;
    // A NoPE layer has no RoPE key in the checkpoint.
    if (!f.cfg.nopeLayers.empty()) {
      HfCheckpoint ckpt(dir);
      EXPECT_FALSE(ckpt.find("model.layers.1.self_attn.k_rope_proj.weight").has_value());
      EXPECT_TRUE(ckpt.find("model.layers.0.self_attn.k_rope_proj.weight").has_value());
    }
  }
}

// A converted Qwen3-MoE fine-tunes: every expert a token chose, the router
// and the latent receive gradients, and AdamW steps lower the loss on a batch.
TEST(Families, ConvertedMixtureOfExpertsFineTunes) {
  const ModelConfig cfg = qwen3MoeConfig(2);
  auto base = familyModel(cfg, torch::kFloat32, 12);
  auto mla = convertModel(*base, mlaOptions(RopeStrategy::High, 2, 4));
  mla->train();
  torch::optim::AdamW opt(mla->parameters(), torch::optim::AdamWOptions(3e-3));
  auto batch = windows(128, 4, 16, 13);
  double first = 0, last = 0;
  for (int step = 0; step < 12; ++step) {
    opt.zero_grad();
    auto loss = languageModelLoss(*mla, batch);
    loss.backward();
    if (step == 0) {
      first = loss.item<double>();
      for (const auto& p : mla->named_parameters()) {
        if (p.key().find("mlp.gate.weight") != std::string::npos || p.key().find("kv_down") != std::string::npos) {
          EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
        }
      }
    }
    opt.step();
    last = loss.item<double>();
  }
  EXPECT_LT(last, first - 0.1) << "loss " << first << " -> " << last;
}

// Calibration sees what the model's own forward feeds each attention layer
// (Gemma's scaled embeddings, its windowed layers' own RoPE base): the inputs
// recorded by attention layers inside CausalLm::forward equal those the
// calibration pass visits.
namespace {
class RecordingAttention : public LlamaAttention {
 public:
  RecordingAttention(const ModelConfig& cfg, int layer, std::vector<torch::Tensor>* seen)
      : LlamaAttention(cfg, layer), m_seen(seen) {}
  torch::Tensor forward(const torch::Tensor& x, AttentionContext& ctx) override {
    m_seen->push_back(x.clone());
    return LlamaAttention::forward(x, ctx);
  }

 private:
  std::vector<torch::Tensor>* m_seen;
};
}  // namespace

TEST(Families, CalibrationSeesTheInputsOfTheModelsOwnForward) {
  for (const ModelConfig& cfg : {gemma3Config(2), qwen3Config(2), smollm3Config(2)}) {
    auto base = familyModel(cfg, torch::kFloat64, 14);
    std::vector<torch::Tensor> seen;
    CausalLm recorder(
        cfg, [&](const ModelConfig& c, int layer) { return std::make_shared<RecordingAttention>(c, layer, &seen); });
    recorder.to(torch::kFloat64);
    {
      torch::NoGradGuard g;
      auto src = base->named_parameters(true);
      for (auto& p : recorder.named_parameters(true)) p.value().copy_(src[p.key()]);
    }
    auto batches = randomBatches(128, 1, 2, 20, 15);
    torch::NoGradGuard g;
    recorder.forward(batches[0]);
    NullProgress progress;
    CancelToken cancel;
    std::vector<torch::Tensor> visited(static_cast<std::size_t>(cfg.numLayers));
    forEachAttentionInput(
        *base, batches, progress, cancel, "test",
        [&](int l, LlamaAttention&, const torch::Tensor& h) { visited[static_cast<std::size_t>(l)] = h; });
    ASSERT_EQ(seen.size(), visited.size());
    for (std::size_t l = 0; l < seen.size(); ++l) {
      EXPECT_LT(maxAbsDiff(seen[l], visited[l]), 1e-12) << cfg.modelType << " layer " << l;
    }
  }
}

// In bf16 a converted QK-norm model's absorbed decode stays with its own
// training forward (the key scales and Gemma's (1 + w) gains rounded once).
TEST(Families, Bf16AbsorbedDecodeOfQkNormConversionsStaysWithTheForward) {
  for (const ModelConfig& cfg : {qwen3Config(2), gemma3Config(2)}) {
    auto base = familyModel(cfg, torch::kFloat32, 16);
    auto mla = convertModel(*base, mlaOptions(RopeStrategy::High, 3, 4));
    mla->to(torch::kBFloat16);
    torch::NoGradGuard g;
    torch::manual_seed(17);
    auto ids = torch::randint(0, 128, {1, 20}, torch::kInt64);
    auto full = mla->forward(ids).to(torch::kFloat32);
    KvCache cache(cfg.numLayers);
    auto absorbed = decodeIncrementally(*mla, ids, cache).to(torch::kFloat32);
    const double scale = full.abs().max().item<double>();
    EXPECT_LT(maxAbsDiff(absorbed, full), 0.05 * std::max(1.0, scale)) << cfg.modelType << " max |logit| " << scale;
  }
}

TEST(Families, DeepSeekTargetRefusesLayerOptionsItCannotHold) {
  KvSettings kv;
  kv.method = KvMethod::DeepSeek;
  kv.dKv = 4;
  kv.ropePairs = 2;
  for (const auto& [cfg, word] :
       std::vector<std::pair<ModelConfig, std::string>>{{qwen3Config(2), "key norm"},
                                                        {smollm3Config(2), "without RoPE"},
                                                        {phi3Config(2), "partial_rotary_factor"}}) {
    const auto why = checkKvSettings(cfg, kv);
    ASSERT_TRUE(why.has_value()) << cfg.modelType;
    EXPECT_NE(why->find(word), std::string::npos) << *why;
    EXPECT_NE(why->find("mha2mla"), std::string::npos) << *why;
  }
}

}  // namespace latentlab::test
