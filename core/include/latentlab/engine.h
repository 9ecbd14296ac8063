// The engine's public entry points: plain types in, plain types out. Long
// calls take a ProgressSink and a CancelToken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "latentlab/kv_budget.h"
#include "latentlab/kv_quant.h"
#include "latentlab/model_config.h"
#include "latentlab/progress.h"

namespace latentlab {

struct ModelSummary {
  std::filesystem::path dir;
  ModelConfig config;
  std::int64_t parameters = 0;
  KvBudget kv;                     // at the checkpoint's dtype, per device at kv.tpDegree
  std::uintmax_t sizeOnDisk = 0;   // bytes of the weight files
  DType weightDType = DType::F32;  // dtype of most weight bytes
  std::vector<std::string> weightFiles;
  int tensorCount = 0;
  std::vector<std::string> unusedKeys;  // checkpoint keys the model does not use
};

// Reads config.json and the safetensors headers (no weights are loaded) and
// checks that every tensor the model needs is present with the right shape.
// `tpDegree` sets the tensor-parallel degree of the per-device KV figures.
ModelSummary inspectModel(const std::filesystem::path& dir, int tpDegree = 1);

struct EvalOptions {
  std::filesystem::path model;
  std::filesystem::path textFile;    // tokenized with the model's tokenizer.json
  std::filesystem::path tokenFile;   // or: raw token ids
  std::vector<std::int64_t> tokens;  // or: the ids themselves
  std::string tokenFormat = "u16";   // "u16" | "u32" (raw little-endian ids)
  int seqLen = 256;
  int batchSize = 4;
  std::int64_t maxTokens = 0;  // 0 = the whole stream
  std::string device = "cpu";  // "cpu" | "cuda" | "cuda:N"
  DType dtype = DType::F32;
  // Optional: the first window's logits, raw float32 (seqLen, vocab) little-endian,
  // and its input ids as int64 in logitsOut + ".ids": for comparing with another stack.
  std::filesystem::path logitsOut;
  // A quantized cache (docs/kv_quant.md): each window is fed through the
  // cache `kvChunk` tokens at a time, so that every chunk after the first
  // reads the older tokens back from codes.
  KvQuantSettings kvQuant;
  int kvChunk = 64;
};

struct EvalResult {
  double meanLoss = 0.0;
  double perplexity = 0.0;
  std::int64_t tokens = 0;  // predicted tokens
  double seconds = 0.0;
  double tokensPerSecond = 0.0;
};

EvalResult evaluate(const EvalOptions& opts, ProgressSink& progress, const CancelToken& cancel);

// Devices LibTorch can use here: "cpu" first, then "cuda:N" with its memory.
struct DeviceInfo {
  std::string id;  // "cpu", "cuda:0", ...
  std::string name;
  std::uint64_t memoryBytes = 0;  // total: the host's RAM for cpu, the card's for CUDA (0: unknown)
  std::uint64_t freeBytes = 0;    // available now: MemAvailable for cpu, cudaMemGetInfo's free for CUDA
};
std::vector<DeviceInfo> listDevices();

// `latentlab-engine devices --json`: one array of {id, name, memory_bytes,
// free_bytes}. The engine writes it, the workbench reads it (entries without
// an id are skipped; a line that is no JSON array reads as no devices).
std::string devicesJson(const std::vector<DeviceInfo>& devices);
std::vector<DeviceInfo> parseDevicesJson(std::string_view text);

std::string libtorchVersion();

}  // namespace latentlab

namespace latentlab {

// Writes a randomly initialised model of `cfg` (normal(0, initStd), norms at
// one) as an HF folder; `outDir` must not exist.
void initModel(const ModelConfig& cfg, const std::filesystem::path& outDir, std::uint64_t seed, DType saveDType,
               double initStd = 0.02);

// OpenMP threads that spin while waiting for work steal the cores the
// working threads need whenever the machine is shared (measured by the train
// benchmark: 5x slower steps on 2 busy cores). libgomp reads its wait policy
// once, when it loads, so this re-executes the program (/proc/self/exe with
// the same argv, so the same process ID) with OMP_WAIT_POLICY=PASSIVE unless
// the variable is already set. Call it first in main(); returns only when no
// re-exec was needed or the exec failed.
void reexecWithPassiveOpenMpWait(char** argv);

// LibTorch's CPU tensors of 1 MiB and more come from a cache of freed blocks
// (model/cpu_block_cache.h) instead of a fresh mmap each time, which the
// kernel zero-fills page by page: a training step frees and reallocates its
// large tensors (the logits, their gradient) every step. At most
// `maxCachedBytes` are held unused. Call once in main(), before any tensor.
void installCpuBlockCache(std::size_t maxCachedBytes = std::size_t{4} << 30);

}  // namespace latentlab
