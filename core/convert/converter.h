// In-memory MHA2MLA conversion of a loaded CausalLm: validation, pair
// selection, SVD factorisation, and the converted model (cfg.mla set).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "convert/calibration_stats.h"
#include "convert/rope_selection.h"
#include "latentlab/kv_budget.h"
#include "model/llama.h"

namespace latentlab {

struct ConversionOptions {
  RopeStrategy rope = RopeStrategy::High;
  int ropePairs = 0;  // r; 0 = defaultRopePairs(d_h); ignored for Full
  int dKv = 0;        // latent dims per KV head (per factor for split)
  SvdMethod svd = SvdMethod::Joint;
  TwoNormScore twoNormScore = TwoNormScore::Product;
  bool activations = false;  // factorise to minimise the error on calibration activations (docs/conversion.md)
  // The layers to convert, ascending; absent: every layer (the others keep
  // their original attention: a hybrid model).
  std::optional<std::vector<int>> layers;
  // A KV budget spread over the layers (resolveKvBudget's limits;
  // budgetBytes 0: none). convertModel then sizes each layer's latent from
  // its spectrum (allocateKvBudget) and dKv is not used.
  KvBudgetLimits kvBudget;
  // d_kv per decoder layer (0 for an unconverted one); empty: dKv everywhere.
  std::vector<int> layerDKv;
};

struct ConversionStats {
  PairSelection pairs;
  std::vector<double> reconstructionError;  // per layer, of the weights
  std::vector<double> activationError;      // per layer, on the calibration activations (with calibration)
  std::int64_t calibrationTokens = 0;
  std::optional<KvAllocation> allocation;  // with a KV budget: the per-layer d_kv and what each keeps
  double calibrateSeconds = 0.0, selectSeconds = 0.0, factoriseSeconds = 0.0;
};

// The KV settings of the options (for checkKvSettings / computeKvBudget).
KvSettings kvSettings(const ConversionOptions& opts);
// r after defaults (d_h/2 for Full).
int effectiveRopePairs(const ModelConfig& cfg, const ConversionOptions& opts);
// Throws Error(BadInput) when the options are impossible for `cfg` (r out of
// range, S_uniform with r not dividing d_h/2, d_kv above the available rank,
// an already converted model, S_2-norm or activation-aware factorisation
// without calibration data).
void validateConversion(const ModelConfig& cfg, const ConversionOptions& opts, bool haveCalibration);

// The config of the converted model: cfg with the latentlab_mla block.
ModelConfig convertedConfig(const ModelConfig& cfg, const ConversionOptions& opts, const PairSelection& pairs);

// A model of `cfg` on base's device and dtype with every parameter outside
// self_attn copied from `base` by name (the start of every conversion).
std::shared_ptr<CausalLm> modelWithBaseOutsideAttention(CausalLm& base, const ModelConfig& cfg);

// Builds the converted model from `base` (same device and dtype) with the
// given pairs: q_proj rows reordered per head (RoPE dims first), k_rope_proj,
// the factors and biases, everything else copied. `inputs` (optional unless
// opts.activations) gives the activation errors and activation-aware factors.
std::shared_ptr<CausalLm> buildConvertedModel(CausalLm& base, const ConversionOptions& opts, const PairSelection& pairs,
                                              ProgressSink& progress, const CancelToken& cancel,
                                              std::vector<double>* reconstructionError = nullptr,
                                              const LayerInputStats* inputs = nullptr,
                                              std::vector<double>* activationError = nullptr);

// What each further step of d_kv keeps in each layer, for allocateKvBudget:
// gains[l][k] is the share of layer l's squared singular values that the
// values n_kv k .. n_kv (k+1) - 1 hold, of its [W_k_nope; W_v] (SVD_split: of
// each factor, added), whitened by the layer's input statistics when
// opts.activations; empty for an unconverted layer.
std::vector<std::vector<double>> latentStepGains(CausalLm& base, const ConversionOptions& opts,
                                                 const PairSelection& pairs, const LayerInputStats* inputs);

// The per-layer d_kv of opts.kvBudget for this model: calibration and pair
// selection as convertModel does them, then the spectra; nothing is built.
KvAllocation allocateKvBudget(CausalLm& base, const ConversionOptions& opts,
                              const std::vector<torch::Tensor>& calibration, ProgressSink& progress,
                              const CancelToken& cancel);

// Validates, selects the pairs (calibrating on `calibration`, each (B, T)
// int64 ids, for S_2-norm) and builds the converted model. With a KV budget
// and `uniformAtBudget`, the conversion with the budget's uniform d_kv is
// built beside it (the reference the allocation is measured against).
std::shared_ptr<CausalLm> convertModel(CausalLm& base, const ConversionOptions& opts,
                                       const std::vector<torch::Tensor>& calibration, ProgressSink& progress,
                                       const CancelToken& cancel, ConversionStats* stats = nullptr,
                                       std::shared_ptr<CausalLm>* uniformAtBudget = nullptr);
std::shared_ptr<CausalLm> convertModel(CausalLm& base, const ConversionOptions& opts,
                                       const std::vector<torch::Tensor>& calibration = {});

}  // namespace latentlab
