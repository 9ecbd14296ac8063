// The forward pass matches Hugging Face transformers on the same files, for
// HF-written and LatentLab-written checkpoints (MHA/GQA, tied/untied, biases,
// positions past 1000).
#include <gtest/gtest.h>

#include <iostream>

#include "convert/converter.h"
#include "model/weights.h"
#include "model_test_util.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

struct Variant {
  std::string name;
  std::vector<std::string> makeArgs;  // for hf_llama.py make
  std::int64_t batch = 2, seqLen = 1100;
};

torch::Tensor hfLogitsSized(const fs::path& dir, const torch::Tensor& ids, int vocab, std::string* log) {
  const fs::path idsFile = dir.parent_path() / (dir.filename().string() + ".ids");
  const fs::path outFile = dir.parent_path() / (dir.filename().string() + ".logits");
  writeRaw(idsFile, ids.to(torch::kInt64));
  const std::string shape = std::to_string(ids.size(0)) + "," + std::to_string(ids.size(1));
  int rc =
      runPython("hf_llama.py", {"logits", dir.string(), idsFile.string(), outFile.string(), "--shape", shape}, log);
  if (rc != 0) return {};
  return readRawFloat(outFile, {ids.size(0), ids.size(1), vocab});
}

class HfParity : public ::testing::TestWithParam<Variant> {};

}  // namespace

