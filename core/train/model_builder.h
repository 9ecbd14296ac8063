// Builds the model a RunSpec trains: a fresh built-in architecture, a loaded
// checkpoint, or a loaded checkpoint converted to MLA.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "data/token_shard.h"
#include "latentlab/progress.h"
#include "latentlab/run_spec.h"
#include "model/llama.h"

namespace latentlab {

// `notes` receives what the build did (conversion report, parameter counts).
std::shared_ptr<CausalLm> buildModelForRun(const RunSpec& spec, std::uint32_t vocabSize, const TokenShard& calibration,
                                           torch::Device device, torch::ScalarType dtype, ProgressSink& progress,
                                           const CancelToken& cancel, nlohmann::json& notes);

// normal(0, std) weights, unit norms, zero biases; zeroOutput zero-inits
// o_proj and down_proj (the MLRA recipe).
void initializeWeights(CausalLm& model, double std, bool zeroOutput);

}  // namespace latentlab
