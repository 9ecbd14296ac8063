// The DeepSeek-target conversion (docs/conversion.md), activation-aware
// factorisation (docs/conversion.md) and the DeepSeek-V3 export (docs/conversion.md, "Export"), checked
// against their definitions and against transformers' DeepseekV3ForCausalLM.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <tuple>

#include "../model/model_test_util.h"
#include "convert/calibration_stats.h"
#include "convert/converter.h"
#include "convert/deepseek_convert.h"
#include "convert/low_rank.h"
#include "latentlab/convert.h"
#include "latentlab/error.h"
#include "latentlab/generate.h"
#include "model/latent_attention.h"
#include "model/weights.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

// Real text as byte-level token ids: the GPL from base-files.
std::vector<torch::Tensor> textBatches(int vocab, int sequences, int seqLen) {
  std::ifstream in("/usr/share/common-licenses/GPL-3", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<torch::Tensor> out;
  std::size_t at = 0;
  for (int s = 0; s < sequences; ++s) {
    std::vector<std::int64_t> ids;
    for (int t = 0; t < seqLen; ++t) ids.push_back(static_cast<unsigned char>(text.at(at++)) % vocab);
    out.push_back(torch::tensor(ids, torch::kInt64).view({1, seqLen}));
  }
  return out;
}

LayerInputStats statsFor(CausalLm& model, int sequences = 8, int seqLen = 64) {
  NullProgress progress;
  CancelToken cancel;
  return attentionInputStats(model, textBatches(model.config().vocabSize, sequences, seqLen), progress, cancel);
}

std::shared_ptr<CausalLm> toDeepSeek(CausalLm& base, const DeepSeekOptions& o, const LayerInputStats& stats,
                                     std::vector<DeepSeekLayerStats>* layerStats = nullptr) {
  NullProgress progress;
  CancelToken cancel;
  return convertToDeepSeek(base, o, stats, progress, cancel, layerStats);
}

torch::Tensor testIds(int vocab, std::int64_t batch, std::int64_t len, std::uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, vocab, {batch, len}, torch::kInt64);
}

// transformers' logits for `dir` (loaded strictly as DeepseekV3ForCausalLM), optionally mutated.
torch::Tensor hfDeepSeekLogits(const fs::path& dir, const torch::Tensor& ids, int vocab, const std::string& mutate,
                               std::string* log) {
  const fs::path idsFile = dir.parent_path() / (dir.filename().string() + ".ids");
  const fs::path outFile = dir.parent_path() / (dir.filename().string() + mutate + ".logits");
  writeRaw(idsFile, ids);
  std::vector<std::string> args = {"logits",         dir.string(),
                                   idsFile.string(), outFile.string(),
                                   "--shape",        std::to_string(ids.size(0)) + "," + std::to_string(ids.size(1)),
                                   "--expect-class", "DeepseekV3ForCausalLM"};
  if (!mutate.empty()) {
    args.push_back("--mutate");
    args.push_back(mutate);
  }
  if (runPython("hf_llama.py", args, log) != 0) return {};
  return readRawFloat(outFile, {ids.size(0), ids.size(1), vocab});
}

ExportReport exportTo(const fs::path& model, const fs::path& out) {
  ExportSpec s;
  s.modelDir = model;
  s.outDir = out;
  s.force = true;
  NullProgress progress;
  CancelToken cancel;
  return exportModel(s, progress, cancel);
}

}  // namespace

TEST(DeepSeekTarget, FullWidthRoRopeAtFullRankReproducesTheOriginalInFp64) {
  // GQA and MHA: d_R = n_kv * d_h keeps every rotated component, the latent
  // keeps the full rank of [K_res; V], and without the norm the model is the same.
  for (int kv : {2, 4}) {
    const ModelConfig cfg = tinyConfig({.kvHeads = kv, .vocab = 256});
    auto base = randomModel(cfg, torch::kFloat64, 3);
    const auto stats = statsFor(*base);
    DeepSeekOptions o;
    o.ropeWidth = kv * cfg.headDim;
    o.dKv = static_cast<int>(std::min<std::int64_t>(2LL * kv * cfg.headDim, cfg.hiddenSize) / kv);
    o.latentNorm = false;
    std::vector<DeepSeekLayerStats> ls;
    auto ds = toDeepSeek(*base, o, stats, &ls);
    EXPECT_EQ(ds->config().latent->dRope, kv * cfg.headDim);
    for (const auto& s : ls) EXPECT_NEAR(s.ropeEnergyKept, 1.0, 1e-12);
    auto ids = testIds(cfg.vocabSize, 2, 48, 5);
    torch::NoGradGuard g;
    const double diff = maxAbsDiff(ds->forward(ids), base->forward(ids));
    EXPECT_LT(diff, 1e-9) << "n_kv " << kv;

    std::cout << "[ deepseek ] full-width RoRoPE, full rank, n_kv " << kv << ": max |logit diff| " << diff << "\n";
    // Narrower keys lose information: the same check fails, so it can fail.
    DeepSeekOptions narrow = o;
    narrow.ropeWidth = cfg.headDim / 2;
    EXPECT_GT(maxAbsDiff(toDeepSeek(*base, narrow, stats)->forward(ids), base->forward(ids)), 1e-3);
  }
}

