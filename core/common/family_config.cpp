// The model families LatentLab reads from config.json: one table of what each
// family is called, and the few config fields in which each differs from
// Llama, read into the layer options of ModelConfig and written back as the
// family's own config.json (docs/families.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/model_config_internal.h"
#include "latentlab/error.h"

namespace latentlab::detail {
using json = nlohmann::json;

namespace {

const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> kFamilies = {
      {"llama", "Llama", "LlamaForCausalLM"},
      {"mistral", "Mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2", "Qwen2ForCausalLM"},
      {"qwen3", "Qwen3", "Qwen3ForCausalLM"},
      {"smollm3", "SmolLM3", "SmolLM3ForCausalLM", /*tied=*/true, /*ropeTheta=*/2000000.0},
      {"phi3", "Phi-3", "Phi3ForCausalLM", /*tied=*/false, /*ropeTheta=*/10000.0, /*rmsNormEps=*/1e-5},
      {"gemma3_text", "Gemma-3", "Gemma3ForCausalLM", /*tied=*/true, /*ropeTheta=*/1000000.0},
      {"qwen3_moe", "Qwen3-MoE", "Qwen3MoeForCausalLM"},
  };
  return kFamilies;
}

// A sliding window as Mistral and Phi-3 declare it: full attention equals the
// window's while a sequence fits in it, so runs and evals longer than the
// window are refused (CausalLm::hidden).
void readWindow(const JsonReader& r, ModelConfig& cfg) {
  if (!r.has("sliding_window")) return;
  const int window = r.requireInt("sliding_window");
  if (window < 1) r.fail("sliding_window", "must be positive or null");
  if (window < cfg.maxPositionEmbeddings) cfg.slidingWindow = window;
}

// Qwen2/Qwen3/SmolLM3 switch windows on with use_sliding_window; their
// layer_types then name sliding layers. Both are refused: every layer here is
// full attention.
void refuseSlidingLayers(const json& j, const JsonReader& r) {
  if (r.optBool("use_sliding_window", false)) {
    throw Error(ErrorCode::Unsupported, r.source() + ": use_sliding_window: sliding-window attention is not supported",
                "Set use_sliding_window to false: the model then attends to the whole sequence, as it was trained.");
  }
  if (!j.contains("layer_types") || j.at("layer_types").is_null()) return;
  if (!j.at("layer_types").is_array()) r.fail("layer_types", "must be a list");
  for (const auto& t : j.at("layer_types")) {
    if (!t.is_string() || t.get<std::string>() != "full_attention") {
      r.fail("layer_types", "holds " + t.dump() + "; only full_attention layers are supported");
    }
  }
}

// SmolLM3's no_rope_layers: one entry per layer, 1 where the layer applies
// RoPE and 0 where it does not; absent, transformers derives it from
// no_rope_layer_interval (every interval-th layer without RoPE).
void readNopeLayers(const json& j, const JsonReader& r, ModelConfig& cfg) {
  cfg.nopeLayers.clear();
  if (j.contains("no_rope_layers") && !j.at("no_rope_layers").is_null()) {
    const json& list = j.at("no_rope_layers");
    if (!list.is_array() || static_cast<int>(list.size()) != cfg.numLayers) {
      r.fail("no_rope_layers", "must list one 0 or 1 per layer (" + std::to_string(cfg.numLayers) + " layers)");
    }
    for (int l = 0; l < cfg.numLayers; ++l) {
      const json& v = list.at(static_cast<std::size_t>(l));
      if (!v.is_number_integer() || (v.get<int>() != 0 && v.get<int>() != 1)) {
        r.fail("no_rope_layers", "entry " + std::to_string(l) + " is " + v.dump() + "; each must be 0 (no RoPE) or 1");
      }
      if (v.get<int>() == 0) cfg.nopeLayers.push_back(l);
    }
    return;
  }
  const int interval = r.optInt("no_rope_layer_interval", 4);
  if (interval < 1) r.fail("no_rope_layer_interval", "must be positive");
  for (int l = 0; l < cfg.numLayers; ++l) {
    if ((l + 1) % interval == 0) cfg.nopeLayers.push_back(l);
  }
}

// Gemma-3 (text): QK norms and every norm (1 + w) in fp32, the sandwich of
// four norms per layer, embeddings times sqrt(d), GeGLU, the softmax scale
// query_pre_attn_scalar^-1/2, windowed layers (layer_types, else every layer
// but each sliding_window_pattern-th) at their own RoPE base.
void readGemma3(const json& j, const JsonReader& r, ModelConfig& cfg) {
  if (r.optBool("use_bidirectional_attention", false)) {
    r.fail("use_bidirectional_attention", "is true: bidirectional attention (an embedding model) is not supported");
  }
  if (!cfg.geluTanh) r.fail("hidden_activation", "must be gelu_pytorch_tanh for Gemma-3");
  cfg.qkNorm = true;
  cfg.normPlusOne = true;
  cfg.sandwichNorms = true;
  cfg.scaleEmbeddings = true;
  cfg.queryScalar = r.optDouble("query_pre_attn_scalar", 256.0);
  if (!(*cfg.queryScalar > 0)) r.fail("query_pre_attn_scalar", "must be positive");
  if (j.contains("final_logit_softcapping") && !j.at("final_logit_softcapping").is_null()) {
    cfg.finalLogitSoftcap = r.requireDouble("final_logit_softcapping");
    if (!(*cfg.finalLogitSoftcap > 0)) r.fail("final_logit_softcapping", "must be positive or null");
  }
  // null: transformers gives the sliding layers no window at all.
  const bool noWindow = j.contains("sliding_window") && j.at("sliding_window").is_null();
  const int window = r.optInt("sliding_window", 4096);
  if (window < 1) r.fail("sliding_window", "must be positive or null");
  if (!noWindow) cfg.slidingWindow = window;
  cfg.slidingLayers.clear();
  if (j.contains("layer_types") && !j.at("layer_types").is_null()) {
    const json& types = j.at("layer_types");
    if (!types.is_array() || static_cast<int>(types.size()) != cfg.numLayers) {
      r.fail("layer_types", "must name one type per layer (" + std::to_string(cfg.numLayers) + " layers)");
    }
    for (int l = 0; l < cfg.numLayers; ++l) {
      const json& t = types.at(static_cast<std::size_t>(l));
      const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
      if (type == "sliding_attention")
        cfg.slidingLayers.push_back(l);
      else if (type != "full_attention")
        r.fail("layer_types", "holds '" + type + "'");
    }
  } else {
    const int pattern = r.optInt("sliding_window_pattern", r.optInt("_sliding_window_pattern", 6));
    if (pattern < 1) r.fail("sliding_window_pattern", "must be positive");
    for (int l = 0; l < cfg.numLayers; ++l) {
      if ((l + 1) % pattern != 0) cfg.slidingLayers.push_back(l);
    }
  }
  if (cfg.slidingLayers.empty() || noWindow) {  // every layer full attention
    cfg.slidingWindow.reset();
    cfg.slidingLayers.clear();
  }
  // The windowed layers' base: rope_parameters.sliding_attention (plain RoPE
  // only), else rope_local_base_freq; RoPE scaling is the full layers' alone.
  double local = r.optDouble("rope_local_base_freq", 10000.0);
  if (j.contains("rope_parameters") && j.at("rope_parameters").is_object() &&
      j.at("rope_parameters").contains("sliding_attention")) {
    JsonReader lr(j.at("rope_parameters").at("sliding_attention"), r.source() + " rope_parameters.sliding_attention",
                  ErrorCode::BadModel);
    const std::string type = lr.optString("rope_type", "default");
    if (type != "default") lr.fail("rope_type", "is '" + type + "'; the windowed layers' RoPE must be plain");
    local = lr.optDouble("rope_theta", local);
  }
  if (!(local > 0)) r.fail("rope_local_base_freq", "must be positive");
  cfg.localRopeTheta = local;
}

// Qwen3-MoE: Qwen3's attention and a sparse MLP in the layers it names.
void readQwen3Moe(const json& j, const JsonReader& r, ModelConfig& cfg) {
  MoeConfig m;
  const char* expertsField =
      r.has("num_experts") ? "num_experts" : "num_local_experts";  // transformers 5 writes the latter
  m.experts = r.requireInt(expertsField);
  m.topK = r.requireInt("num_experts_per_tok");
  m.intermediate = r.requireInt("moe_intermediate_size");
  m.normTopK = r.optBool("norm_topk_prob", false);
  m.sparseStep = r.optInt("decoder_sparse_step", 1);
  if (m.experts < 1) r.fail(expertsField, "must be positive");
  if (m.topK < 1 || m.topK > m.experts) {
    r.fail("num_experts_per_tok", "must be in [1, " + std::to_string(m.experts) + "] (the experts there are)");
  }
  if (m.intermediate < 1) r.fail("moe_intermediate_size", "must be positive");
  if (m.sparseStep < 1) r.fail("decoder_sparse_step", "must be positive");
  if (j.contains("mlp_only_layers") && !j.at("mlp_only_layers").is_null()) {
    const json& list = j.at("mlp_only_layers");
    if (!list.is_array()) r.fail("mlp_only_layers", "must be a list of layer indices");
    for (const auto& v : list) {
      if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() >= cfg.numLayers) {
        r.fail("mlp_only_layers", "holds " + v.dump() + ", not a layer index");
      }
      m.denseLayers.push_back(v.get<int>());
    }
    std::sort(m.denseLayers.begin(), m.denseLayers.end());
    m.denseLayers.erase(std::unique(m.denseLayers.begin(), m.denseLayers.end()), m.denseLayers.end());
  }
  cfg.moe = m;
  cfg.qkNorm = true;
}

}  // namespace

