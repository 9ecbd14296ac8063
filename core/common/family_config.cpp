// The model families LatentLab reads from config.json: one table of what each
// family is called, and the few config fields in which each differs from
// Llama, read into the layer options of ModelConfig and written back as the
// family's own config.json (docs/families.md).
#include <algorithm>
#include <set>

#include "common/model_config_internal.h"
#include "latentlab/error.h"

namespace latentlab::detail {
using json = nlohmann::json;

namespace {

const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> kFamilies = {
      {"llama", "Llama", "LlamaForCausalLM"},       {"mistral", "Mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2", "Qwen2ForCausalLM"},       {"qwen3", "Qwen3", "Qwen3ForCausalLM"},
      {"smollm3", "SmolLM3", "SmolLM3ForCausalLM"}, {"phi3", "Phi-3", "Phi3ForCausalLM"},
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
  if (type == "qwen2" || type == "qwen3" || type == "smollm3") refuseSlidingLayers(j, r);
  if (type == "mistral" || type == "phi3") readWindow(r, cfg);
  if (type == "smollm3") readNopeLayers(j, r, cfg);
  if (type == "phi3") {
    cfg.fusedProjections = true;
    if (cfg.attentionBias || r.optBool("mlp_bias", false)) r.fail("attention_bias", "must be false for Phi-3");
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
  if (type == "qwen2" || type == "qwen3" || type == "smollm3") {
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
  return out;
}

}  // namespace latentlab::detail