TEST(DeepSeekTarget, LatentNormWeightIsTheLatentRmsOnCalibration) {
  const ModelConfig cfg = tinyConfig({.kvHeads = 2, .vocab = 256});
  auto base = randomModel(cfg, torch::kFloat64, 4);
  const auto batches = textBatches(cfg.vocabSize, 4, 64);
  NullProgress progress;
  CancelToken cancel;
  const auto stats = attentionInputStats(*base, batches, progress, cancel);
  DeepSeekOptions o;
  o.dKv = 8;
  auto ds = toDeepSeek(*base, o, stats);
  // The definition: run the original model, take each layer's attention input
  // h, the latent c = A h, and the RMS of c over every token and dim.
  torch::NoGradGuard g;
  auto ids = torch::cat(batches, 0);
  auto x = base->model->embed_tokens(ids);
  AttentionContext ctx;
  ctx.rope = &base->rope();
  for (int l = 0; l < cfg.numLayers; ++l) {
    auto* m = dynamic_cast<LatentAttentionLayer*>(ds->layer(l)->self_attn.get());
    ASSERT_NE(m, nullptr);
    auto h = base->layer(l)->input_layernorm(x);
    auto c = torch::matmul(h, m->kv_a_proj_with_mqa->weight.narrow(0, 0, 16).t());
    const double rms = c.square().mean().sqrt().item<double>();
    auto w = m->kv_a_layernorm->weight;
    EXPECT_NEAR(w.min().item<double>(), rms, 1e-12 * rms) << "layer " << l;
    EXPECT_NEAR(w.max().item<double>(), rms, 1e-12 * rms) << "layer " << l;
    x = base->layer(l)->forward(x, ctx);
  }
}

TEST(ActivationFactorisation, LowerActivationErrorThanWeightSvdAtEveryRankAndEqualWhenWhite) {
  const ModelConfig cfg = tinyConfig({.kvHeads = 2, .vocab = 256});
  auto base = randomModel(cfg, torch::kFloat64, 6);
  const auto stats = statsFor(*base);
  auto* a = dynamic_cast<LlamaAttention*>(base->layer(1)->self_attn.get());
  const auto& cov = stats.cov[1];
  auto wk = a->k_proj->weight, wv = a->v_proj->weight;
  auto white = torch::eye(cfg.hiddenSize, torch::kFloat64) * 3.0;
  const int full = static_cast<int>(std::min<std::int64_t>(wk.size(0) + wv.size(0), cfg.hiddenSize));
  for (int rank = 1; rank < full; ++rank) {
    const auto byWeights = factoriseKv(wk, wv, SvdMethod::Joint, rank, cov, false);
    const auto byActs = factoriseKv(wk, wv, SvdMethod::Joint, rank, cov, true);
    EXPECT_LT(byActs.actError, byWeights.actError) << "rank " << rank;
    EXPECT_GE(byActs.relError, byWeights.relError - 1e-12) << "rank " << rank;  // weight SVD is best on the weights
    const auto wWhite = factoriseKv(wk, wv, SvdMethod::Joint, rank, white, false);
    const auto aWhite = factoriseKv(wk, wv, SvdMethod::Joint, rank, white, true);
    EXPECT_NEAR(aWhite.actError, wWhite.actError, 1e-10) << "rank " << rank;
  }
  // The DeepSeek target too: the latent from activations beats the one from
  // weights at every d_kv below the rank of [alpha K_res; V] (where both are exact).
  for (int dKv = 1; dKv <= 26; dKv += 5) {
    DeepSeekOptions o;
    o.dKv = dKv;
    std::vector<DeepSeekLayerStats> byActs, byWeights;
    toDeepSeek(*base, o, stats, &byActs);
    o.activations = false;
    toDeepSeek(*base, o, stats, &byWeights);
    for (std::size_t l = 0; l < byActs.size(); ++l) {
      EXPECT_LT(byActs[l].latentActError, byWeights[l].latentActError) << "d_kv " << dKv << " layer " << l;
    }
  }
}