TEST_P(HfParity, HfWrittenCheckpointGivesHfLogits) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed in " << LATENTLAB_PYTHON;
  const auto& v = GetParam();
  fs::path dir = scratchDir("parity-" + v.name) / "model";
  std::vector<std::string> args = {"make", dir.string()};
  args.insert(args.end(), v.makeArgs.begin(), v.makeArgs.end());
  std::string log;
  ASSERT_EQ(runPython("hf_llama.py", args, &log), 0) << log;

  auto model = loadModel(dir, torch::kCPU, torch::kFloat32);
  const int vocab = model->config().vocabSize;
  // Positions past 1000 exercise the RoPE tables (past 2000 for the scaled
  // variants, whose contexts are shorter than the sequence).
  torch::manual_seed(7);
  auto ids = torch::randint(0, vocab, {v.batch, v.seqLen}, torch::kInt64);
  torch::NoGradGuard g;
  auto ours = model->forward(ids);
  auto theirs = hfLogitsSized(dir, ids, vocab, &log);
  ASSERT_TRUE(theirs.defined()) << log;
  // Both against this model in fp64: two fp32 evaluations of one model differ
  // by up to the sum of their rounding errors, and on some of these random
  // models (the Gemma-3 ones, whose logits pass through four norms a layer)
  // transformers' own fp32 error exceeds 1e-4. So the bound is 1e-4 or twice
  // transformers' error, whichever is larger, and ours must stay as close to
  // the fp64 model.
  const auto exact = loadModel(dir, torch::kCPU, torch::kFloat64)->forward(ids);
  const double oursVsExact = maxAbsDiff(ours, exact), theirsVsExact = maxAbsDiff(theirs, exact);
  const double bound = std::max(1e-4, 2 * theirsVsExact);
  EXPECT_LT(maxAbsDiff(ours, theirs), bound)
      << v.name << ": max |logit| " << theirs.abs().max().item<double>() << ", ours vs fp64 " << oursVsExact
      << ", transformers vs fp64 " << theirsVsExact;
  EXPECT_LT(oursVsExact, bound) << v.name << ": transformers vs fp64 " << theirsVsExact;
  // The late positions alone, so an error there cannot hide in the average.
  const std::int64_t late = v.seqLen - 100;
  EXPECT_LT(maxAbsDiff(ours.narrow(1, late, 100), theirs.narrow(1, late, 100)), bound);
  std::cout << "[ parity ] " << v.name << ": max |logit diff| vs transformers " << maxAbsDiff(ours, theirs)
            << " (ours vs fp64 " << oursVsExact << ", transformers vs fp64 " << theirsVsExact << ") over " << v.batch
            << "x" << v.seqLen << " tokens (" << model->config().familyDescription() << ")\n";
  // MHA2MLA at full rank with every RoPE pair kept is the same model: in fp64
  // its logits equal the original's (so transformers' as above) for every
  // family and RoPE variant.
  // (Exact where the latent holds the rank of every layer's [W_k_nope; W_v]:
  // not so in a NoPE layer or past a partially rotating head's rotating dims
  // at these sizes, which test_convert's Families suite checks instead.)
  const ModelConfig& c = model->config();
  ConversionOptions full;
  full.rope = RopeStrategy::Full;
  const int ropeRank = std::min(c.numKvHeads * (2 * c.headDim - c.ropeDim()), c.hiddenSize);
  const int nopeRank = c.nopeLayers.empty() ? 0 : std::min(2 * c.numKvHeads * c.headDim, c.hiddenSize);
  full.dKv = ropeRank / c.numKvHeads;
  if (full.dKv * c.numKvHeads >= std::max(ropeRank, nopeRank)) {
    auto m64 = loadModel(dir, torch::kCPU, torch::kFloat64);
    auto mla = convertModel(*m64, full);
    const auto convertedLogits = mla->forward(ids);
    EXPECT_LT(maxAbsDiff(convertedLogits, m64->forward(ids)), 1e-8) << v.name << ": converted at full rank (fp64)";
    const double converted = maxAbsDiff(convertedLogits, theirs);
    std::cout << "[ parity ] " << v.name << ": converted (full RoPE, full rank d_kv " << full.dKv
              << ", fp64) vs transformers (fp32) " << converted << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, HfParity,
    ::testing::Values(
        Variant{"mha_untied", {"--heads", "4", "--kv-heads", "4"}},
        Variant{"gqa_untied", {"--heads", "4", "--kv-heads", "2"}},
        Variant{"gqa_tied", {"--heads", "4", "--kv-heads", "2", "--tied"}},
        Variant{"mha_tied_biases", {"--heads", "4", "--kv-heads", "4", "--tied", "--attention-bias", "--mlp-bias"}},
        Variant{"qwen2_gqa_biases", {"--type", "qwen2", "--heads", "4", "--kv-heads", "1"}},
        Variant{"gqa_theta_head_dim", {"--heads", "2", "--kv-heads", "1", "--head-dim", "24", "--theta", "500000"}},
        // The families the papers convert, with each RoPE variant they ship.
        Variant{"llama32_llama3_tied_hd64",
                {"--hidden", "128", "--heads", "2", "--kv-heads", "1", "--tied", "--theta", "500000", "--rope-type",
                 "llama3", "--rope-factor", "32", "--original-max", "256", "--max-pos", "4096"},
                1,
                2100},
        Variant{"llama31_llama3_untied",
                {"--heads", "4", "--kv-heads", "2", "--theta", "500000", "--rope-type", "llama3", "--rope-factor", "8",
                 "--low-freq-factor", "1", "--high-freq-factor", "4", "--original-max", "512", "--max-pos", "4096"},
                1,
                2100},
        Variant{"linear_scaling", {"--rope-type", "linear", "--rope-factor", "4", "--max-pos", "1024"}, 1, 2100},
        Variant{"dynamic_ntk", {"--rope-type", "dynamic", "--rope-factor", "2", "--max-pos", "1024"}, 1, 2100},
        Variant{"yarn",
                {"--rope-type", "yarn", "--rope-factor", "4", "--original-max", "512", "--max-pos", "2048"},
                1,
                2100},
        Variant{"yarn_attention_factor",
                {"--rope-type", "yarn", "--rope-factor", "8", "--original-max", "256", "--attention-factor", "1.3",
                 "--beta-fast", "16", "--max-pos", "2048"},
                1,
                2100},
        Variant{"mistral_gqa_no_window",
                {"--type", "mistral", "--heads", "4", "--kv-heads", "1", "--theta", "1000000"}},
        Variant{"qwen25_biases_tied",
                {"--type", "qwen2", "--heads", "4", "--kv-heads", "2", "--tied", "--theta", "1000000"}},
        Variant{"llama2_mha", {"--heads", "4", "--kv-heads", "4"}},
        // The 2025-26 families: QK norms with large gains (peaky attention) and an
        // explicit head_dim (Qwen3), NoPE layers (SmolLM3), partial rotary with
        // fused projections and longrope in both regimes (Phi-3 / Phi-4-mini).
        Variant{"qwen3_gqa_qk_norm_head_dim",
                {"--type", "qwen3", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--qk-gain", "1.5,3",
                 "--tied", "--theta", "1000000"}},
        Variant{"qwen3_mha_qk_norm", {"--type", "qwen3", "--heads", "4", "--kv-heads", "4", "--qk-gain", "1.5,3"}},
        Variant{"smollm3_nope_layers",
                {"--type", "smollm3", "--layers", "4", "--no-rope-layers", "1,0,1,0", "--theta", "2000000", "--tied"}},
        Variant{"phi3_partial_rotary", {"--type", "phi3", "--partial-rotary", "0.75"}},
        Variant{"phi4mini_longrope_past_original",
                {"--type", "phi3", "--partial-rotary", "0.5", "--rope-type", "longrope", "--original-max", "512",
                 "--max-pos", "4096", "--tied"},
                1,
                2100},
        // Windows: Mistral's on every layer, Gemma-3's on its sliding layers (with
        // their own RoPE base), sequences well past the window.
        Variant{"mistral_sliding_window", {"--type", "mistral", "--heads", "4", "--kv-heads", "2", "--window", "100"}},
        Variant{"gemma3_windows_qk_norm_softcap",
                {"--type", "gemma3", "--layers", "3", "--layer-types", "s,f,s", "--window", "64", "--head-dim", "24",
                 "--query-scalar", "20", "--qk-gain", "0.5,2", "--tied", "--theta", "1000000", "--softcap", "30"}},
        Variant{"gemma3_mqa_linear_global",
                {"--type", "gemma3", "--layers", "4", "--heads", "4", "--kv-heads", "1", "--layer-types", "s,s,s,f",
                 "--window", "128", "--tied", "--theta", "1000000", "--rope-type", "linear", "--rope-factor", "8"}},
        // Qwen3-MoE: experts per token renormalised or not, a dense layer between
        // sparse ones, every other layer sparse, and the experts as 3-D tensors.
        Variant{"qwen3_moe_norm_topk_dense_layer",
                {"--type", "qwen3_moe", "--layers", "3", "--mlp-only-layers", "1", "--norm-topk", "--experts", "6",
                 "--top-k", "2", "--qk-gain", "1.5,3"}},
        Variant{"qwen3_moe_sparse_step_fused_experts",
                {"--type", "qwen3_moe", "--layers", "4", "--sparse-step", "2", "--experts", "4", "--top-k", "3",
                 "--fused-experts"}},
        Variant{"phi3_longrope_within_original",
                {"--type", "phi3", "--rope-type", "longrope", "--original-max", "2048", "--max-pos", "8192"}}),
    [](const auto& info) { return info.param.name; });

