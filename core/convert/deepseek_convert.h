// The DeepSeek-target conversion (docs/conversion.md): RoRoPE onto one shared
// RoPE key, key/value balancing, a joint latent from calibration activations
// (or the weights), and a latent RMSNorm set from calibration statistics. The
// result is a from-scratch-style latent model (cfg.latent, kind mla, plain
// q_proj) that is DeepSeek-V3 attention, so everything done to it afterwards
// keeps it exportable.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "convert/calibration_stats.h"
#include "latentlab/kv_budget.h"
#include "model/llama.h"

namespace latentlab {

struct DeepSeekOptions {
  int ropePairs = 0;        // r for the default d_R = 2 r n_kv (0 = d_h/16)
  int ropeWidth = 0;        // d_R; 0 = the default above
  int freqFold = 1;         // FreqFold
  int dKv = 0;              // latent = n_kv * d_kv dims (kv_lora_rank)
  bool activations = true;  // latent from calibration activations (false: from the weights)
  bool balance = true;      // key/value norm balancing before the latent
  bool latentNorm = true;   // false only to check exactness before the norm is introduced
};

KvSettings kvSettings(const DeepSeekOptions& opts);

// Per-layer figures of the conversion, for the report.
struct DeepSeekLayerStats {
  double ropeEnergyKept = 0.0;     // share of the keys' energy (on calibration) carried by the RoPE key
  double balance = 1.0;            // alpha: K_nope scaled by it, Q_nope by 1/alpha
  double latentWeightError = 0.0;  // ||W - up down||_F / ||W||_F of [alpha K_res; V]
  double latentActError = 0.0;     // the same on the calibration activations
  double normWeight = 0.0;         // kv_a_layernorm's weight (every dim)
};

// Throws Error(BadInput) when the options are impossible for `cfg`.
void validateDeepSeekConversion(const ModelConfig& cfg, const DeepSeekOptions& opts);

// The converted model's config (cfg.latent set; num_key_value_heads = n_h).
ModelConfig deepSeekConfig(const ModelConfig& cfg, const DeepSeekOptions& opts);

// Builds the converted model from `base` with the statistics of its attention
// inputs (same device; computed in float64, stored in base's dtype).
std::shared_ptr<CausalLm> convertToDeepSeek(CausalLm& base, const DeepSeekOptions& opts, const LayerInputStats& stats,
                                            ProgressSink& progress, const CancelToken& cancel,
                                            std::vector<DeepSeekLayerStats>* layerStats = nullptr);

}  // namespace latentlab
