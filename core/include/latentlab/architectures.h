// Built-in model shapes: the papers' checkpoints (random weights, for sizing
// and benchmarks) and the small demo models LatentLab pre-trains itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "latentlab/model_config.h"

namespace latentlab {

std::vector<std::string> builtinArchitectureNames();
// Throws Error(BadInput) listing the known names.
ModelConfig builtinArchitecture(const std::string& name, int vocabSize = 0);

// Knobs of an attention variant trained from scratch (algorithms.md §4); 0 means
// "derived from the base shape" (d_h = the base's head dim).
struct AttentionOptions {
  int gqaGroup = 0;                    // gqa: query heads per KV head; 0 = the base's own, 4 when it is MHA
  int dC = 0;                          // KV latent dims; 0 = 4*d_h (512 at d_h 128, as DeepSeek and MLRA)
  int dRope = 0;                       // shared RoPE key dims d_R; 0 = d_h/2
  int dNope = 0;                       // NoPE dims per head; 0 = d_h
  int dV = 0;                          // value dims per head; 0 = d_h
  int qLoraRank = 0;                   // 0 = the paper's rule: MLA d/2, GLA and MLRA d/3
  bool scaled = true;                  // MLRA paper's scale factors (false: the no-scale ablation)
  std::string match = "architecture";  // MLP width matched to: architecture (the base's total) | target | none
  std::int64_t targetParameters = 0;   // total parameters for match "target"
  int matchMultiple = 8;               // the matched MLP width is a multiple of this
};

// Attention names a RunSpec accepts: mha, gqa, mla, gla-<k>, mlra-2, mlra-4.
bool isAttentionVariant(const std::string& attention);
// `base` with its attention replaced by `attention` and its MLP width matched
// per `o.match`. Throws Error(BadSpec) naming `where` + ".attention" or
// `where` + ".attention_options.<field>" when the shape makes it impossible.
ModelConfig attentionVariant(const ModelConfig& base, const std::string& attention, const AttentionOptions& o,
                             const std::string& where);

}  // namespace latentlab