TEST(HfParity, LatentLabWrittenCheckpointLoadsInTransformers) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed";
  for (bool tied : {false, true}) {
    TinyShape s;
    s.tied = tied;
    s.attentionBias = !tied;
    auto model = randomModel(tinyConfig(s), torch::kFloat32, 3);
    fs::path dir = scratchDir(tied ? "ours-tied" : "ours-untied") / "model";
    saveModel(*model, dir, DType::F32);
    torch::manual_seed(1);
    auto ids = torch::randint(0, s.vocab, {1, 64}, torch::kInt64);
    torch::NoGradGuard g;
    std::string log;
    auto theirs = hfLogitsSized(dir, ids, s.vocab, &log);
    ASSERT_TRUE(theirs.defined()) << log;
    EXPECT_LT(maxAbsDiff(model->forward(ids), theirs), 1e-4);
  }
}

// The families LatentLab saves (a fine-tune of a Qwen3, SmolLM3, Phi-3,
// Gemma-3 or Qwen3-MoE model) load in transformers as the family's own class with the same
// logits: QK norms, the NoPE layer list, Phi-3's fused tensors and its
// longrope, Gemma-3's norms, windows and RoPE per layer type, Qwen3-MoE's experts.
TEST(HfParity, LatentLabWrittenFamilyCheckpointsLoadInTransformers) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed";
  auto family = [](const std::string& type, const std::string& arch) {
    ModelConfig c = tinyConfig({.kvHeads = 2, .layers = 3});
    c.modelType = type;
    c.architecture = arch;
    c.maxPositionEmbeddings = 256;
    return c;
  };
  ModelConfig qwen3 = family("qwen3", "Qwen3ForCausalLM");
  qwen3.qkNorm = true;
  qwen3.headDim = 24;
  ModelConfig smollm3 = family("smollm3", "SmolLM3ForCausalLM");
  smollm3.nopeLayers = {1};
  smollm3.tieWordEmbeddings = true;
  ModelConfig phi3 = family("phi3", "Phi3ForCausalLM");
  phi3.fusedProjections = true;
  phi3.rotaryDim = 8;
  phi3.ropeScaling.type = "longrope";
  phi3.ropeScaling.originalMaxPositionEmbeddings = 32;
  phi3.ropeScaling.factor = 8;
  phi3.ropeScaling.shortFactor = {1.0, 1.5, 2.0, 1.2};
  phi3.ropeScaling.longFactor = {3.0, 4.5, 2.5, 6.0};
  ModelConfig qwen3moe = family("qwen3_moe", "Qwen3MoeForCausalLM");
  qwen3moe.qkNorm = true;
  qwen3moe.moe =
      MoeConfig{.experts = 4, .topK = 2, .intermediate = 24, .normTopK = true, .sparseStep = 1, .denseLayers = {1}};
  ModelConfig gemma3 = family("gemma3_text", "Gemma3ForCausalLM");
  gemma3.headDim = 24;
  gemma3.qkNorm = gemma3.normPlusOne = gemma3.sandwichNorms = gemma3.scaleEmbeddings = gemma3.geluTanh = true;
  gemma3.queryScalar = 20.0;
  gemma3.slidingWindow = 16;
  gemma3.slidingLayers = {0, 2};
  gemma3.ropeTheta = 1e6;
  gemma3.localRopeTheta = 1e4;
  gemma3.tieWordEmbeddings = true;
  gemma3.bosTokenId = 2;
  gemma3.eosTokenId = 1;
  gemma3.padTokenId = 0;
  for (const ModelConfig& cfg : {qwen3, smollm3, phi3, gemma3, qwen3moe}) {
    auto model = randomModel(cfg, torch::kFloat32, 5);
    fs::path dir = scratchDir("ours-" + cfg.modelType) / "model";
    saveModel(*model, dir, DType::F32);
    torch::manual_seed(3);
    auto ids = torch::randint(0, 128, {1, 64}, torch::kInt64);  // past Phi-3's original context of 32
    torch::NoGradGuard g;
    std::string log;
    const fs::path idsFile = dir.parent_path() / "ids", outFile = dir.parent_path() / "logits";
    writeRaw(idsFile, ids);
    ASSERT_EQ(runPython("hf_llama.py",
                        {"logits", dir.string(), idsFile.string(), outFile.string(), "--shape", "1,64",
                         "--expect-class", cfg.architecture},
                        &log),
              0)
        << log;
    auto theirs = readRawFloat(outFile, {1, 64, 128});
    ASSERT_TRUE(theirs.defined());
    EXPECT_LT(maxAbsDiff(model->forward(ids), theirs), 1e-4) << cfg.modelType;
    const ModelConfig back = loadModel(dir, torch::kCPU, torch::kFloat32)->config();
    EXPECT_EQ(back.familyDescription(), cfg.familyDescription()) << cfg.modelType;
  }
}

