// Pieces of the config.json reader and writer shared by its files.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/json_util.h"
#include "latentlab/model_config.h"

namespace latentlab::detail {

// rope_theta and the RoPE scaling, from rope_parameters or rope_scaling.
void readRope(const nlohmann::json& j, const JsonReader& r, ModelConfig& cfg);
// transformers 5's rope_parameters of a scaled RoPE.
nlohmann::json ropeParametersJson(const ModelConfig& cfg);
// A latent attention's kind and dimensions as config.json's latentlab_latent
// block writes them (the run notes write the same object).
nlohmann::json latentDimensionsJson(const LatentAttention& a);
// A token id field that may be a list (the first entry is used).
std::optional<int> firstTokenId(const nlohmann::json& j, const std::string& key, const JsonReader& r);

// A Llama-family model type LatentLab reads (family_config.cpp).
struct FamilyInfo {
  const char* modelType;     // HF model_type: "qwen3"
  const char* name;          // "Qwen3"
  const char* architecture;  // transformers' class when config.json names none
  // transformers' defaults for fields config.json may leave out.
  bool tied = false;  // tie_word_embeddings
  double ropeTheta = 10000.0;
  double rmsNormEps = 1e-6;
};
const FamilyInfo* findFamily(const std::string& modelType);  // null when not supported
std::string supportedFamilyTypes();                          // "llama, mistral, ..."
// partial_rotary_factor of `r` (top level or inside the RoPE parameters) into cfg.rotaryDim.
void readPartialRotary(const JsonReader& r, ModelConfig& cfg);
// The fields in which cfg.modelType's family differs from Llama (biases,
// windows, QK norms, NoPE layers, fused projections), after the shape and RoPE.
void readFamilyFields(const nlohmann::json& j, const JsonReader& r, ModelConfig& cfg);
void writeFamilyFields(const ModelConfig& cfg, nlohmann::json& j);
// ", QK norm (...), 9 of 36 layers without RoPE (...)": the layer options in words.
std::string familyFeatures(const ModelConfig& cfg);

// The official MHA2MLA code's block ("mha2mla", or "RoPE" and "SVD") into
// cfg.mla with cfg.mla->official set (official_mha2mla.cpp); nothing when the
// config has neither (or marks a baseline fine-tune).
void readOfficialMha2Mla(const nlohmann::json& j, const JsonReader& r, ModelConfig& cfg);

// A dense DeepSeek-V3 config.json (model_type deepseek_v3) as a latent model
// in DeepSeek's layout (docs/conversion.md, "Reading DeepSeek-V3 folders").
ModelConfig readDeepSeekV3Config(const nlohmann::json& j, const JsonReader& r, const std::string& source);
// The config.json of such a model, as transformers' DeepseekV3Config reads it.
nlohmann::json deepSeekV3ConfigJson(const ModelConfig& cfg);

}  // namespace latentlab::detail
