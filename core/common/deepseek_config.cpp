// Dense DeepSeek-V3 config.json, read as a latent model in DeepSeek's layout
// and written back as transformers' DeepseekV3Config reads it.
#include <set>

#include "common/model_config_internal.h"
#include "latentlab/error.h"

namespace latentlab::detail {
using json = nlohmann::json;

namespace {
// transformers' DeepseekV3RMSNorm epsilon for q_a_layernorm and kv_a_layernorm.
constexpr double kLatentNormEps = 1e-6;

const std::set<std::string> kDeepSeekUsed = {"model_type",
                                             "architectures",
                                             "hidden_act",
                                             "vocab_size",
                                             "hidden_size",
                                             "intermediate_size",
                                             "num_hidden_layers",
                                             "num_attention_heads",
                                             "num_key_value_heads",
                                             "max_position_embeddings",
                                             "rms_norm_eps",
                                             "tie_word_embeddings",
                                             "attention_bias",
                                             "rope_theta",
                                             "rope_scaling",
                                             "rope_parameters",
                                             "rope_interleave",
                                             "bos_token_id",
                                             "eos_token_id",
                                             "torch_dtype",
                                             "dtype",
                                             "kv_lora_rank",
                                             "q_lora_rank",
                                             "qk_rope_head_dim",
                                             "qk_nope_head_dim",
                                             "v_head_dim",
                                             "first_k_dense_replace",
                                             "quantization_config"};
const std::set<std::string> kExpertFields = {"moe_intermediate_size",
                                             "n_routed_experts",
                                             "n_shared_experts",
                                             "num_experts_per_tok",
                                             "n_group",
                                             "topk_group",
                                             "routed_scaling_factor",
                                             "norm_topk_prob",
                                             "topk_method",
                                             "scoring_func",
                                             "moe_layer_freq",
                                             "num_nextn_predict_layers",
                                             "num_mtp_layers",
                                             "ep_size",
                                             "aux_loss_alpha",
                                             "seq_aux",
                                             "output_router_logits",
                                             "router_aux_loss_coef"};
}  // namespace

ModelConfig readDeepSeekV3Config(const json& j, const JsonReader& r, const std::string& source) {
  ModelConfig cfg;
  cfg.modelType = "deepseek_v3";
  cfg.architecture = "DeepseekV3ForCausalLM";
  if (r.optString("hidden_act", "silu") != "silu") r.fail("hidden_act", "must be silu");
  cfg.vocabSize = r.requireInt("vocab_size");
  cfg.hiddenSize = r.requireInt("hidden_size");
  cfg.intermediateSize = r.requireInt("intermediate_size");
  cfg.numLayers = r.requireInt("num_hidden_layers");
  cfg.numHeads = r.requireInt("num_attention_heads");
  if (r.optInt("num_key_value_heads", cfg.numHeads) != cfg.numHeads) {
    r.fail("num_key_value_heads", "must equal num_attention_heads (one latent serves every head)");
  }
  cfg.numKvHeads = cfg.numHeads;
  // transformers' default is 3: the first three layers dense, the rest experts.
  if (r.optInt("first_k_dense_replace", 3) < cfg.numLayers) {
    throw Error(
        ErrorCode::Unsupported,
        source + ": first_k_dense_replace is below num_hidden_layers: mixture-of-experts layers are not supported",
        "LatentLab reads dense DeepSeek-V3 models (every layer a plain MLP), such as its own exports.");
  }
  if (r.optBool("attention_bias", false))
    r.fail("attention_bias", "must be false (DeepSeek-V3 attention without biases)");
  cfg.maxPositionEmbeddings = r.optInt("max_position_embeddings", 4096);
  cfg.rmsNormEps = r.optDouble("rms_norm_eps", 1e-6);
  cfg.tieWordEmbeddings = r.optBool("tie_word_embeddings", false);
  readRope(j, r, cfg);
  const std::string& type = cfg.ropeScaling.type;
  if (type != "default" && type != "linear" && type != "llama3") {
    throw Error(ErrorCode::Unsupported, source + ": DeepSeek-V3 with " + type + " RoPE scaling is not supported",
                "Supported: default, linear and llama3 scaling.");
  }
  cfg.bosTokenId = firstTokenId(j, "bos_token_id", r);
  cfg.eosTokenId = firstTokenId(j, "eos_token_id", r);
  const std::string dt = r.optString("torch_dtype", r.optString("dtype", "bfloat16"));
  try {
    cfg.torchDType = parseDType(dt);
  } catch (const Error&) {
    r.fail("torch_dtype", "is not a float type: '" + dt + "'");
  }
  if (j.contains("quantization_config") && !j.at("quantization_config").is_null()) {
    throw Error(ErrorCode::Unsupported, source + ": quantization_config: quantized checkpoints are not supported",
                "Use the model's full-precision (fp32/bf16/fp16) weights.");
  }
  LatentAttention a;
  a.kind = LatentKind::Mla;
  a.dC = r.requireInt("kv_lora_rank");
  a.dRope = r.requireInt("qk_rope_head_dim");
  a.dNope = r.requireInt("qk_nope_head_dim");
  a.dV = r.requireInt("v_head_dim");
  a.qLoraRank = j.contains("q_lora_rank") && !j.at("q_lora_rank").is_null() ? r.requireInt("q_lora_rank") : 0;
  if (j.contains("q_lora_rank") && !j.at("q_lora_rank").is_null() && a.qLoraRank < 1) {
    r.fail("q_lora_rank", "must be positive or null");
  }
  a.latentHeads = 1;
  a.branches = 1;
  a.scaled = false;
  a.latentNorm = true;
  a.ropeInterleaved = r.optBool("rope_interleave", true);
  a.latentNormEps = kLatentNormEps;
  cfg.latent = a;
  cfg.headDim = a.dV % 2 == 0 ? a.dV : a.dV + 1;  // the per-head width the KV saving compares against
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (kDeepSeekUsed.count(it.key())) continue;
    cfg.unusedFields.emplace_back(
        it.key(), kExpertFields.count(it.key()) ? "ignored (expert settings: every layer is dense)" : "ignored");
  }
  cfg.validate(source);
  return cfg;
}

