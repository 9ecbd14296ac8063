// HF config.json <-> ModelConfig and its validation (parameter counts: model_parameters.cpp).
#include "latentlab/model_config.h"
#include "common/model_config_internal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "common/file_util.h"
#include "common/json_util.h"
#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::F64:
      return "F64";
  }
  return "?";
}

std::size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::BF16:
      return 2;
    case DType::F64:
      return 8;
  }
  return 0;
}

DType parseDType(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "f32" || n == "float32" || n == "fp32" || n == "float") return DType::F32;
  if (n == "f16" || n == "float16" || n == "fp16" || n == "half") return DType::F16;
  if (n == "bf16" || n == "bfloat16") return DType::BF16;
  if (n == "f64" || n == "float64" || n == "fp64" || n == "double") return DType::F64;
  throw Error(ErrorCode::BadInput, "unknown dtype '" + name + "'", "Use one of f32, bf16, f16, f64.");
}

namespace detail {

// Reads `rope_theta` and the scaling of either layout: transformers 4's
// `rope_scaling` (with `type` or `rope_type`) or transformers 5's
// `rope_parameters` (which also carries rope_theta). Fields as transformers
// requires them: linear and dynamic need factor; llama3 factor,
// low_freq_factor, high_freq_factor; yarn factor (original context, betas,
// mscale, attention_factor optional).
void readPartialRotary(const JsonReader& r, ModelConfig& cfg) {
  const double f = r.requireDouble("partial_rotary_factor");
  if (!(f > 0 && f <= 1)) r.fail("partial_rotary_factor", "must be in (0, 1]");
  // transformers: int(head_dim * factor) dims rotate.
  const int dims = static_cast<int>(cfg.headDim * f);
  if (dims < 2 || dims % 2 != 0) {
    r.fail("partial_rotary_factor", "gives " + std::to_string(dims) + " rotating dims of a " +
                                        std::to_string(cfg.headDim) + "-dim head; it must be a positive even number");
  }
  cfg.rotaryDim = dims == cfg.headDim ? 0 : dims;
}

void readRope(const json& j, const JsonReader& r, ModelConfig& cfg) {
  cfg.ropeTheta = r.optDouble("rope_theta", cfg.ropeTheta);
  if (r.has("partial_rotary_factor")) readPartialRotary(r, cfg);
  const json* params = nullptr;
  std::string where;
  if (j.contains("rope_parameters") && j.at("rope_parameters").is_object()) {
    params = &j.at("rope_parameters");
    where = "rope_parameters";
    // Per layer type (Gemma-3): the full-attention layers' RoPE here, the
    // windowed layers' base in readFamilyFields.
    if (params->contains("full_attention") && params->at("full_attention").is_object()) {
      params = &params->at("full_attention");
      where = "rope_parameters.full_attention";
    }
  }
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null()) {
    if (!j.at("rope_scaling").is_object()) r.fail("rope_scaling", "must be an object or null");
    params = &j.at("rope_scaling");
    where = "rope_scaling";
  }
  if (params == nullptr) return;
  const std::string src = r.source() + " " + where;
  JsonReader p(*params, src, ErrorCode::BadModel);
  if (where.starts_with("rope_parameters")) cfg.ropeTheta = p.optDouble("rope_theta", cfg.ropeTheta);
  RopeScaling& s = cfg.ropeScaling;
  s.type = p.has("rope_type") ? p.requireString("rope_type") : p.optString("type", "default");
  // Phi-3's early names, read as transformers does.
  if (s.type == "su" || (cfg.modelType == "phi3" && s.type == "yarn")) s.type = "longrope";
  static const std::set<std::string> kTypes = {"default", "linear", "dynamic", "yarn", "llama3", "longrope"};
  if (!kTypes.count(s.type)) {
    throw Error(ErrorCode::Unsupported, src + ": rope_type '" + s.type + "' is not supported",
                "LatentLab reads these RoPE variants: default, linear, dynamic (NTK), yarn, llama3, longrope.");
  }
  if (p.has("partial_rotary_factor")) readPartialRotary(p, cfg);
  auto positive = [&](const char* key) {
    const double v = p.requireDouble(key);
    if (!(v > 0) || !std::isfinite(v)) p.fail(key, "must be a positive number, got " + params->at(key).dump());
    return v;
  };
  const int originalDefault = r.optInt("original_max_position_embeddings", cfg.maxPositionEmbeddings);
  if (s.type == "linear" || s.type == "dynamic") {
    s.factor = positive("factor");
  } else if (s.type == "llama3") {
    s.factor = positive("factor");
    s.lowFreqFactor = positive("low_freq_factor");
    s.highFreqFactor = positive("high_freq_factor");
    if (s.highFreqFactor <= s.lowFreqFactor) p.fail("high_freq_factor", "must be larger than low_freq_factor");
    s.originalMaxPositionEmbeddings = p.optInt("original_max_position_embeddings", originalDefault);
  } else if (s.type == "yarn") {
    s.factor = positive("factor");
    s.originalMaxPositionEmbeddings = p.optInt("original_max_position_embeddings", originalDefault);
    if (p.has("attention_factor")) s.attentionFactor = positive("attention_factor");
    // transformers reads `beta_fast or 32`: 0 and null both mean the default.
    if (p.has("beta_fast") && p.requireDouble("beta_fast") != 0) s.betaFast = p.requireDouble("beta_fast");
    if (p.has("beta_slow") && p.requireDouble("beta_slow") != 0) s.betaSlow = p.requireDouble("beta_slow");
    if (p.has("mscale")) s.mscale = p.requireDouble("mscale");
    if (p.has("mscale_all_dim")) s.mscaleAllDim = p.requireDouble("mscale_all_dim");
    s.truncate = p.optBool("truncate", true);
  } else if (s.type == "longrope") {
    // transformers: the top-level original context wins; factor defaults to
    // context / original context; the attention factor is derived from it.
    // (Phi-3's config class holds a top-level 4096 by default, which transformers prefers to a nested value.)
    s.originalMaxPositionEmbeddings =
        r.has("original_max_position_embeddings") ? r.requireInt("original_max_position_embeddings")
        : cfg.modelType == "phi3"                 ? 4096
                                  : p.optInt("original_max_position_embeddings", cfg.maxPositionEmbeddings);
    if (s.originalMaxPositionEmbeddings < 1) p.fail("original_max_position_embeddings", "must be positive");
    s.factor = p.has("factor") ? positive("factor")
                               : static_cast<double>(cfg.maxPositionEmbeddings) / s.originalMaxPositionEmbeddings;
    if (p.has("attention_factor")) s.attentionFactor = positive("attention_factor");
    auto factors = [&](const char* key) {
      std::vector<double> out;
      if (!params->contains(key) || !params->at(key).is_array()) p.fail(key, "must be a list of numbers");
      for (const auto& v : params->at(key)) {
        if (!v.is_number() || !(v.get<double>() > 0)) p.fail(key, "must hold positive numbers");
        out.push_back(v.get<double>());
      }
      return out;
    };
    s.shortFactor = factors("short_factor");
    s.longFactor = factors("long_factor");
  }
  if ((s.type == "llama3" || s.type == "yarn") && s.originalMaxPositionEmbeddings < 1)
    p.fail("original_max_position_embeddings", "must be positive");
}

