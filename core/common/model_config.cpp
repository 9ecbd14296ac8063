// HF config.json <-> ModelConfig, validation and parameter counts.
#include "latentlab/model_config.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/file_util.h"
#include "common/json_util.h"
#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F64: return "F64";
  }
  return "?";
}

std::size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F64: return 8;
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
  throw Error(ErrorCode::BadInput, "unknown dtype '" + name + "'",
              "Use one of f32, bf16, f16, f64.");
}

namespace {

const std::set<std::string> kSupportedModelTypes = {"llama", "qwen2", "mistral"};

void readRope(const json& j, const JsonReader& r, ModelConfig& cfg) {
  cfg.ropeTheta = r.optDouble("rope_theta", 10000.0);
  // transformers >= 5 nests RoPE settings under rope_parameters.
  const json* scaling = nullptr;
  if (j.contains("rope_parameters") && j.at("rope_parameters").is_object()) {
    const json& rp = j.at("rope_parameters");
    JsonReader rr(rp, r.source() + " rope_parameters", ErrorCode::BadModel);
    cfg.ropeTheta = rr.optDouble("rope_theta", cfg.ropeTheta);
    scaling = &rp;
  }
  if (j.contains("rope_scaling") && j.at("rope_scaling").is_object()) scaling = &j.at("rope_scaling");
  if (scaling != nullptr) {
    std::string type = "default";
    if (scaling->contains("rope_type") && scaling->at("rope_type").is_string())
      type = scaling->at("rope_type").get<std::string>();
    else if (scaling->contains("type") && scaling->at("type").is_string())
      type = scaling->at("type").get<std::string>();
    if (type != "default") {
      throw Error(ErrorCode::Unsupported,
                  r.source() + ": RoPE scaling type '" + type + "' is not supported",
                  "LatentLab supports plain RoPE (rope_type 'default').");
    }
  }
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

MlaConversion readMla(const json& m, const std::string& source) {
  JsonReader r(m, source + " latentlab_mla", ErrorCode::BadModel);
  MlaConversion mla;
  mla.ropeStrategy = r.requireString("rope_strategy");
  mla.ropePairs = r.requireInt("rope_pairs");
  mla.dKv = r.requireInt("d_kv");
  mla.svdMethod = r.optString("svd_method", "joint");
  mla.twoNormScore = r.optString("two_norm_score", "");
  if (mla.svdMethod != "joint" && mla.svdMethod != "split") r.fail("svd_method", "must be 'joint' or 'split'");
  if (!m.contains("pairs") || !m.at("pairs").is_array()) r.fail("pairs", "is missing");
  try {
    mla.pairs = m.at("pairs").get<std::vector<std::vector<std::vector<int>>>>();
  } catch (const json::exception&) {
    r.fail("pairs", "must be [layer][kv_head][pair] integers");
  }
  return mla;
}

const std::set<std::string> kLatentFields = {"kind",   "d_c",          "d_rope",       "d_nope", "d_v",
                                             "q_lora_rank", "latent_heads", "branches", "scaled"};

LatentAttention readLatent(const json& m, const std::string& source) {
  const std::string where = source + " latentlab_latent";
  if (!m.is_object()) throw Error(ErrorCode::BadModel, where + ": must be a JSON object");
  JsonReader r(m, where, ErrorCode::BadModel);
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!kLatentFields.count(it.key())) r.fail(it.key(), "is not a latent-attention field");
  }
  LatentAttention a;
  a.kind = r.requireString("kind");
  a.dC = r.requireInt("d_c");
  a.dRope = r.requireInt("d_rope");
  a.dNope = r.requireInt("d_nope");
  a.dV = r.requireInt("d_v");
  a.qLoraRank = r.requireInt("q_lora_rank");
  a.latentHeads = r.requireInt("latent_heads");
  a.branches = r.optInt("branches", 1);
  if (!m.contains("scaled") || !m.at("scaled").is_boolean()) r.fail("scaled", "must be true or false");
  a.scaled = m.at("scaled").get<bool>();
  return a;
}