json deepSeekV3ConfigJson(const ModelConfig& cfg) {
  if (!cfg.latent || cfg.latent->kind != LatentKind::Mla || !cfg.latent->ropeInterleaved || cfg.latent->scaled ||
      !cfg.latent->latentNorm || cfg.latent->latentNormEps != kLatentNormEps) {
    throw Error(ErrorCode::Internal, "a DeepSeek-V3 config.json for a model not in DeepSeek's layout");
  }
  const LatentAttention& a = *cfg.latent;
  json c;
  c["architectures"] = json::array({"DeepseekV3ForCausalLM"});
  c["model_type"] = "deepseek_v3";
  c["vocab_size"] = cfg.vocabSize;
  c["hidden_size"] = cfg.hiddenSize;
  c["intermediate_size"] = cfg.intermediateSize;
  // Dense: every layer below first_k_dense_replace has the plain MLP; the
  // expert fields are required but unused.
  c["first_k_dense_replace"] = cfg.numLayers;
  c["moe_intermediate_size"] = cfg.intermediateSize;
  c["n_routed_experts"] = 1;
  c["n_shared_experts"] = 1;
  c["num_experts_per_tok"] = 1;
  c["n_group"] = 1;
  c["topk_group"] = 1;
  c["routed_scaling_factor"] = 1.0;
  c["norm_topk_prob"] = true;
  c["num_hidden_layers"] = cfg.numLayers;
  c["num_attention_heads"] = cfg.numHeads;
  c["num_key_value_heads"] = cfg.numHeads;
  c["kv_lora_rank"] = a.dC;
  c["q_lora_rank"] = a.qLoraRank > 0 ? json(a.qLoraRank) : json(nullptr);
  c["qk_rope_head_dim"] = a.dRope;
  c["qk_nope_head_dim"] = a.dNope;
  c["v_head_dim"] = a.dV;
  c["hidden_act"] = "silu";
  c["max_position_embeddings"] = cfg.maxPositionEmbeddings;
  c["rms_norm_eps"] = cfg.rmsNormEps;
  c["rope_parameters"] = cfg.ropeScaling.isDefault() ? json{{"rope_type", "default"}, {"rope_theta", cfg.ropeTheta}}
                                                     : ropeParametersJson(cfg);
  c["rope_interleave"] = true;
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["tie_word_embeddings"] = cfg.tieWordEmbeddings;
  if (cfg.bosTokenId) c["bos_token_id"] = *cfg.bosTokenId;
  if (cfg.eosTokenId) c["eos_token_id"] = *cfg.eosTokenId;
  static const char* names[] = {"float32", "float16", "bfloat16", "float64"};
  c["dtype"] = names[static_cast<int>(cfg.torchDType)];
  c["use_cache"] = true;
  return c;
}

}  // namespace latentlab::detail
