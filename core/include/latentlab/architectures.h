// Built-in model shapes: the papers' checkpoints (random weights, for sizing
// and benchmarks) and the small demo models LatentLab pre-trains itself.
#pragma once

#include <string>
#include <vector>

#include "latentlab/model_config.h"

namespace latentlab {

std::vector<std::string> builtinArchitectureNames();
// Throws Error(BadInput) listing the known names.
ModelConfig builtinArchitecture(const std::string& name, int vocabSize = 0);

} // namespace latentlab