// transformers 5's layout of a scaled RoPE, which it reads back as written.
json ropeParametersJson(const ModelConfig& cfg) {
  const RopeScaling& s = cfg.ropeScaling;
  json p = {{"rope_type", s.type}, {"rope_theta", cfg.ropeTheta}, {"factor", s.factor}};
  if (s.type == "llama3") {
    p["low_freq_factor"] = s.lowFreqFactor;
    p["high_freq_factor"] = s.highFreqFactor;
    p["original_max_position_embeddings"] = s.originalMaxPositionEmbeddings;
  } else if (s.type == "yarn") {
    p["original_max_position_embeddings"] = s.originalMaxPositionEmbeddings;
    p["beta_fast"] = s.betaFast;
    p["beta_slow"] = s.betaSlow;
    p["truncate"] = s.truncate;
    if (s.attentionFactor) p["attention_factor"] = *s.attentionFactor;
    if (s.mscale) p["mscale"] = *s.mscale;
    if (s.mscaleAllDim) p["mscale_all_dim"] = *s.mscaleAllDim;
  } else if (s.type == "longrope") {
    p["original_max_position_embeddings"] = s.originalMaxPositionEmbeddings;
    p["short_factor"] = s.shortFactor;
    p["long_factor"] = s.longFactor;
    if (s.attentionFactor) p["attention_factor"] = *s.attentionFactor;
  }
  if (cfg.rotaryDim > 0) p["partial_rotary_factor"] = static_cast<double>(cfg.rotaryDim) / cfg.headDim;
  return p;
}

std::optional<int> firstTokenId(const json& j, const std::string& key, const JsonReader& r) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  const json& v = j.at(key);
  if (v.is_array()) {
    if (v.empty()) return std::nullopt;
    if (!v.at(0).is_number_integer()) r.fail(key, "must hold integers");
    return v.at(0).get<int>();
  }
  return r.requireInt(key);
}

}  // namespace detail

