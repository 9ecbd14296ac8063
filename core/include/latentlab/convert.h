// MHA/GQA -> MLA conversion (MHA2MLA, algorithms.md §2): the spec the GUI and
// the `convert` verb fill in, and the report they show. Plain types, no torch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "latentlab/kv_budget.h"
#include "latentlab/model_config.h"
#include "latentlab/progress.h"

namespace latentlab {

// Calibration sequences for S_2-norm: the first numSequences windows of
// seqLen tokens of the file.
struct CalibrationSpec {
  std::filesystem::path dataFile;  // empty = none
  std::string format = "u16";      // "u16" | "u32" raw little-endian ids, or "text" (model's tokenizer)
  int numSequences = 64;           // the official recipe: 1024
  int seqLen = 512;                // the official recipe: 2048
  int batchSize = 4;               // sequences per forward pass
};

struct ConvertSpec {
  std::filesystem::path modelDir;        // original HF Llama-family folder
  std::filesystem::path outDir;          // must not exist unless force
  std::string ropeStrategy = "2-norm";   // "high" | "low" | "uniform" | "2-norm" | "full"
  int ropePairs = 0;                     // r, frequency pairs kept per head; 0 = d_h/16 (ignored for "full")
  int dKv = 0;                           // latent dims per KV head (per factor for split); required
  std::string svd = "joint";             // "joint" | "split"
  CalibrationSpec calibration;           // required for "2-norm"
  std::string twoNormScore = "product";  // "product" (Q·K, official) | "sum" (Q+K, paper-era)
  bool force = false;                    // replace an existing model folder at outDir
  std::string dtype;                     // saved dtype: "" = the checkpoint's, else F32/BF16/F16/F64
  std::string device = "cpu";            // where calibration and SVD run: "cpu" | "cuda" | "cuda:N"
};

struct ConvertStageTime {
  std::string stage;  // "load", "calibrate", "select", "factorise", "save"
  double seconds = 0.0;
};

struct ConvertReport {
  std::filesystem::path outDir;
  MlaConversion mla;                        // as written to config.json (strategy, r, d_kv, svd, pairs)
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

// Loads the model, selects RoPE pairs (calibrating for 2-norm), factorises
// [Wk_nope; Wv] and saves the converted model to outDir (safetensors +
// config.json with the latentlab_mla block). On any error nothing is written.
ConvertReport convert(const ConvertSpec& spec, ProgressSink& progress, const CancelToken& cancel);

}  // namespace latentlab