TEST(DeepSeekExport, TransformersLoadsTheExportAndGivesTheSameLogitsAndCachedDecode) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed in " << LATENTLAB_PYTHON;
  const fs::path root = scratchDir("deepseek-export");
  struct Case {
    std::string name;
    std::shared_ptr<CausalLm> model;
  };
  std::vector<Case> cases;
  for (int kv : {2, 4}) {
    const ModelConfig cfg = tinyConfig({.kvHeads = kv, .vocab = 256});
    auto base = randomModel(cfg, torch::kFloat32, 20 + kv);
    DeepSeekOptions o;
    o.dKv = 8;
    o.freqFold = kv == 2 ? 1 : 2;
    o.ropeWidth = kv == 2 ? 0 : cfg.headDim / 2;
    cases.push_back({kv == 2 ? "gqa" : "mha-fold2", toDeepSeek(*base, o, statsFor(*base))});
  }
  {
    // Llama-3 RoPE scaling carries over: the kept pairs' scaled frequencies are
    // llama3's table of a d_R-wide head at theta^(d_R/d_h).
    ModelConfig cfg = tinyConfig({.kvHeads = 2, .vocab = 256});
    cfg.ropeScaling.type = "llama3";
    cfg.ropeScaling.factor = 8.0;
    cfg.ropeScaling.lowFreqFactor = 1.0;
    cfg.ropeScaling.highFreqFactor = 4.0;
    cfg.ropeScaling.originalMaxPositionEmbeddings = 16;
    auto base = randomModel(cfg, torch::kFloat32, 27);
    DeepSeekOptions o;
    o.dKv = 8;
    o.ropeWidth = 8;
    cases.push_back({"gqa-llama3", toDeepSeek(*base, o, statsFor(*base))});
  }
  {
    ModelConfig cfg = tinyConfig({.heads = 4, .vocab = 256});
    LatentAttention la;
    la.kind = LatentKind::Mla;
    la.dC = 24;
    la.dRope = 8;
    la.dNope = 16;
    la.dV = 16;
    la.qLoraRank = 32;
    la.scaled = true;
    cfg.latent = la;
    cfg.numKvHeads = cfg.numHeads;
    cases.push_back({"mla-from-scratch", randomModel(cfg, torch::kFloat32, 31)});
  }
  for (auto& c : cases) {
    const fs::path ours = root / (c.name + "-latentlab"), out = root / (c.name + "-deepseek");
    fs::remove_all(ours);
    saveModel(*c.model, ours, DType::F32);
    const auto report = exportTo(ours, out);
    const ModelConfig& cfg = c.model->config();
    EXPECT_EQ(report.kvPerTokenPerLayer, currentKvBudget(cfg, DType::F32).perTokenPerLayer) << c.name;
    EXPECT_EQ(report.kvPerTokenPerLayer, cfg.latent->dC + cfg.latent->dRope) << c.name;
    auto ids = testIds(cfg.vocabSize, 3, 40, 9);
    std::string log;
    auto theirs = hfDeepSeekLogits(out, ids, cfg.vocabSize, "", &log);
    ASSERT_TRUE(theirs.defined()) << c.name << ": " << log;
    torch::NoGradGuard g;
    auto mine = c.model->forward(ids);
    const double diff = maxAbsDiff(mine, theirs);
    EXPECT_LT(diff, 1e-4) << c.name;
    std::cout << "[ deepseek ] " << c.name << " export: max |logit diff| vs transformers " << diff << " (max |logit| "
              << theirs.abs().max().item<double>() << ")\n";
    // Negative controls: the comparison notices a swapped RoPE-key slot and a unit latent norm.
    for (const std::string mutate : {"swap-kpe", "latent-norm-one"}) {
      auto wrong = hfDeepSeekLogits(out, ids, cfg.vocabSize, mutate, &log);
      ASSERT_TRUE(wrong.defined()) << log;
      EXPECT_GT(maxAbsDiff(mine, wrong), 1e-3) << c.name << " " << mutate;
    }
    // LatentLab reads the export back (DeepSeek's layout undone in the layer):
    // the same logits, the same cache per token; saved again, it stays a
    // DeepSeek-V3 folder transformers loads.
    auto reread = loadModel(out, torch::kCPU, torch::kFloat32);
    EXPECT_EQ(reread->config().modelType, "deepseek_v3");
    EXPECT_LT(maxAbsDiff(reread->forward(ids), mine), 1e-5) << c.name;
    EXPECT_EQ(currentKvBudget(reread->config(), DType::F32).perTokenPerLayer, report.kvPerTokenPerLayer);
    const fs::path again = root / (c.name + "-saved-again");
    fs::remove_all(again);
    saveModel(*reread, again, DType::F32);
    auto theirsAgain = hfDeepSeekLogits(again, ids, cfg.vocabSize, "", &log);
    ASSERT_TRUE(theirsAgain.defined()) << c.name << ": " << log;
    EXPECT_LT(maxAbsDiff(theirsAgain, theirs), 1e-5) << c.name;
    // transformers' cached incremental decoding equals LatentLab's latent-cache decode.
    const std::vector<std::int32_t> prompt = {5, 17, 99, 3, 64, 12, 80, 7, 33, 41, 102, 9};
    GenerateOptions go;
    go.model = ours;
    go.temperature = 0;
    go.maxNewTokens = 24;
    go.stopAtEos = false;
    Generator gen(go);
    CancelToken cancel;
    const auto mineIds = gen.generateIds(prompt, {}, cancel).generatedIds;
    const auto theirIds = hfGreedy(out, prompt, 24, &log, {"--expect-class", "DeepseekV3ForCausalLM"});
    ASSERT_FALSE(theirIds.empty()) << log;
    EXPECT_EQ(mineIds, theirIds) << c.name;
  }
}