namespace {
using detail::firstTokenId;
using detail::readRope;
using detail::ropeParametersJson;

// What the reader does with each config.json field it does not use.
std::vector<std::pair<std::string, std::string>> unusedConfigFields(const json& j) {
  static const std::set<std::string> kUsed = {"model_type",
                                              "architectures",
                                              "hidden_act",
                                              "hidden_activation",
                                              "vocab_size",
                                              "hidden_size",
                                              "intermediate_size",
                                              "num_hidden_layers",
                                              "num_attention_heads",
                                              "num_key_value_heads",
                                              "head_dim",
                                              "max_position_embeddings",
                                              "rms_norm_eps",
                                              "tie_word_embeddings",
                                              "attention_bias",
                                              "mlp_bias",
                                              "use_sliding_window",
                                              "sliding_window",
                                              "rope_theta",
                                              "rope_scaling",
                                              "rope_parameters",
                                              "bos_token_id",
                                              "eos_token_id",
                                              "torch_dtype",
                                              "dtype",
                                              "latentlab_mla",
                                              "latentlab_latent",
                                              "original_max_position_embeddings",
                                              "quantization_config",
                                              "partial_rotary_factor",
                                              "no_rope_layers",
                                              "no_rope_layer_interval",
                                              "layer_types",
                                              "mha2mla",
                                              "RoPE",
                                              "SVD",
                                              "query_pre_attn_scalar",
                                              "final_logit_softcapping",
                                              "rope_local_base_freq",
                                              "sliding_window_pattern",
                                              "_sliding_window_pattern",
                                              "use_bidirectional_attention",
                                              "num_experts",
                                              "num_local_experts",
                                              "num_experts_per_tok",
                                              "moe_intermediate_size",
                                              "norm_topk_prob",
                                              "decoder_sparse_step",
                                              "mlp_only_layers"};
  static const std::map<std::string, std::string> kKnown = {
      {"transformers_version", "ignored (metadata)"},
      {"_name_or_path", "ignored (metadata)"},
      {"initializer_range", "ignored (initialisation only: the weights are loaded)"},
      {"pad_token_id", "kept for the saved config.json (padding is not used: batches are full windows)"},
      {"use_cache", "ignored (LatentLab keeps a KV or latent cache when decoding)"},
      {"attention_dropout", "ignored (no dropout: the papers' recipes train without it)"},
      {"pretraining_tp", "ignored (Llama-2's tensor-parallel numerics; the same function)"},
      {"max_window_layers", "ignored (used with use_sliding_window, which is refused)"},
      {"attn_logit_softcapping", "ignored (transformers' Gemma-3 attention does not apply it either)"},
      {"cache_implementation", "ignored (a generation setting of transformers)"},
      {"router_aux_loss_coef", "ignored (fine-tuning trains without the load-balancing loss)"},
      {"output_router_logits", "ignored (fine-tuning trains without the load-balancing loss)"},
      {"resid_pdrop", "ignored (no dropout: the papers' recipes train without it)"},
      {"embd_pdrop", "ignored (no dropout: the papers' recipes train without it)"},
      {"rope_interleave", "ignored"},
      {"output_attentions", "ignored"},
      {"output_hidden_states", "ignored"},
      {"return_dict", "ignored"},
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (kUsed.count(it.key())) continue;
    auto known = kKnown.find(it.key());
    out.emplace_back(it.key(), known != kKnown.end() ? known->second : "ignored (not a field LatentLab knows)");
  }
  return out;
}

MlaConversion readMla(const json& m, const std::string& source) {
  JsonReader r(m, source + " latentlab_mla", ErrorCode::BadModel);
  MlaConversion mla;
  mla.ropeStrategy = r.requireChoice<RopeStrategy>("rope_strategy");
  mla.ropePairs = r.requireInt("rope_pairs");
  mla.dKv = r.requireInt("d_kv");
  mla.svdMethod = r.optChoice<SvdMethod>("svd_method").value_or(SvdMethod::Joint);
  mla.twoNormScore = r.optChoice<TwoNormScore>("two_norm_score");
  if (!m.contains("pairs") || !m.at("pairs").is_array()) r.fail("pairs", "is missing");
  try {
    mla.pairs = m.at("pairs").get<std::vector<std::vector<std::vector<int>>>>();
  } catch (const json::exception&) {
    r.fail("pairs", "must be [layer][kv_head][pair] integers");
  }
  if (m.contains("layers")) {  // a hybrid model: these layers converted, the others original
    try {
      mla.layers = m.at("layers").get<std::vector<int>>();
    } catch (const json::exception&) {
      r.fail("layers", "must be a list of decoder layer indices");
    }
  }
  if (m.contains("d_kv_per_layer")) {  // a KV budget spread over the layers
    try {
      mla.layerDKv = m.at("d_kv_per_layer").get<std::vector<int>>();
    } catch (const json::exception&) {
      r.fail("d_kv_per_layer", "must be a list of integers, one per decoder layer");
    }
  }
  return mla;
}

const std::set<std::string> kLatentFields = {"kind",   "d_c",         "d_rope",       "d_nope",
                                             "d_v",    "q_lora_rank", "latent_heads", "branches",
                                             "scaled", "latent_norm", "rope_source",  "conversion"};

LatentAttention readLatent(const json& m, const std::string& source) {
  const std::string where = source + " latentlab_latent";
  if (!m.is_object()) throw Error(ErrorCode::BadModel, where + ": must be a JSON object");
  JsonReader r(m, where, ErrorCode::BadModel);
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!kLatentFields.count(it.key())) r.fail(it.key(), "is not a latent-attention field");
  }
  LatentAttention a;
  a.kind = r.requireChoice<LatentKind>("kind");
  a.dC = r.requireInt("d_c");
  a.dRope = r.requireInt("d_rope");
  a.dNope = r.requireInt("d_nope");
  a.dV = r.requireInt("d_v");
  a.qLoraRank = r.requireInt("q_lora_rank");
  a.latentHeads = r.requireInt("latent_heads");
  a.branches = r.optInt("branches", 1);
  if (!m.contains("scaled") || !m.at("scaled").is_boolean()) r.fail("scaled", "must be true or false");
  a.scaled = m.at("scaled").get<bool>();
  if (m.contains("latent_norm")) {
    if (!m.at("latent_norm").is_boolean()) r.fail("latent_norm", "must be true or false");
    a.latentNorm = m.at("latent_norm").get<bool>();
  }
  if (m.contains("rope_source")) {
    const json& rs = m.at("rope_source");
    JsonReader rr(rs, where + ".rope_source", ErrorCode::BadModel);
    if (!rs.is_object()) r.fail("rope_source", "must be an object {head_dim, pairs}");
    a.ropeSourceHeadDim = rr.requireInt("head_dim");
    try {
      a.ropeSourcePairs = rs.at("pairs").get<std::vector<int>>();
    } catch (const json::exception&) {
      rr.fail("pairs", "must be a list of frequency-pair indices");
    }
  }
  if (m.contains("conversion")) {
    const json& cv = m.at("conversion");
    if (!cv.is_object()) r.fail("conversion", "must be an object");
    JsonReader cr(cv, where + ".conversion", ErrorCode::BadModel);
    LatentConversion c;
    c.sourceKvHeads = cr.requireInt("source_kv_heads");
    c.freqFold = cr.optInt("freq_fold", 1);
    c.factorise = cr.optChoice<Factorisation>("factorise").value_or(Factorisation::Activations);
    a.conversion = c;
  }
  return a;
}

