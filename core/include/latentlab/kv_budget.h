// KV-cache size per token for an original, MHA2MLA-converted or from-scratch
// latent model, total and per device under tensor parallelism, and the saving
// against the original: what the GUI previews before anything runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "latentlab/model_config.h"
#include "latentlab/vocabulary.h"

namespace latentlab {

// Mha2Mla: partial RoPE per KV head and a latent (algorithms.md §2).
// DeepSeek: one shared RoPE key of width d_R found by RoRoPE, and a latent
// of n_kv * d_kv dims in DeepSeek-V3's layout (docs/conversion.md).
enum class KvMethod { None, Mha2Mla, DeepSeek };
// SvdMethod: latentlab/vocabulary.h

struct KvSettings {
  KvMethod method = KvMethod::None;
  int ropePairs = 0;  // r (pairs per head); 0 = default d_h/16
  int dKv = 0;        // latent dims per KV head (per factor for split)
  SvdMethod svd = SvdMethod::Joint;
  bool fullRope = false;         // full-rope strategy: every pair keeps RoPE
  bool uniformStrategy = false;  // S_uniform needs r | d_h/2
  int ropeWidth = 0;             // DeepSeek: d_R, the shared RoPE key's dims; 0 = 2 r n_kv
  int freqFold = 1;              // DeepSeek: adjacent frequencies folded into one (FreqFold)
  // MHA2MLA: the converted layers, ascending; absent: every layer. The
  // others keep the original K/V cache (a hybrid model).
  std::optional<std::vector<int>> layers;
  // MHA2MLA with a KV budget spread over the layers: d_kv of each decoder
  // layer (0 for an unconverted one); empty: dKv in every converted layer.
  std::vector<int> layerDKv;
};

// Which frequencies a DeepSeek-target conversion's shared RoPE key keeps
// (docs/conversion.md, "RoRoPE"): the d_h/2 frequency pairs of a head fall into
// d_h/(2 fold) groups of `fold` adjacent pairs; the key keeps `components`
// rotated components of each of the `groups` highest-frequency groups, each
// turning at the frequency of its group's first pair.
struct RoRopeLayout {
  int width = 0;  // d_R
  int fold = 1;
  int groups = 0;                // groups kept, highest frequency first
  int components = 1;            // rotated components per kept group
  std::vector<int> sourcePairs;  // d_R/2 entries: pair t = group * components + j turns at pair group*fold
};
// The layout for a model and settings, or why there is none.
std::optional<std::string> roRopeLayout(const ModelConfig& cfg, int ropeWidth, int fold, RoRopeLayout* out);
// d_R after its default (2 r n_kv: the RoPE dims an MHA2MLA cache holds at the same r).
int effectiveRopeWidth(const ModelConfig& cfg, const KvSettings& s);
// `cfg` as the settings would convert it, as far as its cache goes (what
// layerCacheRows and kvQuantBudget read; MHA2MLA's kept pairs are not
// chosen): the MHA2MLA fields, DeepSeek's latent layout, or cfg itself.
ModelConfig convertedCacheConfig(const ModelConfig& cfg, const KvSettings& s);
// The config a DeepSeek-target conversion of `cfg` with settings `s` gives
// (cfg.latent set, num_key_value_heads = n_h); throws Error(BadInput) when
// the RoPE layout is impossible.
ModelConfig deepSeekConvertedConfig(const ModelConfig& cfg, const KvSettings& s, bool activations,
                                    bool latentNorm = true);

struct KvBudget {
  std::int64_t originalPerTokenPerLayer = 0;  // elements: 2 * n_kv * d_h
  std::int64_t perTokenPerLayer = 0;          // elements after conversion
  std::int64_t perToken = 0;                  // elements, all layers
  std::int64_t bytesPerToken = 0;             // at the cache dtype
  std::int64_t originalBytesPerToken = 0;
  double saving = 0.0;         // (new - old) / old over all layers, e.g. -0.6875
  int effectiveRopePairs = 0;  // r after defaults
  // MHA2MLA of a family with NoPE layers (SmolLM3): perTokenPerLayer is a
  // RoPE layer's cache, nopePerTokenPerLayer that of each of the nopeLayers
  // layers without RoPE (the latent alone).
  int nopeLayers = 0;
  std::int64_t nopePerTokenPerLayer = 0;
  std::int64_t nopePerDevicePerTokenPerLayer = 0;
  // MHA2MLA of a QK-norm family (Qwen3): the key-norm scales in each layer's
  // figure, one element per KV head (included in perTokenPerLayer).
  std::int64_t keyScalePerTokenPerLayer = 0;
  // A hybrid MHA2MLA model: originalLayers layers keep the original cache
  // (originalPerTokenPerLayer each); perTokenPerLayer and nopeLayers count
  // the converted ones only.
  int originalLayers = 0;
  // Under tensor-parallel degree tpDegree the cache is sharded by its heads
  // (KV heads; latent heads for MLA/GLA/MLRA) and each device holds
  // ceil(heads / t) of them (one when t exceeds the head count); the shared
  // RoPE key of a latent model is on every device. MLA: d_c + d_R at any t;
  // GLA-k at t = k: d_c/k + d_R; MLRA at t = 4: d_c/4 + d_R.
  int tpDegree = 1;
  std::int64_t perDevicePerTokenPerLayer = 0;  // elements on one device
  std::int64_t perDevicePerToken = 0;          // elements on one device, all layers
  std::int64_t perDeviceBytesPerToken = 0;
  // Elements per token of each decoder layer (their sum is perToken). With a
  // per-layer d_kv (KvSettings::layerDKv) perTokenPerLayer is the figure at
  // the largest d_kv and only this list gives each layer's.
  std::vector<std::int64_t> layerElements;
};

// A KV budget spread over the layers ("conversion.kv_budget", `convert
// --kv-budget`; docs/conversion.md "A KV budget spread over layers"): bytes
// per token at the cache dtype ("12288" or "12288B"), a saving against the
// original cache ("75%": a cache a quarter of the original's), or the bytes of
// a uniform d_kv ("d_kv:8").
struct KvBudgetLimits {
  std::int64_t budgetBytes = 0;  // what the budget allows per token
  std::int64_t minBytes = 0;     // every converted layer at d_kv 1
  std::int64_t maxBytes = 0;     // every converted layer at its largest d_kv
  std::int64_t stepBytes = 0;    // one more d_kv in one layer
  int convertedLayers = 0;
  int maxDKv = 0;      // the largest d_kv of a layer (its [W_k_nope; W_v] rank / n_kv)
  int uniformDKv = 0;  // the largest single d_kv within the budget
};
// Resolves `text` for the model and settings (s.dKv and s.layerDKv are not
// used), or returns why the budget is impossible (malformed, under every
// layer at d_kv 1, past the full-rank cache), naming `field`.
std::optional<std::string> resolveKvBudget(const ModelConfig& cfg, const KvSettings& s, DType cacheDType,
                                           const std::string& text, const std::string& field, KvBudgetLimits* out);

// The per-layer d_kv of a budget: every converted layer starts at d_kv 1, and
// each further step of d_kv (n_kv latent dims; 2 n_kv for SVD_split) goes to
// the layer whose next step keeps the most, until the next step would pass
// the budget. gains[l][k] is what layer l's step k+1 keeps (latentStepGains:
// its share of the layer's squared singular values), non-increasing in k;
// empty for an unconverted layer.
struct KvAllocation {
  std::vector<int> layerDKv;  // per decoder layer, 0 for an unconverted one
  KvBudgetLimits limits;
  std::int64_t bytesPerToken = 0;         // the allocation's cache (at most the budget, within one step of it)
  std::int64_t uniformBytesPerToken = 0;  // limits.uniformDKv in every converted layer
  // Per layer: the share of its squared singular values kept, allocated and uniform.
  std::vector<double> kept, uniformKept;
  // Where a held-out set was at hand (planRunKvBudget: the run's validation
  // batches, its val/loss at step 0): the loss right after conversion of the
  // allocated and the uniform model; -1 when not measured.
  double heldOutLoss = -1.0, uniformHeldOutLoss = -1.0;
};
KvAllocation allocateKvBudget(const KvBudgetLimits& limits, const std::vector<std::vector<double>>& gains);

// The decoder layers a conversion converts, from the text of `--layers` or
// "conversion.layers": "all" (absent: every layer), "none", "every:K" (layers
// K-1, 2K-1, ...: every K-th), "last:N", or a comma list of indices
// ("0,2,5"). Throws Error(BadInput) naming `field` and what is wrong.
std::optional<std::vector<int>> resolveLayerSelection(const std::string& text, int numLayers, const std::string& field);

// ceil(heads / tpDegree), at least 1: the cache heads one device holds.
int headsPerDevice(int heads, int tpDegree);

// Default r for a head dim: d_h/16 pairs (1/8 of the head), at least 1.
int defaultRopePairs(int headDim);
// Why the settings are impossible for this model, or nullopt when they are fine.
std::optional<std::string> checkKvSettings(const ModelConfig& cfg, const KvSettings& s);
// Throws Error(BadInput) with checkKvSettings' reason when impossible.
struct ConversionSpec;
// The KV settings a run spec's conversion section asks for.
KvSettings kvSettingsFor(const ConversionSpec& conversion);

KvBudget computeKvBudget(const ModelConfig& cfg, const KvSettings& s, DType cacheDType, int tpDegree = 1);
// The cache of a model as it stands (original, converted per cfg.mla, or the
// latent variant of cfg.latent, whose "original" is MHA with the same heads,
// or for a DeepSeek-target conversion the source model's cache).
KvBudget currentKvBudget(const ModelConfig& cfg, DType cacheDType, int tpDegree = 1);

}  // namespace latentlab