void validateLatent(const ModelConfig& c, const std::string& source) {
  const LatentAttention& a = *c.latent;
  auto bad = [&](const std::string& field, const std::string& problem) {
    throw Error(ErrorCode::BadModel, source + ": latentlab_latent." + field + " " + problem);
  };
  if (a.kind != "mla" && a.kind != "gla" && a.kind != "mlra") bad("kind", "must be mla, gla or mlra, got '" + a.kind + "'");
  if (a.dC < 1) bad("d_c", "must be positive");
  if (a.dRope < 2 || a.dRope % 2 != 0) bad("d_rope", "must be a positive even number, got " + std::to_string(a.dRope));
  if (a.dNope < 1) bad("d_nope", "must be positive");
  if (a.dV < 1) bad("d_v", "must be positive");
  if (a.qLoraRank < 1) bad("q_lora_rank", "must be positive");
  if (a.kind == "mla" && (a.latentHeads != 1 || a.branches != 1)) bad("latent_heads", "must be 1 (with 1 branch) for mla");
  if (a.kind == "gla" && (a.latentHeads < 1 || a.branches != 1)) bad("latent_heads", "must be >= 1 (with 1 branch) for gla");
  if (a.kind == "mlra" && a.latentHeads != 4) bad("latent_heads", "must be 4 for mlra");
  if (a.kind == "mlra" && a.branches != 2 && a.branches != 4) bad("branches", "must be 2 or 4 for mlra");
  if (a.dC % a.latentHeads != 0) {
    bad("d_c", "(" + std::to_string(a.dC) + ") is not divisible by latent_heads (" + std::to_string(a.latentHeads) + ")");
  }
  if (c.numHeads % a.latentsPerBranch() != 0) {
    bad("latent_heads", "(" + std::to_string(a.latentsPerBranch()) + " per branch) does not divide num_attention_heads (" +
                            std::to_string(c.numHeads) + ")");
  }
  if (c.attentionBias || c.oProjBias) bad("kind", "models carry no attention biases (set attention_bias false)");
  if (c.mla) bad("kind", "cannot be combined with latentlab_mla (an MHA2MLA conversion)");
}

} // namespace

std::string LatentAttention::name() const {
  if (kind == "mla") return "mla";
  if (kind == "gla") return "gla-" + std::to_string(latentHeads);
  return kind + "-" + std::to_string(branches);
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
  if (headDim <= 0 || headDim % 2 != 0) bad("head_dim", "must be a positive even number, got " + std::to_string(headDim));
  if (numHeads % numKvHeads != 0) {
    bad("num_attention_heads", "(" + std::to_string(numHeads) +
        ") is not divisible by num_key_value_heads (" + std::to_string(numKvHeads) + ")");
  }
  if (rmsNormEps <= 0) bad("rms_norm_eps", "must be positive");
  if (ropeTheta <= 0) bad("rope_theta", "must be positive");
  if (mla) {
    const int half = headDim / 2;
    if (mla->ropePairs < 0 || mla->ropePairs > half) bad("latentlab_mla.rope_pairs", "must be in [0, head_dim/2]");
    if (mla->dKv <= 0) bad("latentlab_mla.d_kv", "must be positive");
    if (static_cast<int>(mla->pairs.size()) != numLayers) bad("latentlab_mla.pairs", "must have one entry per layer");
    for (const auto& layer : mla->pairs) {
      if (static_cast<int>(layer.size()) != numKvHeads) bad("latentlab_mla.pairs", "must have one entry per KV head");
      for (const auto& head : layer) {
        if (static_cast<int>(head.size()) != mla->ropePairs) bad("latentlab_mla.pairs", "must list rope_pairs pairs per head");
        for (int p : head) if (p < 0 || p >= half) bad("latentlab_mla.pairs", "has a pair index out of range");
      }
    }
  }
  if (latent) validateLatent(*this, source);
}