void validateLatent(const ModelConfig& c, const std::string& source) {
  const LatentAttention& a = *c.latent;
  auto bad = [&](const std::string& field, const std::string& problem) {
    throw Error(ErrorCode::BadModel, source + ": latentlab_latent." + field + " " + problem);
  };
  if (a.dC < 1) bad("d_c", "must be positive");
  if (a.dRope < 2 || a.dRope % 2 != 0) bad("d_rope", "must be a positive even number, got " + std::to_string(a.dRope));
  if (a.dNope < 1) bad("d_nope", "must be positive");
  if (a.dV < 1) bad("d_v", "must be positive");
  if (a.qLoraRank < 0) bad("q_lora_rank", "must be 0 (a plain q_proj) or positive");
  if (a.kind == LatentKind::Mla && (a.latentHeads != 1 || a.branches != 1))
    bad("latent_heads", "must be 1 (with 1 branch) for mla");
  if (a.kind == LatentKind::Gla && (a.latentHeads < 1 || a.branches != 1))
    bad("latent_heads", "must be >= 1 (with 1 branch) for gla");
  if (a.kind == LatentKind::Mlra && a.latentHeads != 4) bad("latent_heads", "must be 4 for mlra");
  if (a.kind == LatentKind::Mlra && a.branches != 2 && a.branches != 4) bad("branches", "must be 2 or 4 for mlra");
  if (a.dC % a.latentHeads != 0) {
    bad("d_c",
        "(" + std::to_string(a.dC) + ") is not divisible by latent_heads (" + std::to_string(a.latentHeads) + ")");
  }
  if (c.numHeads % a.latentsPerBranch() != 0) {
    bad("latent_heads", "(" + std::to_string(a.latentsPerBranch()) +
                            " per branch) does not divide num_attention_heads (" + std::to_string(c.numHeads) + ")");
  }
  if (c.attentionBias || c.oProjBias) bad("kind", "models carry no attention biases (set attention_bias false)");
  if (!a.ropeSourcePairs.empty() || a.ropeSourceHeadDim != 0) {
    if (a.ropeSourceHeadDim < 2 || a.ropeSourceHeadDim % 2 != 0)
      bad("rope_source.head_dim", "must be a positive even number");
    if (static_cast<int>(a.ropeSourcePairs.size()) * 2 != a.dRope) bad("rope_source.pairs", "must list d_rope/2 pairs");
    for (int p : a.ropeSourcePairs) {
      if (p < 0 || p >= a.ropeSourceHeadDim / 2) bad("rope_source.pairs", "has a pair index out of range");
    }
  }
  if (a.conversion && (a.conversion->sourceKvHeads < 1 || a.conversion->freqFold < 1)) {
    bad("conversion", "needs source_kv_heads and freq_fold of at least 1");
  }
  if (c.mla) bad("kind", "cannot be combined with latentlab_mla (an MHA2MLA conversion)");
  if (c.qkNorm || !c.nopeLayers.empty() || c.rotaryDim != 0 || c.slidingWindow) {
    bad("kind",
        "cannot be combined with QK norms, NoPE layers, partial rotary or sliding windows (a latent layer "
        "has its own RoPE key and attends to every token)");
  }
}

}  // namespace