// A model with scaled RoPE that LatentLab saves (a fine-tune of a Llama-3.x
// or a yarn model) keeps its scaling: transformers reads rope_parameters back
// and gives the same logits.
TEST(HfParity, LatentLabWrittenScaledRopeLoadsInTransformers) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed";
  std::vector<RopeScaling> variants(2);
  variants[0].type = "llama3";
  variants[0].factor = 8;
  variants[0].originalMaxPositionEmbeddings = 32;
  variants[1].type = "yarn";
  variants[1].factor = 4;
  variants[1].originalMaxPositionEmbeddings = 32;
  variants[1].attentionFactor = 1.2;
  for (const RopeScaling& scaling : variants) {
    TinyShape s;
    ModelConfig cfg = tinyConfig(s);
    cfg.ropeScaling = scaling;
    cfg.maxPositionEmbeddings = 128;
    auto model = randomModel(cfg, torch::kFloat32, 4);
    fs::path dir = scratchDir("ours-" + scaling.type) / "model";
    saveModel(*model, dir, DType::F32);
    torch::manual_seed(2);
    auto ids = torch::randint(0, s.vocab, {1, 200}, torch::kInt64);
    torch::NoGradGuard g;
    std::string log;
    auto theirs = hfLogitsSized(dir, ids, s.vocab, &log);
    ASSERT_TRUE(theirs.defined()) << log;
    EXPECT_LT(maxAbsDiff(model->forward(ids), theirs), 1e-4) << scaling.type;
    EXPECT_EQ(loadModel(dir, torch::kCPU, torch::kFloat32)->config().ropeScaling.describe(), scaling.describe());
  }
}

}  // namespace latentlab::test
