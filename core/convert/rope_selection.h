// Partial-RoPE pair selection of MHA2MLA (algorithms.md §2.1): the static
// strategies S_high / S_low / S_uniform / full, and S_2-norm from calibration.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "convert/calibration_stats.h"
#include "latentlab/progress.h"
#include "latentlab/vocabulary.h"
#include "model/llama.h"

namespace latentlab {

// RopeStrategy and TwoNormScore are in latentlab/vocabulary.h with their names.
// "high", "low", "uniform", "2-norm", "full" (and aliases); throws Error naming `field`.
RopeStrategy parseRopeStrategy(const std::string& name, const std::string& field = "rope strategy");
const char* ropeStrategyName(RopeStrategy s);
TwoNormScore parseTwoNormScore(const std::string& name, const std::string& field = "two-norm score");
const char* twoNormScoreName(TwoNormScore s);

// Kept pairs [layer][kvHead][i], ascending.
using PairSelection = std::vector<std::vector<std::vector<int>>>;

// Mean 2-norm of every RoPE frequency pair of the pre-RoPE queries and keys,
// per layer and head: pair k is dims (k, k + d_rot/2) of a head (rotate_half;
// d_rot = ropeDim(), d_h but for a partially rotating head). Zero in NoPE layers.
struct PairNorms {
  torch::Tensor query;      // (L, n_h, d_rot/2) float64
  torch::Tensor key;        // (L, n_kv, d_rot/2) float64
  std::int64_t tokens = 0;  // tokens averaged over
};

// Runs the original model layer by layer over `batches` (each (B, T) int64
// ids) and averages the pair norms of q = q_proj(h), k = k_proj(h) at each
// attention input h = input_layernorm(x) (after q_norm / k_norm with QK norms). Progress and cancel between batches.
// With `inputs`, the same pass also accumulates each layer's input second
// moments there (calibration_stats.h), so a conversion reads its data once.
PairNorms calibratePairNorms(CausalLm& model, const std::vector<torch::Tensor>& batches, ProgressSink& progress,
                             const CancelToken& cancel, LayerInputStats* inputs = nullptr);

// S_2-norm scores (L, n_kv, d_h/2): query norms summed within each KV group,
// combined with the key norms by product or sum.
torch::Tensor twoNormScores(const PairNorms& norms, int kvHeads, TwoNormScore score);

// The kept pairs for every (layer, KV head). r = ropePairs (ignored for Full,
// which keeps all d_rot/2); none in a NoPE layer. TwoNorm needs `norms`; the static strategies give
// every layer and head the same list. Throws Error(BadInput) for an impossible r.
PairSelection selectRopePairs(const ModelConfig& cfg, RopeStrategy strategy, int ropePairs,
                              const PairNorms* norms = nullptr, TwoNormScore score = TwoNormScore::Product);

}  // namespace latentlab
