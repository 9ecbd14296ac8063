// Whether a model's attention can be written in DeepSeek-V3's layout, and the
// RoPE base its shared key needs there (docs/conversion.md, "Export"). Torch-free:
// the workbench asks before it offers the export.
#pragma once

#include <optional>
#include <string>

#include "latentlab/model_config.h"

namespace latentlab {

// The RoPE base the exported head needs (into *theta), or why there is none.
std::optional<std::string> exportedRopeTheta(const ModelConfig& cfg, double* theta);

}  // namespace latentlab