std::string LatentAttention::name() const {
  switch (kind) {
    case LatentKind::Mla:
      return "mla";
    case LatentKind::Gla:
      return "gla-" + std::to_string(latentHeads);
    case LatentKind::Mlra:
      break;
  }
  return "mlra-" + std::to_string(branches);
}

double RopeScaling::attentionScaling() const {
  if (type == "longrope") {
    if (attentionFactor) return *attentionFactor;
    if (factor <= 1.0) return 1.0;
    return std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(originalMaxPositionEmbeddings)));
  }
  if (type != "yarn") return 1.0;
  if (attentionFactor) return *attentionFactor;
  auto mscaleOf = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  if (mscale && mscaleAllDim && *mscale != 0 && *mscaleAllDim != 0)
    return mscaleOf(factor, *mscale) / mscaleOf(factor, *mscaleAllDim);
  return mscaleOf(factor, 1.0);
}

std::string RopeScaling::describe() const {
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return std::string(buf);
  };
  if (type == "default") return "default";
  std::string out = type + " (factor " + num(factor);
  if (type == "llama3") {
    out += ", low_freq_factor " + num(lowFreqFactor) + ", high_freq_factor " + num(highFreqFactor) +
           ", original context " + std::to_string(originalMaxPositionEmbeddings);
  } else if (type == "yarn") {
    out += ", original context " + std::to_string(originalMaxPositionEmbeddings) + ", beta " + num(betaFast) + "/" +
           num(betaSlow) + ", attention factor " + num(attentionScaling());
  } else if (type == "dynamic") {
    out += " beyond the context";
  } else if (type == "longrope") {
    out += ", original context " + std::to_string(originalMaxPositionEmbeddings) +
           ", long factors past it, attention factor " + num(attentionScaling());
  }
  return out + ")";
}

double ModelConfig::softmaxScale(int dim) const {
  const double s = rotaryDim > 0 ? 1.0 : ropeScaling.attentionScaling();
  return s * s / std::sqrt(queryScalar ? *queryScalar : static_cast<double>(dim));
}

double ModelConfig::ropeTableScale() const {
  return rotaryDim > 0 ? ropeScaling.attentionScaling() : 1.0;
}

bool ModelConfig::usesRope(int layer) const {
  return !std::binary_search(nopeLayers.begin(), nopeLayers.end(), layer);
}

bool ModelConfig::sparseLayer(int layer) const {
  if (!moe || moe->experts < 1) return false;
  if (std::binary_search(moe->denseLayers.begin(), moe->denseLayers.end(), layer)) return false;
  return (layer + 1) % moe->sparseStep == 0;
}

int ModelConfig::windowOf(int layer) const {
  if (!slidingWindow) return 0;
  if (slidingLayers.empty() || std::binary_search(slidingLayers.begin(), slidingLayers.end(), layer))
    return *slidingWindow;
  return 0;
}

std::string ModelConfig::familyDescription() const {
  const detail::FamilyInfo* f = detail::findFamily(modelType);
  std::string family = modelType == "deepseek_v3" ? "DeepSeek-V3, dense" : f != nullptr ? f->name : "Llama";
  char theta[32];
  std::snprintf(theta, sizeof theta, "%.10g", ropeTheta);
  std::string out = family + " (" + architecture + "), RoPE " + ropeScaling.describe() + ", theta " + theta;
  if (slidingWindow) out += ", sliding window " + std::to_string(*slidingWindow);
  return out + detail::familyFeatures(*this);
}

