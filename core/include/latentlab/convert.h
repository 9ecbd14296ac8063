// MHA/GQA -> MLA conversion, to the MHA2MLA layout (algorithms.md §2) or to
// DeepSeek-V3's (docs/conversion.md): the spec the GUI and the `convert` verb fill in, and the
// report they show. Plain types, no torch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "latentlab/kv_budget.h"
#include "latentlab/model_config.h"
#include "latentlab/progress.h"
#include "latentlab/vocabulary.h"

namespace latentlab {

// Calibration sequences (S_2-norm, activation-aware factorisation, the
// DeepSeek target): the first numSequences windows of seqLen tokens of the file.
struct CalibrationSpec {
  std::filesystem::path dataFile;         // empty = none
  TokenFormat format = TokenFormat::U16;  // raw little-endian ids, or text (the model's tokenizer)
  int numSequences = 64;                  // the official recipe: 1024
  int seqLen = 512;                       // the official recipe: 2048
  int batchSize = 4;                      // sequences per forward pass
};

struct ConvertSpec {
  std::filesystem::path modelDir;                       // original HF Llama-family folder
  std::filesystem::path outDir;                         // must not exist unless force
  ConversionTarget target = ConversionTarget::Mha2Mla;  // or DeepSeek (DeepSeek-V3 attention, exportable)
  // SVD of the weights, or PCA of calibration activations; unset: the
  // target's default (weights for mha2mla, activations for deepseek).
  std::optional<Factorisation> factorise;
  int ropeWidth = 0;                                  // deepseek: d_R of the shared RoPE key; 0 = 2 r n_kv
  int freqFold = 1;                                   // deepseek: FreqFold
  std::filesystem::path heldOutText;                  // optional: text whose loss is measured before and after
  RopeStrategy ropeStrategy = RopeStrategy::TwoNorm;  // mha2mla only
  int ropePairs = 0;  // r, frequency pairs kept per head; 0 = d_h/16 (ignored for "full")
  int dKv = 0;        // latent dims per KV head (per factor for split); required
  SvdMethod svd = SvdMethod::Joint;
  std::string layers = "all";  // mha2mla: which layers to convert (resolveLayerSelection); the others stay original
  // mha2mla: a KV budget spread over the layers (resolveKvBudget's forms:
  // "12288", "75%", "d_kv:8") instead of one d_kv; "" = none (dKv everywhere).
  std::string kvBudget;
  CalibrationSpec calibration;                        // required for 2-norm
  TwoNormScore twoNormScore = TwoNormScore::Product;  // Q·K (official) | Q+K (paper-era)
  bool force = false;                                 // replace an existing model folder at outDir
  std::string dtype;                                  // saved dtype: "" = the checkpoint's, else F32/BF16/F16/F64
  std::string device = "cpu";                         // where calibration and SVD run: "cpu" | "cuda" | "cuda:N"
};

// The factorisation a spec asks for: its own, else the target's default.
inline Factorisation convertFactorisation(const ConvertSpec& spec) {
  if (spec.factorise) return *spec.factorise;
  return spec.target == ConversionTarget::DeepSeek ? Factorisation::Activations : Factorisation::Weights;
}

struct ConvertStageTime {
  std::string stage;  // "load", "calibrate", "select", "factorise", "save"
  double seconds = 0.0;
};

struct ConvertReport {
  std::filesystem::path outDir;
  ConversionTarget target = ConversionTarget::Mha2Mla;
  Factorisation factorise = Factorisation::Weights;
  MlaConversion mla;                    // mha2mla: as written to config.json (strategy, r, d_kv, svd, pairs)
  LatentAttention latent;               // deepseek: as written (d_c, d_R, RoPE source pairs)
  std::vector<double> activationError;  // per layer, relative error of the latent on calibration activations
  double meanActivationError = -1.0;    // -1 without calibration
  std::vector<double> ropeEnergyKept;   // deepseek, per layer: share of key energy in the RoPE key
  std::vector<double> balance;          // deepseek, per layer: the key/value balance alpha
  double heldOutLossBefore = -1.0;      // with heldOutText: mean loss of the original and the converted model
  double heldOutLossAfter = -1.0;
  // With a KV budget: each layer's d_kv and what it keeps, and (with
  // heldOutText) the loss of the budget's uniform d_kv conversion beside it.
  std::optional<KvAllocation> allocation;
  double heldOutLossUniform = -1.0;
  std::int64_t heldOutTokens = 0;
  std::vector<int> pairUsage;               // per pair k: how many (layer, KV head) keep RoPE on it
  std::string pairsSummary;                 // one line, e.g. "r=4 of 32 pairs; same for all: 0 8 16 24"
  std::vector<double> reconstructionError;  // per layer, relative Frobenius of [Wk_nope; Wv]
  double meanReconstructionError = 0.0;
  KvBudget before;  // the original model's cache (at the saved dtype)
  KvBudget after;   // the converted model's cache
  std::int64_t parametersBefore = 0, parametersAfter = 0;
  std::int64_t calibrationTokens = 0;
  std::vector<ConvertStageTime> stages;
  double totalSeconds = 0.0;
};

// Checks the spec against the model's config.json (no weights loaded, nothing
// written) and returns the KV budget the conversion would give. Throws
// Error(BadInput / BadModel / BadData) with the reason.
KvBudget checkConvertSpec(const ConvertSpec& spec);

// The per-layer d_kv a conversion with spec.kvBudget would choose (loads the
// model, calibrates where the strategy needs it, writes nothing): what
// `convert --check --kv-budget` prints and the Conversion tab charts.
KvAllocation planKvBudget(const ConvertSpec& spec, ProgressSink& progress, const CancelToken& cancel);

// Loads the model, calibrates where needed, converts (mha2mla: selects RoPE
// pairs and factorises [Wk_nope; Wv]; deepseek: RoRoPE, balancing, the latent
// and its norm) and saves the converted model to outDir. With heldOutText the
// loss on it is measured before and after. On any error nothing is written.
ConvertReport convert(const ConvertSpec& spec, ProgressSink& progress, const CancelToken& cancel);

// Export to a serving stack's format (docs/conversion.md, "Export"): "deepseek-v3" writes a
// folder that transformers loads as DeepseekV3ForCausalLM without remote code
// (dense MLP config, interleaved RoPE), plus the tokenizer files.
struct ExportSpec {
  std::filesystem::path modelDir;  // a DeepSeek-target conversion or a from-scratch MLA model
  std::filesystem::path outDir;    // must not exist unless force
  std::string format = "deepseek-v3";
  std::string dtype;  // "" = the checkpoint's
  bool force = false;
};

struct ExportReport {
  std::filesystem::path outDir;
  int kvLoraRank = 0, qkRopeHeadDim = 0, qkNopeHeadDim = 0, vHeadDim = 0;
  int qLoraRank = 0;       // 0: null (a plain q_proj)
  double ropeTheta = 0.0;  // the exported RoPE base (a conversion keeping every s-th pair: theta^(s d_R / d_h))
  std::string ropeType = "default";
  std::int64_t kvPerTokenPerLayer = 0;  // kv_lora_rank + qk_rope_head_dim
  std::int64_t kvBytesPerToken = 0;     // all layers, at the saved dtype
  int tensors = 0;
};

// Why the model cannot be exported as DeepSeek-V3, or nullopt.
std::optional<std::string> deepSeekExportProblem(const ModelConfig& cfg);

// Writes the export; throws Error(BadInput) with deepSeekExportProblem's reason
// (naming the folder) before anything is written.
ExportReport exportModel(const ExportSpec& spec, ProgressSink& progress, const CancelToken& cancel);

}  // namespace latentlab
