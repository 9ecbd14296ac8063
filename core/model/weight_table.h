// The checkpoint keys and shapes a ModelConfig implies: the key table the
// loader checks every checkpoint against (and inspect uses without loading).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "latentlab/model_config.h"

namespace latentlab {

struct ExpectedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
};

std::vector<ExpectedTensor> expectedTensors(const ModelConfig& cfg);

// Keys that HF checkpoints may carry but no model uses (e.g. RoPE caches).
bool isIgnorableKey(const std::string& name);

} // namespace latentlab
