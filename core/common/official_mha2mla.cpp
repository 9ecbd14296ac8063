// The config.json blocks of checkpoints written by the official MHA2MLA code
// (docs/official_mha2mla.md), read as LatentLab's MHA2MLA conversion: the
// strategy, r, d_kv and SVD method, and the kept pairs of every layer and KV
// head computed as that code computes them. A 2-norm checkpoint's pairs come
// from its rank (or score) tensor file, which the model loader reads.
#include <set>

#include "common/model_config_internal.h"
#include "latentlab/error.h"

namespace latentlab::detail {
using json = nlohmann::json;

namespace {

// The same pairs for every layer and KV head.
void fixedPairs(ModelConfig& cfg, const std::vector<int>& kept) {
  cfg.mla->pairs.assign(static_cast<std::size_t>(cfg.numLayers),
                        std::vector<std::vector<int>>(static_cast<std::size_t>(cfg.numKvHeads), kept));
}

std::vector<int> range(int begin, int end, int step = 1) {
  std::vector<int> out;
  for (int k = begin; k < end; k += step) out.push_back(k);
  return out;
}

// Uniform: kept dims start, start + step, ... below d_h; whole pairs only
// (the step divides d_h/2, so the dims past d_h/2 are the partners).
std::vector<int> uniformPairs(const JsonReader& r, const char* field, int headDim, int start, int stepDims, int pairs) {
  const int half = headDim / 2;
  if (stepDims < 1 || half % stepDims != 0 || start < 0 || start >= stepDims) {
    r.fail(field, "gives a uniform step of " + std::to_string(stepDims) + " dims from dim " + std::to_string(start) +
                      ", which does not keep whole frequency pairs of a " + std::to_string(headDim) + "-dim head");
  }
  auto kept = range(start, half, stepDims);
  if (pairs > 0 && static_cast<int>(kept.size()) != pairs) {
    r.fail(field, "keeps " + std::to_string(kept.size()) + " pairs, not the " + std::to_string(pairs) + " it declares");
  }
  return kept;
}

SvdMethod svdFor(const JsonReader& r, const std::string& field, const std::string& method) {
  if (method == "joint") return SvdMethod::Joint;
  if (method == "split") return SvdMethod::Split;
  r.fail(field, "is '" + method +
                    "': LatentLab reads the official joint and split factorisations (a latent shared by K and V, or "
                    "one each); without a latent for both the cache is not MHA2MLA's");
}

void common(const JsonReader& r, ModelConfig& cfg) {
  if (cfg.modelType != "llama" && cfg.modelType != "qwen2") {
    throw Error(ErrorCode::Unsupported,
                r.source() + ": an official MHA2MLA checkpoint of model_type '" + cfg.modelType + "' is not supported",
                cfg.modelType == "qwen3"
                    ? "The official code applies Qwen3's key norm after RoPE over the whole key, a "
                      "different model from Qwen3's; convert the original Qwen3 with LatentLab, "
                      "whose latent cache keeps the norm exact."
                    : "LatentLab reads official MHA2MLA checkpoints of Llama-family models "
                      "(SmolLM, Llama-2, Qwen2).");
  }
  if (!cfg.nopeLayers.empty() || cfg.rotaryDim != 0 || cfg.qkNorm) {
    throw Error(ErrorCode::Unsupported,
                r.source() + ": an official MHA2MLA checkpoint with layer options it never had");
  }
}

// Format 2: {"mha2mla": {partial_rope_version, rope_dim_for_mla (dims), uniform_start_point,
// qk_tensor_path, svd_init_method, low_rank, is_baseline, is_gqa2mha2mla, ...}}.
void readFormat2(const json& block, const JsonReader& top, ModelConfig& cfg) {
  JsonReader r(block, top.source() + " mha2mla", ErrorCode::BadModel);
  if (r.optBool("is_baseline", false)) return;  // a plain fine-tune: the model's own attention
  common(top, cfg);
  if (r.optBool("is_gqa2mha2mla", false)) {
    throw Error(ErrorCode::Unsupported,
                r.source() + ": field 'is_gqa2mha2mla' is true: keys expanded to every query head are not supported",
                "Convert the GQA original with LatentLab instead (its latent keeps the KV heads).");
  }
  OfficialMha2Mla o;
  o.format = 2;
  o.version = r.optString("partial_rope_version", "high");
  const int dims = r.requireInt("rope_dim_for_mla");
  const int half = cfg.headDim / 2;
  if (dims < 2 || dims % 2 != 0 || dims > cfg.headDim) {
    r.fail("rope_dim_for_mla", "must be an even number of dims in [2, head_dim], got " + std::to_string(dims));
  }
  const int pairs = dims / 2;
  MlaConversion m;
  m.ropePairs = pairs;
  m.dKv = r.requireInt("low_rank");
  if (m.dKv < 1) r.fail("low_rank", "must be positive");
  m.svdMethod = svdFor(r, "svd_init_method", r.optString("svd_init_method", "none"));
  cfg.mla = m;
  if (o.version == "high") {
    cfg.mla->ropeStrategy = RopeStrategy::High;
    fixedPairs(cfg, range(0, pairs));
  } else if (o.version == "low") {
    cfg.mla->ropeStrategy = RopeStrategy::Low;
    fixedPairs(cfg, range(half - pairs, half));
  } else if (o.version == "uniform") {
    cfg.mla->ropeStrategy = RopeStrategy::Uniform;
    fixedPairs(cfg, uniformPairs(r, "uniform_start_point", cfg.headDim, r.optInt("uniform_start_point", 0),
                                 cfg.headDim / dims, pairs));
  } else if (o.version == "2-norm") {
    cfg.mla->ropeStrategy = RopeStrategy::TwoNorm;
    cfg.mla->twoNormScore = TwoNormScore::Product;  // the rank file ranks q * k pair norms
    o.rankFile = r.requireString("qk_tensor_path");
  } else {
    r.fail("partial_rope_version", "is '" + o.version + "'; the official versions are high, low, uniform, 2-norm");
  }
  cfg.mla->official = o;
}

// Format 1: {"RoPE": {partial_rope_version (int), top_k_rope_dim, last_k_rope_dim (pairs),
// uniform_start_point, uniform_step (dims), qk_tensor_path}, "SVD": {method, low_rank}}.
void readFormat1(const json& rope, const json& svd, const JsonReader& top, ModelConfig& cfg) {
  JsonReader r(rope, top.source() + " RoPE", ErrorCode::BadModel);
  JsonReader s(svd, top.source() + " SVD", ErrorCode::BadModel);
  common(top, cfg);
  if (cfg.attentionBias) top.fail("attention_bias", "must be false in an official MHA2MLA checkpoint of this layout");
  OfficialMha2Mla o;
  o.format = 1;
  const int version = r.requireInt("partial_rope_version");
  o.version = std::to_string(version);
  const int half = cfg.headDim / 2;
  MlaConversion m;
  m.dKv = s.requireInt("low_rank");
  if (m.dKv < 1) s.fail("low_rank", "must be positive");
  const int method = s.requireInt("method");
  if (method != 7 && method != 2) {
    s.fail("method", "is " + std::to_string(method) +
                         ": LatentLab reads method 7 (SVD_joint, every released checkpoint) and 2 (SVD_split)");
  }
  m.svdMethod = method == 7 ? SvdMethod::Joint : SvdMethod::Split;
  cfg.mla = m;
  auto pairCount = [&](const char* field) {
    const int k = r.requireInt(field);
    if (k < 1 || k > half) r.fail(field, "must be in [1, head_dim/2 = " + std::to_string(half) + "] pairs");
    return k;
  };
  if (version == 1) {
    cfg.mla->ropeStrategy = RopeStrategy::High;
    cfg.mla->ropePairs = pairCount("top_k_rope_dim");
    fixedPairs(cfg, range(0, cfg.mla->ropePairs));
  } else if (version == 5) {
    cfg.mla->ropeStrategy = RopeStrategy::Low;
    cfg.mla->ropePairs = pairCount("last_k_rope_dim");
    fixedPairs(cfg, range(half - cfg.mla->ropePairs, half));
  } else if (version == 2) {
    cfg.mla->ropeStrategy = RopeStrategy::Uniform;
    const auto kept = uniformPairs(r, "uniform_step", cfg.headDim, r.optInt("uniform_start_point", 0),
                                   r.requireInt("uniform_step"), 0);
    cfg.mla->ropePairs = static_cast<int>(kept.size());
    fixedPairs(cfg, kept);
  } else if (version == 4) {
    cfg.mla->ropeStrategy = RopeStrategy::TwoNorm;
    cfg.mla->twoNormScore = TwoNormScore::Sum;  // the score file sums q and k pair norms
    cfg.mla->ropePairs = pairCount("top_k_rope_dim");
    o.rankFile = r.requireString("qk_tensor_path");
  } else {
    r.fail("partial_rope_version", "is " + std::to_string(version) +
                                       ": LatentLab reads versions 1 (high), 2 (uniform), 4 (2-norm) and 5 (low); 0 "
                                       "keeps every pair and 3 mixes high and low");
  }
  cfg.mla->official = o;
}

}  // namespace

void readOfficialMha2Mla(const json& j, const JsonReader& r, ModelConfig& cfg) {
  auto object = [&](const char* key) { return j.contains(key) && j.at(key).is_object(); };
  if (object("mha2mla")) {
    readFormat2(j.at("mha2mla"), r, cfg);
  } else if (object("RoPE") && object("SVD")) {
    readFormat1(j.at("RoPE"), j.at("SVD"), r, cfg);
  }
}

}  // namespace latentlab::detail
