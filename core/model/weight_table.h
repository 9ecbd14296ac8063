// The checkpoint keys and shapes a ModelConfig implies: the key table the
// loader checks every checkpoint against (and inspect uses without loading),
// and where each model parameter lies in it.
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

// The checkpoint's tensors, in the family's layout (Phi-3: qkv_proj and
// gate_up_proj where the model has q/k/v_proj and gate/up_proj).
std::vector<ExpectedTensor> expectedTensors(const ModelConfig& cfg);

// Where a model parameter lies in the checkpoint: a whole tensor, or rows
// [rowBegin, rowBegin + rows) of a fused one.
struct TensorSource {
  std::string name;
  std::int64_t rowBegin = 0;
  std::int64_t rows = -1;  // -1: the whole tensor
  bool fused() const { return rows >= 0; }
};
TensorSource checkpointSource(const ModelConfig& cfg, const std::string& parameter);

// Keys that HF checkpoints may carry but no model uses (e.g. RoPE caches).
bool isIgnorableKey(const std::string& name);

} // namespace latentlab
