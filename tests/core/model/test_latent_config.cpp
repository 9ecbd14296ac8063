// Latent-attention configs: parameter counts against hand-computed formulas at
// the MLRA paper's scale, the parameter matcher, config.json round trip and
// errors, and the RunSpec's attention fields.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "latentlab/architectures.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "latentlab/run_spec.h"
#include "test_support.h"

namespace latentlab::test {

namespace {
ModelConfig paperVariant(const std::string& attention, bool scaled = true) {
  AttentionOptions o;
  o.scaled = scaled;
  return attentionVariant(builtinArchitecture("mlra-paper"), attention, o, "test");
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// d = 3072, 24 heads, d_h 128, d_nope = d_v = 128, d_R = 64, d_c = 512.
// Attention parameters per layer:
//   latent: d*q + q + q*n_h*(d_nope+d_R) + d*(d_c+d_R) + d_c + L*G*(d_nope+d_v)*(d_c/L) + n_h*d_v*d
//           (q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj;
//            L latent heads each serving G query heads: L*G = n_h * branches)
//   MHA/GQA: 2*d*n_h*d_h + 2*d*n_kv*d_h
// Layer: attention + 3*d*I (SwiGLU MLP) + 2*d (two RMSNorm weights).
TEST(LatentConfig, PaperScaleParameterCountsMatchTheHandFormulas) {
  const std::int64_t d = 3072;
  const std::int64_t mlaAttn = d * 1536 + 1536 + 1536 * 24 * 192 + d * 576 + 512 + 1 * 24 * 256 * 512 + 24 * 128 * d;
  const std::int64_t gla2Attn = d * 1024 + 1024 + 1024 * 24 * 192 + d * 576 + 512 + 2 * 12 * 256 * 256 + 24 * 128 * d;
  const std::int64_t mlra2Attn = d * 1024 + 1024 + 1024 * 24 * 192 + d * 576 + 512 + 4 * 12 * 256 * 128 + 24 * 128 * d;
  const std::int64_t gqaAttn = 2 * d * 24 * 128 + 2 * d * 6 * 128;
  const std::int64_t mhaAttn = 4 * d * 24 * 128;
  EXPECT_EQ(mlaAttn, 26150912);
  EXPECT_EQ(gla2Attn, 20645376);
  EXPECT_EQ(mlra2Attn, gla2Attn);

  const auto mla = paperVariant("mla"), gla2 = paperVariant("gla-2"), mlra2 = paperVariant("mlra-2");
  const auto gqa = paperVariant("gqa"), mha = paperVariant("mha");
  EXPECT_EQ(attentionParametersPerLayer(mla), mlaAttn);
  EXPECT_EQ(attentionParametersPerLayer(gla2), gla2Attn);
  EXPECT_EQ(attentionParametersPerLayer(mlra2), mlra2Attn);
  EXPECT_EQ(attentionParametersPerLayer(gqa), gqaAttn);
  EXPECT_EQ(attentionParametersPerLayer(mha), mhaAttn);

  // The matcher's output: the paper's q_lora ranks and MLP widths.
  EXPECT_EQ(mla.latent->qLoraRank, 1536);
  EXPECT_EQ(gla2.latent->qLoraRank, 1024);
  EXPECT_EQ(mlra2.latent->qLoraRank, 1024);
  EXPECT_EQ(mla.latent->dC, 512);
  EXPECT_EQ(mla.latent->dRope, 64);
  EXPECT_EQ(mla.intermediateSize, 9448);
  EXPECT_EQ(gla2.intermediateSize, 10048);
  EXPECT_EQ(mlra2.intermediateSize, 10048);
  EXPECT_EQ(gqa.intermediateSize, 9728);
  EXPECT_EQ(gqa.numKvHeads, 6);
  EXPECT_EQ(mha.intermediateSize, 8192);

  // Per layer within 0.5% of each other (MLA vs GLA-2 as the paper sets them).
  auto layer = [&](const ModelConfig& c) {
    return attentionParametersPerLayer(c) + 3 * d * c.intermediateSize + 2 * d;
  };
  EXPECT_EQ(layer(mla), mlaAttn + 3 * d * 9448 + 2 * d);
  const double rel = std::abs(static_cast<double>(layer(mla) - layer(gla2))) / static_cast<double>(layer(gla2));
  EXPECT_LT(rel, 0.005);
  EXPECT_EQ(layer(gqa), layer(mha));  // 9728 and 8192 match exactly
  // Totals: embedding (tied) + 24 layers + final norm.
  EXPECT_EQ(countParameters(mla), 50304 * d + 24 * layer(mla) + d);
  EXPECT_EQ(countParameters(mha), countParameters(builtinArchitecture("mlra-paper")));
}

TEST(LatentConfig, MatcherLandsNearestTheTargetAndKeepsExplicitRanks) {
  ModelConfig base = builtinArchitecture("demo-gqa");
  for (const std::string v : {"mla", "gla-2", "mlra-2", "mlra-4", "mha"}) {
    AttentionOptions o;
    const auto cfg = attentionVariant(base, v, o, "test");
    EXPECT_EQ(cfg.intermediateSize % 8, 0) << v;
    // Nearest multiple of 8: one more or one fewer step of 8 is not closer.
    const std::int64_t step = 8LL * 3 * cfg.hiddenSize * cfg.numLayers;
    EXPECT_LE(std::llabs(countParameters(cfg) - countParameters(base)), step / 2) << v;
  }
  AttentionOptions o;
  o.qLoraRank = 48;
  o.match = "target";
  o.targetParameters = 1'000'000;
  const auto cfg = attentionVariant(base, "gla-2", o, "test");
  EXPECT_EQ(cfg.latent->qLoraRank, 48);
  EXPECT_LE(std::llabs(countParameters(cfg) - 1'000'000), 8LL * 3 * 128 * 4 / 2);
  o.targetParameters = 1000;
  EXPECT_NE(errorOf([&] { attentionVariant(base, "gla-2", o, "test"); }).find("no room for an MLP"), std::string::npos);
}

TEST(LatentConfig, ConfigJsonRoundTripsAndNamesBadFields) {
  const auto dir = scratchDir("latent-config");
  ModelConfig cfg = attentionVariant(builtinArchitecture("demo-gqa"), "mlra-4", AttentionOptions{}, "test");
  cfg.latent->scaled = false;
  writeHfConfig(cfg, dir / "config.json");
  const ModelConfig back = readHfConfig(dir / "config.json");
  ASSERT_TRUE(back.latent.has_value());
  EXPECT_EQ(back.latent->name(), "mlra-4");
  EXPECT_EQ(back.latent->dC, cfg.latent->dC);
  EXPECT_EQ(back.latent->qLoraRank, cfg.latent->qLoraRank);
  EXPECT_FALSE(back.latent->scaled);
  EXPECT_EQ(back.intermediateSize, cfg.intermediateSize);
  EXPECT_EQ(countParameters(back), countParameters(cfg));

  const std::string text = readTextFile(dir / "config.json");
  auto withEdit = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    atomicWriteText(dir / "bad" / "config.json", t);
    return errorOf([&] { readHfConfig(dir / "bad" / "config.json"); });
  };
  std::filesystem::create_directories(dir / "bad");
  auto e = withEdit("\"d_rope\"", "\"d_ropee\"");
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("d_ropee"), std::string::npos) << e;
  e = withEdit("\"d_c\": 128", "\"d_c\": 126");  // not divisible by the 4 latent heads
  EXPECT_NE(e.find("latentlab_latent.d_c"), std::string::npos) << e;
  e = withEdit("\"branches\": 4", "\"branches\": 3");
  EXPECT_NE(e.find("latentlab_latent.branches"), std::string::npos) << e;
  // A name outside the vocabulary: the field, the name and the names it takes.
  e = withEdit("\"kind\": \"mlra\"", "\"kind\": \"mlrb\"");
  EXPECT_NE(e.find("latentlab_latent: field 'kind'"), std::string::npos) << e;
  EXPECT_NE(e.find("'mlrb', not one of mla, gla, mlra"), std::string::npos) << e;
}

TEST(LatentConfig, RunSpecAcceptsTheVariantsAndNamesImpossibleSettings) {
  const std::string head = R"({"kind": "pretrain", "architecture": "demo-gqa", )";
  for (const std::string v : {"mha", "gqa", "mla", "gla-2", "gla-4", "mlra-2", "mlra-4"}) {
    RunSpec s =
        parseRunSpec(head + R"("attention": ")" + v + R"(", "attention_options": {"scaled": false}})", "s.json");
    EXPECT_EQ(s.attention, v);
    EXPECT_FALSE(s.attentionOptions.scaled);
    // Round trip through runSpecToJson.
    RunSpec back = parseRunSpec(runSpecToJson(s), "back.json");
    EXPECT_EQ(back.attention, v);
    EXPECT_FALSE(back.attentionOptions.scaled);
    EXPECT_EQ(back.attentionOptions.match, "architecture");
  }
  auto err = [&](const std::string& body) { return errorOf([&] { parseRunSpec(head + body, "s.json"); }); };
  auto e = err(R"("attention": "gla-3"})");  // 4 heads do not split into 3 groups
  EXPECT_NE(e.find("s.json"), std::string::npos) << e;
  EXPECT_NE(e.find("attention"), std::string::npos) << e;
  e = err(R"("attention": "gla-2", "attention_options": {"d_c": 33}})");
  EXPECT_NE(e.find("attention_options.d_c"), std::string::npos) << e;
  e = err(R"("attention": "mlra-3"})");
  EXPECT_NE(e.find("attention"), std::string::npos) << e;
  e = err(R"("attention": "mla", "attention_options": {"dc": 8}})");
  EXPECT_NE(e.find("attention_options.dc"), std::string::npos) << e;
  e = err(R"("attention": "mla", "attention_options": {"match": "target"}})");
  EXPECT_NE(e.find("target_parameters"), std::string::npos) << e;
  e = err(R"("attention": "gqa", "attention_options": {"gqa_group": 3}})");
  EXPECT_NE(e.find("gqa_group"), std::string::npos) << e;
  // A version-1 spec without the new fields parses as before and writes no attention_options.
  RunSpec plain = parseRunSpec(head + R"("steps": 5})", "old.json");
  EXPECT_TRUE(plain.attention.empty());
  EXPECT_EQ(runSpecToJson(plain).find("attention_options"), std::string::npos);
}

TEST(LatentConfig, KvPerTokenOfOriginalModelsPerTpDevice) {
  // GQA with 2 KV heads: one head per device from degree 2 on.
  ModelConfig gqa = builtinArchitecture("demo-gqa");
  EXPECT_EQ(currentKvBudget(gqa, DType::F32, 1).perDevicePerTokenPerLayer, 2 * 2 * 32);
  EXPECT_EQ(currentKvBudget(gqa, DType::F32, 2).perDevicePerTokenPerLayer, 2 * 32);
  EXPECT_EQ(currentKvBudget(gqa, DType::F32, 8).perDevicePerTokenPerLayer, 2 * 32);
  // Paper-scale MLA: 512 + 64 at every degree; GLA-2 288 at 2; MLRA-4 192 at 4.
  for (int tp : {1, 2, 4, 8})
    EXPECT_EQ(currentKvBudget(paperVariant("mla"), DType::BF16, tp).perDevicePerTokenPerLayer, 576);
  EXPECT_EQ(currentKvBudget(paperVariant("gla-2"), DType::BF16, 2).perDevicePerTokenPerLayer, 256 + 64);
  EXPECT_EQ(currentKvBudget(paperVariant("mlra-4"), DType::BF16, 4).perDevicePerTokenPerLayer, 128 + 64);
  EXPECT_EQ(currentKvBudget(paperVariant("mlra-4"), DType::BF16, 1).bytesPerToken, 576 * 24 * 2);
}

TEST(LatentConfig, ScaleAblationPresetParsesAtBothScalesWithMatchedPairs) {
  const auto preset =
      nlohmann::json::parse(readTextFile(std::string(LATENTLAB_SOURCE_DIR) + "/resources/presets/scale-ablation.json"));
  for (const std::string scale : {"demo", "paper"}) {
    const auto& runs = preset.at("scales").at(scale).at("runs");
    ASSERT_EQ(runs.size(), 6u) << scale;
    std::map<std::string, int> scaledCount;
    for (const auto& r : runs) {
      const RunSpec s = parseRunSpec(r.dump(), "scale-ablation.json " + scale);
      ++scaledCount[s.attention + (s.attentionOptions.scaled ? " scaled" : " noscale")];
      EXPECT_TRUE(s.zeroInitOutput);
      EXPECT_DOUBLE_EQ(s.initStd, 0.02);
      const ModelConfig cfg =
          attentionVariant(builtinArchitecture(s.architecture), s.attention, s.attentionOptions, "p");
      if (scale == "paper") {
        EXPECT_EQ(s.steps, 100000);
        EXPECT_EQ(s.data.seqLen, 2048);
        EXPECT_EQ(static_cast<std::int64_t>(s.microBatch) * s.gradAccum * s.data.seqLen, 983040);  // ~1M tokens
        EXPECT_EQ(cfg.intermediateSize, s.attention == "mla" ? 9448 : 10048) << s.name;
      } else {
        EXPECT_EQ(s.architecture, "demo-gqa");
      }
    }
    for (const std::string v : {"mla", "gla-2", "mlra-2"}) {
      EXPECT_EQ(scaledCount[v + " scaled"], 1) << scale << " " << v;
      EXPECT_EQ(scaledCount[v + " noscale"], 1) << scale << " " << v;
    }
  }
}

}  // namespace latentlab::test
