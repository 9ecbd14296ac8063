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
// A token id field that may be a list (the first entry is used).
std::optional<int> firstTokenId(const nlohmann::json& j, const std::string& key, const JsonReader& r);

// A dense DeepSeek-V3 config.json (model_type deepseek_v3) as a latent model
// in DeepSeek's layout (docs/conversion.md, "Reading DeepSeek-V3 folders").
ModelConfig readDeepSeekV3Config(const nlohmann::json& j, const JsonReader& r, const std::string& source);
// The config.json of such a model, as transformers' DeepseekV3Config reads it.
nlohmann::json deepSeekV3ConfigJson(const ModelConfig& cfg);

}  // namespace latentlab::detail