ModelConfig readHfConfig(const fs::path& configJson) {
  const std::string source = configJson.string();
  std::error_code ec;
  if (!fs::exists(configJson, ec)) {
    throw Error(ErrorCode::BadModel, source + ": config.json not found",
                "Is this a Hugging Face model folder?");
  }
  json j = parseJson(readTextFile(configJson), source, ErrorCode::BadModel);
  if (!j.is_object()) throw Error(ErrorCode::BadModel, source + ": must hold a JSON object");
  JsonReader r(j, source, ErrorCode::BadModel);

  ModelConfig cfg;
  cfg.modelType = r.requireString("model_type");
  if (!kSupportedModelTypes.count(cfg.modelType)) {
    throw Error(ErrorCode::Unsupported,
                source + ": model_type '" + cfg.modelType + "' is not supported",
                "LatentLab reads Llama-family decoders: llama, qwen2, mistral.");
  }
  if (j.contains("architectures") && j.at("architectures").is_array() && !j.at("architectures").empty() &&
      j.at("architectures").at(0).is_string()) {
    cfg.architecture = j.at("architectures").at(0).get<std::string>();
  } else {
    cfg.architecture = cfg.modelType == "qwen2" ? "Qwen2ForCausalLM"
                       : cfg.modelType == "mistral" ? "MistralForCausalLM" : "LlamaForCausalLM";
  }
  const std::string act = r.optString("hidden_act", "silu");
  if (act != "silu") {
    throw Error(ErrorCode::Unsupported, source + ": hidden_act '" + act + "' is not supported (silu only)");
  }
  cfg.vocabSize = r.requireInt("vocab_size");
  cfg.hiddenSize = r.requireInt("hidden_size");
  cfg.intermediateSize = r.requireInt("intermediate_size");
  cfg.numLayers = r.requireInt("num_hidden_layers");
  cfg.numHeads = r.requireInt("num_attention_heads");
  cfg.numKvHeads = r.optInt("num_key_value_heads", cfg.numHeads);
  if (cfg.numHeads <= 0) r.fail("num_attention_heads", "must be positive");
  cfg.headDim = r.optInt("head_dim", cfg.hiddenSize / cfg.numHeads);
  cfg.maxPositionEmbeddings = r.optInt("max_position_embeddings", 2048);
  cfg.rmsNormEps = r.optDouble("rms_norm_eps", 1e-6);
  cfg.tieWordEmbeddings = r.optBool("tie_word_embeddings", false);
  if (cfg.modelType == "qwen2") {
    cfg.attentionBias = true;   // Qwen2: q/k/v carry biases, o_proj does not
    cfg.oProjBias = false;
    if (r.optBool("use_sliding_window", false)) {
      throw Error(ErrorCode::Unsupported, source + ": sliding-window attention is not supported");
    }
  } else {
    cfg.attentionBias = r.optBool("attention_bias", false);
    cfg.oProjBias = cfg.attentionBias;
  }
  if (cfg.modelType == "mistral" && r.has("sliding_window")) {
    int window = r.requireInt("sliding_window");
    if (window < cfg.maxPositionEmbeddings) {
      throw Error(ErrorCode::Unsupported, source + ": sliding_window " + std::to_string(window) +
                  " is shorter than the context; sliding-window attention is not supported");
    }
  }
  cfg.mlpBias = r.optBool("mlp_bias", false);
  readRope(j, r, cfg);
  cfg.bosTokenId = firstTokenId(j, "bos_token_id", r);
  cfg.eosTokenId = firstTokenId(j, "eos_token_id", r);
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
  cfg.validate(source);
  return cfg;
}

void writeHfConfig(const ModelConfig& cfg, const fs::path& configJson) {
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
  j["rms_norm_eps"] = cfg.rmsNormEps;
  j["tie_word_embeddings"] = cfg.tieWordEmbeddings;
  j["hidden_act"] = "silu";
  if (cfg.modelType != "qwen2") j["attention_bias"] = cfg.attentionBias;
  j["mlp_bias"] = cfg.mlpBias;
  j["bos_token_id"] = cfg.bosTokenId ? json(*cfg.bosTokenId) : json(nullptr);
  j["eos_token_id"] = cfg.eosTokenId ? json(*cfg.eosTokenId) : json(nullptr);
  static const char* names[] = {"float32", "float16", "bfloat16", "float64"};
  j["torch_dtype"] = names[static_cast<int>(cfg.torchDType)];
  if (cfg.mla) {
    json m;
    m["rope_strategy"] = cfg.mla->ropeStrategy;
    m["rope_pairs"] = cfg.mla->ropePairs;
    m["d_kv"] = cfg.mla->dKv;
    m["svd_method"] = cfg.mla->svdMethod;
    if (!cfg.mla->twoNormScore.empty()) m["two_norm_score"] = cfg.mla->twoNormScore;
    m["pairs"] = cfg.mla->pairs;
    j["latentlab_mla"] = m;
  }
  if (cfg.latent) {
    const LatentAttention& a = *cfg.latent;
    j["latentlab_latent"] = {{"kind", a.kind},       {"d_c", a.dC},
                             {"d_rope", a.dRope},    {"d_nope", a.dNope},
                             {"d_v", a.dV},          {"q_lora_rank", a.qLoraRank},
                             {"latent_heads", a.latentHeads}, {"branches", a.branches},
                             {"scaled", a.scaled}};
  }
  atomicWriteText(configJson, j.dump(2) + "\n");
}

