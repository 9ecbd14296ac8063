// The checkpoint keys and shapes a ModelConfig implies: the key table the
// loader checks every checkpoint against (and inspect uses without loading),
// and where each model parameter lies in it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/hf_checkpoint.h"
#include "latentlab/model_config.h"

namespace latentlab {

struct ExpectedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
};

// The checkpoint's tensors, in the family's layout (Phi-3: qkv_proj and
// gate_up_proj where the model has q/k/v_proj and gate/up_proj).
std::vector<ExpectedTensor> expectedTensors(const ModelConfig& cfg);

// Where a model parameter lies in the checkpoint: one whole tensor, or the
// rows of one or more tensors stacked in order, each part a tensor's rows
// [rowBegin, rowBegin + rows) (Phi-3's fused projections) or the rows listed in
// `gather` (an official MHA2MLA q_proj in its own row order).
struct TensorPart {
  TensorPart(std::string tensor, std::int64_t begin = 0, std::int64_t count = -1)
      : name(std::move(tensor)), rowBegin(begin), rows(count) {}
  std::string name;
  std::int64_t rowBegin = 0;
  std::int64_t rows = -1;            // -1: every row
  std::vector<std::int64_t> gather;  // when set: these rows, in this order
  std::int64_t select = -1;          // >= 0: entry `select` of a 3-D tensor's first dim, before the rows
};
struct TensorSource {
  std::vector<TensorPart> parts;
  bool whole() const {
    return parts.size() == 1 && parts[0].rows < 0 && parts[0].gather.empty() && parts[0].select < 0;
  }
  // One part that is a row block of a fused tensor (what saving fuses back).
  bool fusedBlock() const {
    return parts.size() == 1 && parts[0].rows >= 0 && parts[0].gather.empty() && parts[0].select < 0;
  }
};
TensorSource checkpointSource(const ModelConfig& cfg, const std::string& parameter);

// Keys that HF checkpoints may carry but no model uses (e.g. RoPE caches).
bool isIgnorableKey(const std::string& name);

// Checks the checkpoint against expectedTensors(cfg) (names, shapes, float
// dtypes) without copying weights; throws Error(BadCheckpoint) naming the
// folder and the tensor. Returns the unused keys.
std::vector<std::string> checkCheckpoint(const HfCheckpoint& ckpt);

}  // namespace latentlab