TEST(DeepSeekExport, DeepSeekFoldersWithExpertsOrBiasesAreRefusedByName) {
  const fs::path root = scratchDir("deepseek-read");
  const std::string base =
      R"({"model_type": "deepseek_v3", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 2, "kv_lora_rank": 8, "q_lora_rank": null, "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 8, "v_head_dim": 8, "rope_theta": 10000.0)";
  auto read = [&](const std::string& name, const std::string& extra) {
    fs::create_directories(root / name);
    std::ofstream(root / name / "config.json") << base << extra << "}";
    return readHfConfig(root / name / "config.json");
  };
  const ModelConfig dense = read("dense", R"(, "first_k_dense_replace": 2)");
  ASSERT_TRUE(dense.latent.has_value());
  EXPECT_EQ(dense.latent->qLoraRank, 0);
  EXPECT_TRUE(dense.latent->ropeInterleaved);
  EXPECT_EQ(currentKvBudget(dense, DType::BF16).perTokenPerLayer, 8 + 4);
  for (const auto& [name, extra, words] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"moe", R"(, "first_k_dense_replace": 1)", "mixture-of-experts"},
           {"bias", R"(, "first_k_dense_replace": 2, "attention_bias": true)", "attention_bias"},
           {"gqa", R"(, "first_k_dense_replace": 2, "num_key_value_heads": 1)", "num_key_value_heads"}}) {
    try {
      read(name, extra);
      ADD_FAILURE() << name << " was read";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find(words), std::string::npos) << e.message();
      EXPECT_NE(e.message().find((root / name / "config.json").string()), std::string::npos) << e.message();
    }
  }
}

TEST(DeepSeekExport, RefusesModelsItCannotExpress) {
  const fs::path root = scratchDir("deepseek-refuse");
  const ModelConfig cfg = tinyConfig({.kvHeads = 2});
  auto base = randomModel(cfg, torch::kFloat32, 1);
  ConversionOptions o;
  o.rope = RopeStrategy::High;
  o.dKv = 4;
  fs::remove_all(root / "mha2mla");
  saveModel(*convertModel(*base, o), root / "mha2mla", DType::F32);
  fs::remove_all(root / "original");
  saveModel(*base, root / "original", DType::F32);
  for (const auto& [dir, words] : std::vector<std::pair<std::string, std::string>>{{"mha2mla", "--target deepseek"},
                                                                                   {"original", "--target deepseek"}}) {
    try {
      exportTo(root / dir, root / (dir + "-out"));
      ADD_FAILURE() << dir << " was exported";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find((root / dir).string()), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(words), std::string::npos) << e.message();
    }
    EXPECT_FALSE(fs::exists(root / (dir + "-out")));
  }
  // A RoPE key wider than the frequency table (repeated frequencies) converts but does not export.
  DeepSeekOptions wide;
  wide.ropeWidth = 2 * cfg.headDim;
  wide.dKv = 8;
  auto ds = toDeepSeek(*base, wide, statsFor(*base));
  EXPECT_TRUE(deepSeekExportProblem(ds->config()).has_value());
  // Qwen2-style biases are refused by the DeepSeek target with the reason.
  const ModelConfig qwen = tinyConfig({.kvHeads = 2, .modelType = "qwen2"});
  DeepSeekOptions o2;
  o2.dKv = 4;
  try {
    validateDeepSeekConversion(qwen, o2);
    ADD_FAILURE() << "biases accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("biases"), std::string::npos) << e.message();
  }
}

}  // namespace latentlab::test