std::int64_t attentionParametersPerLayer(const ModelConfig& c) {
  const std::int64_t d = c.hiddenSize, dh = c.headDim, nh = c.numHeads, nkv = c.numKvHeads;
  if (c.latent) {
    // q_a_proj + q_a_layernorm + q_b_proj, kv_a_proj_with_mqa + kv_a_layernorm,
    // kv_b_proj (each latent head to its G heads' [k_nope; v]), o_proj.
    const LatentAttention& a = *c.latent;
    const std::int64_t q = a.qLoraRank, qk = a.dNope + a.dRope, dc = a.dC;
    const std::int64_t G = nh / a.latentsPerBranch();
    std::int64_t attn = d * q + q + q * nh * qk;
    attn += d * (dc + a.dRope) + dc;
    attn += static_cast<std::int64_t>(a.latentHeads) * G * (a.dNope + a.dV) * a.latentDim();
    attn += nh * a.dV * d;
    return attn;
  }
  std::int64_t attn = d * nh * dh + nh * dh * d;            // q, o
  if (c.attentionBias) attn += nh * dh;
  if (c.oProjBias) attn += d;
  if (!c.mla) {
    attn += 2 * d * nkv * dh;
    if (c.attentionBias) attn += 2 * nkv * dh;
  } else {
    const std::int64_t r2 = 2 * c.mla->ropePairs, nope = dh - r2, dkv = c.mla->dKv;
    attn += d * nkv * r2;                                    // k_rope_proj
    if (c.attentionBias) attn += nkv * r2 + nkv * nope + nkv * dh;  // rope, up-k, up-v biases
    if (c.mla->svdMethod == "split") {
      attn += 2 * d * nkv * dkv;                             // k_down, v_down
      attn += nkv * nope * nkv * dkv + nkv * dh * nkv * dkv; // k_up, v_up
    } else {
      attn += d * nkv * dkv;                                 // kv_down
      attn += (nkv * nope + nkv * dh) * nkv * dkv;           // kv_up
    }
  }
  return attn;
}

std::int64_t countParameters(const ModelConfig& c) {
  const std::int64_t d = c.hiddenSize, I = c.intermediateSize, V = c.vocabSize;
  std::int64_t mlp = 3 * d * I + (c.mlpBias ? 2 * I + d : 0);
  std::int64_t layer = attentionParametersPerLayer(c) + mlp + 2 * d;
  std::int64_t total = V * d + c.numLayers * layer + d;
  if (!c.tieWordEmbeddings) total += V * d;
  return total;
}

namespace {
int roundToMultiple(double x, int multiple) {
  return static_cast<int>(std::llround(x / multiple)) * multiple;
}
} // namespace

int defaultQLoraRank(int hidden, const std::string& kind, int multiple) {
  // The paper's ranks at d = 3072: MLA 1536 (d/2), GLA-2 and MLRA-2 1024 (d/3).
  const double share = kind == "mla" ? 2.0 : 3.0;
  return std::max(multiple, roundToMultiple(hidden / share, multiple));
}

ModelConfig matchParameters(ModelConfig cfg, std::int64_t target, int multiple) {
  if (multiple < 1) throw Error(ErrorCode::BadInput, "parameter matching: the MLP width multiple must be positive");
  if (cfg.latent && cfg.latent->qLoraRank == 0) {
    cfg.latent->qLoraRank = defaultQLoraRank(cfg.hiddenSize, cfg.latent->kind, multiple);
  }
  // countParameters is affine in the MLP width I: total(I) = total(0) + L * per.
  ModelConfig zero = cfg;
  zero.intermediateSize = 0;
  const std::int64_t fixed = countParameters(zero);
  const std::int64_t per = static_cast<std::int64_t>(cfg.numLayers) * (3LL * cfg.hiddenSize + (cfg.mlpBias ? 2 : 0));
  const double width = static_cast<double>(target - fixed) / static_cast<double>(per);
  const int I = roundToMultiple(width, multiple);
  if (I < multiple) {
    throw Error(ErrorCode::BadInput,
                "parameter matching: a target of " + std::to_string(target) + " parameters leaves no room for an MLP (" +
                    std::to_string(fixed) + " parameters without it)",
                "Raise the target or shrink the attention (d_c, q_lora_rank).");
  }
  cfg.intermediateSize = I;
  return cfg;
}

} // namespace latentlab