void ModelConfig::validate(const std::string& source) const {
  auto bad = [&](const std::string& field, const std::string& problem) {
    throw Error(ErrorCode::BadModel, source + ": " + field + " " + problem);
  };
  if (vocabSize <= 0) bad("vocab_size", "must be positive");
  if (hiddenSize <= 0) bad("hidden_size", "must be positive");
  if (intermediateSize <= 0) bad("intermediate_size", "must be positive");
  if (numLayers <= 0) bad("num_hidden_layers", "must be positive");
  if (numHeads <= 0) bad("num_attention_heads", "must be positive");
  if (numKvHeads <= 0) bad("num_key_value_heads", "must be positive");
  if (headDim <= 0 || headDim % 2 != 0)
    bad("head_dim", "must be a positive even number, got " + std::to_string(headDim));
  if (numHeads % numKvHeads != 0) {
    bad("num_attention_heads", "(" + std::to_string(numHeads) + ") is not divisible by num_key_value_heads (" +
                                   std::to_string(numKvHeads) + ")");
  }
  if (maxPositionEmbeddings <= 0) bad("max_position_embeddings", "must be positive");
  if (rmsNormEps <= 0) bad("rms_norm_eps", "must be positive");
  if (ropeTheta <= 0) bad("rope_theta", "must be positive");
  if (rotaryDim < 0 || rotaryDim > headDim || rotaryDim % 2 != 0) {
    bad("partial_rotary_factor", "must leave an even number of rotating dims up to head_dim");
  }
  for (std::size_t i = 0; i < nopeLayers.size(); ++i) {
    if (nopeLayers[i] < 0 || nopeLayers[i] >= numLayers || (i > 0 && nopeLayers[i] <= nopeLayers[i - 1])) {
      bad("no_rope_layers", "must name distinct layers in [0, num_hidden_layers)");
    }
  }
  if (ropeScaling.type == "longrope") {
    const auto pairs = static_cast<std::size_t>(ropeDim() / 2);
    if (ropeScaling.shortFactor.size() != pairs || ropeScaling.longFactor.size() != pairs) {
      bad("rope_scaling", "longrope needs short_factor and long_factor of " + std::to_string(pairs) +
                              " entries (one per rotating frequency pair), got " +
                              std::to_string(ropeScaling.shortFactor.size()) + " and " +
                              std::to_string(ropeScaling.longFactor.size()));
    }
  }
  if (mla) {
    const int half = ropeDim() / 2;
    if (mla->ropePairs < 0 || mla->ropePairs > half) bad("latentlab_mla.rope_pairs", "must be in [0, rotating dims/2]");
    if (mla->dKv <= 0) bad("latentlab_mla.d_kv", "must be positive");
    const bool pending = mla->official && mla->pairs.empty();  // an official 2-norm checkpoint before loading
    if (!pending && static_cast<int>(mla->pairs.size()) != numLayers) {
      bad("latentlab_mla.pairs", "must have one entry per layer");
    }
    if (mla->layers) {
      for (std::size_t i = 0; i < mla->layers->size(); ++i) {
        const int l = (*mla->layers)[i];
        if (l < 0 || l >= numLayers) bad("latentlab_mla.layers", "has a layer out of range: " + std::to_string(l));
        if (i > 0 && l <= (*mla->layers)[i - 1]) bad("latentlab_mla.layers", "must be ascending, each layer once");
      }
    }
    if (!mla->layerDKv.empty()) {
      if (static_cast<int>(mla->layerDKv.size()) != numLayers) {
        bad("latentlab_mla.d_kv_per_layer",
            "must have one entry per decoder layer (" + std::to_string(numLayers) + ")");
      }
      int largest = 0;
      for (int l = 0; l < numLayers; ++l) {
        const int d = mla->layerDKv[static_cast<std::size_t>(l)];
        if (mla->converts(l) ? d <= 0 : d != 0) {
          bad("latentlab_mla.d_kv_per_layer",
              "layer " + std::to_string(l) +
                  (mla->converts(l) ? " is converted and needs a positive d_kv" : " is not converted and must have 0"));
        }
        largest = std::max(largest, d);
      }
      if (largest != mla->dKv) bad("latentlab_mla.d_kv", "must be the largest entry of d_kv_per_layer");
    }
    for (int l = 0; l < numLayers && !pending; ++l) {
      const auto& layer = mla->pairs[static_cast<std::size_t>(l)];
      if (static_cast<int>(layer.size()) != numKvHeads) bad("latentlab_mla.pairs", "must have one entry per KV head");
      // A NoPE layer keeps no pairs.
      const std::size_t kept = usesRope(l) ? static_cast<std::size_t>(mla->ropePairs) : 0;
      for (const auto& head : layer) {
        if (head.size() != kept) {
          bad("latentlab_mla.pairs",
              "must list rope_pairs pairs per head of a RoPE layer and none in a NoPE layer (layer " +
                  std::to_string(l) + ")");
        }
        for (int p : head)
          if (p < 0 || p >= half) bad("latentlab_mla.pairs", "has a pair index out of range");
      }
    }
  }
  if (latent) validateLatent(*this, source);
}