const FamilyInfo* findFamily(const std::string& modelType) {
  for (const auto& f : families()) {
    if (modelType == f.modelType) return &f;
  }
  return nullptr;
}

std::string supportedFamilyTypes() {
  std::string out;
  for (const auto& f : families()) out += std::string(out.empty() ? "" : ", ") + f.modelType;
  return out;
}

void readFamilyFields(const json& j, const JsonReader& r, ModelConfig& cfg) {
  const std::string& type = cfg.modelType;
  cfg.attentionBias = r.optBool("attention_bias", false);
  cfg.oProjBias = cfg.attentionBias;
  if (type == "qwen2") {
    cfg.attentionBias = true;  // Qwen2: q/k/v carry biases, o_proj does not
    cfg.oProjBias = false;
  }
  if (type == "qwen3") {
    cfg.qkNorm = true;  // q_norm, k_norm over each head before RoPE
    cfg.oProjBias = cfg.attentionBias;
  }
  if (type == "qwen2" || type == "qwen3" || type == "smollm3" || type == "qwen3_moe") refuseSlidingLayers(j, r);
  if (type == "qwen3_moe") readQwen3Moe(j, r, cfg);
  if (type == "mistral" || type == "phi3") readWindow(r, cfg);
  if (type == "gemma3_text") readGemma3(j, r, cfg);
  if (type == "smollm3") readNopeLayers(j, r, cfg);
  if (type == "phi3") {
    cfg.fusedProjections = true;
    if (cfg.attentionBias) r.fail("attention_bias", "must be false for Phi-3 (its fused projections have no bias)");
    if (cfg.mlpBias) r.fail("mlp_bias", "must be false for Phi-3 (its fused projections have no bias)");
    const std::string& rope = cfg.ropeScaling.type;
    if (rope != "default" && rope != "longrope") {
      r.fail("rope_scaling", "is '" + rope + "'; Phi-3 uses default RoPE or longrope");
    }
  }
  if (cfg.rotaryDim != 0 && type != "phi3") {
    r.fail("partial_rotary_factor", std::string("is below 1, which only Phi-3 models use: a ") +
                                        findFamily(type)->name + " layer rotates every head dim");
  }
  if (cfg.ropeScaling.type == "longrope" && type != "phi3") {
    r.fail("rope_scaling",
           "longrope is Phi-3's RoPE variant; a " + std::string(findFamily(type)->name) + " model does not use it");
  }
}