ModelConfig readHfConfig(const fs::path& configJson) {
  const std::string source = configJson.string();
  std::error_code ec;
  if (!fs::exists(configJson, ec)) {
    throw Error(ErrorCode::BadModel, source + ": config.json not found", "Is this a Hugging Face model folder?");
  }
  json j = parseJson(readTextFile(configJson), source, ErrorCode::BadModel);
  if (!j.is_object()) throw Error(ErrorCode::BadModel, source + ": must hold a JSON object");
  JsonReader r(j, source, ErrorCode::BadModel);

  ModelConfig cfg;
  cfg.modelType = r.requireString("model_type");
  if (cfg.modelType == "deepseek_v3") return detail::readDeepSeekV3Config(j, r, source);
  const detail::FamilyInfo* family = detail::findFamily(cfg.modelType);
  if (family == nullptr) {
    const std::string hint =
        cfg.modelType == "gemma3"
            ? "This is the multimodal Gemma-3 (vision tower included); LatentLab reads its text model, model_type "
              "gemma3_text (Gemma3ForCausalLM)."
            : "LatentLab reads Llama-family decoders (" + detail::supportedFamilyTypes() +
                  ") and dense DeepSeek-V3 (deepseek_v3).";
    throw Error(ErrorCode::Unsupported, source + ": model_type '" + cfg.modelType + "' is not supported", hint);
  }
  if (j.contains("architectures") && j.at("architectures").is_array() && !j.at("architectures").empty() &&
      j.at("architectures").at(0).is_string()) {
    cfg.architecture = j.at("architectures").at(0).get<std::string>();
  } else {
    cfg.architecture = family->architecture;
  }
  // transformers reads hidden_act (Gemma: hidden_activation) through ACT2FN.
  const std::string actField = r.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string act = r.optString(actField, "silu");
  if (act == "gelu_pytorch_tanh") {
    cfg.geluTanh = true;
  } else if (act != "silu") {
    throw Error(ErrorCode::Unsupported,
                source + ": " + actField + " '" + act + "' is not supported (silu, or gelu_pytorch_tanh)");
  }
  cfg.vocabSize = r.requireInt("vocab_size");
  cfg.hiddenSize = r.requireInt("hidden_size");
  cfg.intermediateSize = r.requireInt("intermediate_size");
  cfg.numLayers = r.requireInt("num_hidden_layers");
  // No model has more; a larger count would only allocate per-layer tables before any check.
  if (cfg.numLayers > 65536) r.fail("num_hidden_layers", "is " + std::to_string(cfg.numLayers) + ", more than 65536");
  cfg.numHeads = r.requireInt("num_attention_heads");
  cfg.numKvHeads = r.optInt("num_key_value_heads", cfg.numHeads);
  if (cfg.numHeads <= 0) r.fail("num_attention_heads", "must be positive");
  cfg.headDim = r.optInt("head_dim", cfg.hiddenSize / cfg.numHeads);
  cfg.maxPositionEmbeddings = r.optInt("max_position_embeddings", 2048);
  cfg.rmsNormEps = r.optDouble("rms_norm_eps", family->rmsNormEps);
  cfg.tieWordEmbeddings = r.optBool("tie_word_embeddings", family->tied);
  cfg.ropeTheta = family->ropeTheta;  // the family's default where config.json gives none
  cfg.mlpBias = r.optBool("mlp_bias", false);
  readRope(j, r, cfg);
  detail::readFamilyFields(j, r, cfg);
  cfg.bosTokenId = firstTokenId(j, "bos_token_id", r);
  cfg.eosTokenId = firstTokenId(j, "eos_token_id", r);
  cfg.padTokenId = firstTokenId(j, "pad_token_id", r);
  std::string dt = r.optString("torch_dtype", r.optString("dtype", "float32"));
  try {
    cfg.torchDType = parseDType(dt);
  } catch (const Error&) {
    r.fail("torch_dtype", "is not a float type: '" + dt + "'");
  }
  if (j.contains("latentlab_mla") && !j.at("latentlab_mla").is_null()) {
    cfg.mla = readMla(j.at("latentlab_mla"), source);
  }
  if (j.contains("latentlab_latent") && !j.at("latentlab_latent").is_null()) {
    cfg.latent = readLatent(j.at("latentlab_latent"), source);
  }
  if (!cfg.mla) detail::readOfficialMha2Mla(j, r, cfg);
  cfg.unusedFields = unusedConfigFields(j);
  if (j.contains("quantization_config") && !j.at("quantization_config").is_null()) {
    throw Error(ErrorCode::Unsupported, source + ": quantization_config: quantized checkpoints are not supported",
                "Use the model's full-precision (fp32/bf16/fp16) weights.");
  }
  if (!cfg.ropeScaling.isDefault() && cfg.latent && cfg.latent->ropeSourcePairs.empty()) {
    throw Error(ErrorCode::Unsupported,
                source + ": RoPE scaling on a from-scratch latent-attention model is not supported");
  }
  cfg.validate(source);
  return cfg;
}

void writeHfConfig(const ModelConfig& cfg, const fs::path& configJson) {
  if (cfg.modelType == "deepseek_v3") {
    atomicWriteText(configJson, detail::deepSeekV3ConfigJson(cfg).dump(2) + "\n");
    return;
  }
  json j;
  std::string arch = cfg.architecture;
  if (cfg.mla) arch = "LatentLabMlaForCausalLM";
  if (cfg.latent) arch = "LatentLabLatentForCausalLM";
  j["architectures"] = json::array({arch});
  j["model_type"] = cfg.modelType;
  j["vocab_size"] = cfg.vocabSize;
  j["hidden_size"] = cfg.hiddenSize;
  j["intermediate_size"] = cfg.intermediateSize;
  j["num_hidden_layers"] = cfg.numLayers;
  j["num_attention_heads"] = cfg.numHeads;
  j["num_key_value_heads"] = cfg.numKvHeads;
  j["head_dim"] = cfg.headDim;
  j["max_position_embeddings"] = cfg.maxPositionEmbeddings;
  j["rope_theta"] = cfg.ropeTheta;
  if (!cfg.ropeScaling.isDefault()) j["rope_parameters"] = ropeParametersJson(cfg);
  detail::writeFamilyFields(cfg, j);
  j["rms_norm_eps"] = cfg.rmsNormEps;
  j["tie_word_embeddings"] = cfg.tieWordEmbeddings;
  j["hidden_act"] = cfg.geluTanh ? "gelu_pytorch_tanh" : "silu";
  j["mlp_bias"] = cfg.mlpBias;
  j["bos_token_id"] = cfg.bosTokenId ? json(*cfg.bosTokenId) : json(nullptr);
  j["eos_token_id"] = cfg.eosTokenId ? json(*cfg.eosTokenId) : json(nullptr);
  // transformers builds the embedding with it (SmolLM3's and Phi-3's defaults lie past a small vocabulary).
  j["pad_token_id"] = cfg.padTokenId ? json(*cfg.padTokenId) : json(nullptr);
  static const char* names[] = {"float32", "float16", "bfloat16", "float64"};
  j["torch_dtype"] = names[static_cast<int>(cfg.torchDType)];
  if (cfg.mla) {
    json m;
    m["rope_strategy"] = choiceName(cfg.mla->ropeStrategy);
    m["rope_pairs"] = cfg.mla->ropePairs;
    m["d_kv"] = cfg.mla->dKv;
    m["svd_method"] = choiceName(cfg.mla->svdMethod);
    if (cfg.mla->twoNormScore) m["two_norm_score"] = choiceName(*cfg.mla->twoNormScore);
    m["pairs"] = cfg.mla->pairs;
    if (cfg.mla->layers) m["layers"] = *cfg.mla->layers;
    if (!cfg.mla->layerDKv.empty()) m["d_kv_per_layer"] = cfg.mla->layerDKv;
    j["latentlab_mla"] = m;
  }
  if (cfg.latent) {
    const LatentAttention& a = *cfg.latent;
    j["latentlab_latent"] = detail::latentDimensionsJson(a);
    if (!a.latentNorm) j["latentlab_latent"]["latent_norm"] = false;
    if (!a.ropeSourcePairs.empty()) {
      j["latentlab_latent"]["rope_source"] = {{"head_dim", a.ropeSourceHeadDim}, {"pairs", a.ropeSourcePairs}};
    }
    if (a.conversion) {
      j["latentlab_latent"]["conversion"] = {{"source_kv_heads", a.conversion->sourceKvHeads},
                                             {"freq_fold", a.conversion->freqFold},
                                             {"factorise", choiceName(a.conversion->factorise)}};
    }
  }
  atomicWriteText(configJson, j.dump(2) + "\n");
}

nlohmann::json detail::latentDimensionsJson(const LatentAttention& a) {
  return {{"kind", choiceName(a.kind)},
          {"d_c", a.dC},
          {"d_rope", a.dRope},
          {"d_nope", a.dNope},
          {"d_v", a.dV},
          {"q_lora_rank", a.qLoraRank},
          {"latent_heads", a.latentHeads},
          {"branches", a.branches},
          {"scaled", a.scaled}};
}

}  // namespace latentlab