void writeFamilyFields(const ModelConfig& cfg, json& j) {
  const std::string& type = cfg.modelType;
  if (type != "qwen2") j["attention_bias"] = cfg.attentionBias;
  if (type == "qwen2" || type == "qwen3" || type == "smollm3" || type == "qwen3_moe") {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
  }
  if (type == "mistral" || type == "phi3")
    j["sliding_window"] = cfg.slidingWindow ? json(*cfg.slidingWindow) : json(nullptr);
  if (type == "smollm3") {
    json list = json::array();
    for (int l = 0; l < cfg.numLayers; ++l) list.push_back(cfg.usesRope(l) ? 1 : 0);
    j["no_rope_layers"] = list;
  }
  if (cfg.rotaryDim > 0) j["partial_rotary_factor"] = static_cast<double>(cfg.rotaryDim) / cfg.headDim;
  if (cfg.moe) {
    j["num_experts"] = cfg.moe->experts;
    j["num_experts_per_tok"] = cfg.moe->topK;
    j["moe_intermediate_size"] = cfg.moe->intermediate;
    j["norm_topk_prob"] = cfg.moe->normTopK;
    j["decoder_sparse_step"] = cfg.moe->sparseStep;
    j["mlp_only_layers"] = cfg.moe->denseLayers;
    j["output_router_logits"] = false;
  }
  if (type == "gemma3_text") {
    j.erase("hidden_act");
    j["hidden_activation"] = "gelu_pytorch_tanh";
    const double scalar = cfg.queryScalar ? *cfg.queryScalar : 256.0;  // transformers wants an integer
    j["query_pre_attn_scalar"] = scalar == std::floor(scalar) ? json(static_cast<int>(scalar)) : json(scalar);
    j["final_logit_softcapping"] = cfg.finalLogitSoftcap ? json(*cfg.finalLogitSoftcap) : json(nullptr);
    j["attn_logit_softcapping"] = nullptr;
    j["use_bidirectional_attention"] = false;
    j["sliding_window"] = cfg.slidingWindow ? *cfg.slidingWindow : cfg.maxPositionEmbeddings;
    json types = json::array();
    for (int l = 0; l < cfg.numLayers; ++l)
      types.push_back(cfg.windowOf(l) > 0 ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
    // RoPE per layer type, as transformers 5 writes it.
    json full = cfg.ropeScaling.isDefault() ? json{{"rope_type", "default"}, {"rope_theta", cfg.ropeTheta}}
                                            : ropeParametersJson(cfg);
    j["rope_parameters"] = {
        {"full_attention", full},
        {"sliding_attention",
         {{"rope_type", "default"}, {"rope_theta", cfg.localRopeTheta ? *cfg.localRopeTheta : 10000.0}}}};
    j.erase("rope_theta");
  }
  if (cfg.ropeScaling.type == "longrope") {
    j["original_max_position_embeddings"] = cfg.ropeScaling.originalMaxPositionEmbeddings;
  }
}

std::string familyFeatures(const ModelConfig& cfg) {
  std::string out;
  auto add = [&](const std::string& s) { out += ", " + s; };
  if (cfg.qkNorm) add("QK norm (q_norm, k_norm per head before RoPE)");
  if (!cfg.nopeLayers.empty()) {
    std::string layers;
    for (int l : cfg.nopeLayers) layers += (layers.empty() ? "" : " ") + std::to_string(l);
    add(std::to_string(cfg.nopeLayers.size()) + " of " + std::to_string(cfg.numLayers) + " layers without RoPE (" +
        layers + ")");
  }
  if (cfg.rotaryDim > 0) {
    add("RoPE on " + std::to_string(cfg.rotaryDim) + " of " + std::to_string(cfg.headDim) + " head dims");
  }
  if (cfg.fusedProjections) add("fused qkv_proj and gate_up_proj (split in the model)");
  if (cfg.normPlusOne) add("norms x/rms * (1 + w) in fp32, four per layer");
  if (cfg.scaleEmbeddings) add("embeddings x sqrt(hidden)");
  if (cfg.geluTanh) add("GeGLU (gelu, tanh)");
  if (cfg.queryScalar) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "softmax scale 1/sqrt(%g)", *cfg.queryScalar);
    add(buf);
  }
  if (!cfg.slidingLayers.empty()) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%zu of %d layers windowed, RoPE base %g there", cfg.slidingLayers.size(),
                  cfg.numLayers, cfg.localRopeTheta ? *cfg.localRopeTheta : cfg.ropeTheta);
    add(buf);
  }
  if (cfg.finalLogitSoftcap) add("logits soft-capped at " + std::to_string(*cfg.finalLogitSoftcap));
  if (cfg.moe) {
    int sparse = 0;
    for (int l = 0; l < cfg.numLayers; ++l) sparse += cfg.sparseLayer(l) ? 1 : 0;
    add("mixture of experts: " + std::to_string(cfg.moe->topK) + " of " + std::to_string(cfg.moe->experts) +
        " experts of width " + std::to_string(cfg.moe->intermediate) + " per token in " + std::to_string(sparse) +
        " of " + std::to_string(cfg.numLayers) + " layers" + (cfg.moe->normTopK ? ", weights renormalised" : ""));
  }
  return out;
}

}  // namespace latentlab::detail
