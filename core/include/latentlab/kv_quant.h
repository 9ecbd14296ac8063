// A quantized KV cache (docs/kv_quant.md): the settings, their checks and the
// exact bytes it takes, per cached row and per model. Plain types, no torch;
// the quantizer itself is core/model/kv_quant.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "latentlab/model_config.h"

namespace latentlab {

struct KvQuantSettings {
  int bits = 0;        // 0: none; 8, 4 or 2
  int group = 64;      // values per scale and zero-point along a cached row
  int residual = 128;  // the newest tokens kept in full precision
  // Tokens attention reads back (dequantizes) at a time: at most one block of
  // one layer's slot is ever held in full precision beside the codes.
  int block = 8192;
  bool on() const { return bits > 0; }
};

// "none" | "int8" | "int4" | "int2" -> bits; throws Error(BadInput) naming `flag`.
int parseKvQuantBits(const std::string& text, const std::string& flag);
const char* kvQuantName(int bits);  // "none", "int8", ...

// What results scored over such a cache are stored as: "" for none; "int4
// cache" at the default group and window; "int4 cache, group 32, window 64"
// otherwise. The task name a result is stored under: "arc (int4 cache)",
// or `task` itself for none, so results of different caches stand side by side.
std::string kvQuantLabel(const KvQuantSettings& s);
std::string kvQuantTaskName(const std::string& task, const KvQuantSettings& s);
// The inverse: a stored task name as the task and the cache's settings (none
// where the name carries no cache).
std::pair<std::string, KvQuantSettings> splitKvQuantTaskName(const std::string& stored);

// The group of a row of `width` channels: `group`, or the whole row when it is shorter.
std::int64_t groupOf(int group, std::int64_t width);

// Bytes one quantized row of `width` channels takes: its codes and one scale
// and one zero-point per group at `dtypeBytes` each.
std::int64_t quantizedRowBytes(std::int64_t width, int bits, int group, std::int64_t dtypeBytes);

// The rows one token adds to a layer's cache: `count` rows of `width`
// channels each (the last axis of the cached tensor). Original attention: K
// and V, one row per KV head of d_h. MHA2MLA: the RoPE key (one row per KV
// head of 2r, none in a NoPE layer), the latent (one row of n_kv d_kv; two
// for SVD_split), the key-norm scales (one per KV head, never quantized).
// Latent attention: the latent heads and the shared RoPE key.
struct CacheRow {
  std::string name;
  std::int64_t count = 0;
  std::int64_t width = 0;
  bool quantized = true;  // false: kept in the compute dtype even in a quantized cache
};
std::vector<CacheRow> layerCacheRows(const ModelConfig& cfg, int layer);

// Why the settings cannot quantize this model's cache at a context of
// `context` tokens (0: unknown), naming the flag (--kv-quant, --kv-group,
// --kv-residual); nullopt when they can.
std::optional<std::string> checkKvQuant(const KvQuantSettings& s, const ModelConfig& cfg, std::int64_t context);

// The cache's bytes: per token in full precision and quantized, and for a
// whole sequence (the newest `residual` tokens in full precision).
struct KvQuantBudget {
  KvQuantSettings settings;
  std::int64_t fullBytesPerToken = 0;                          // every row at the compute dtype
  std::int64_t quantizedBytesPerToken = 0;                     // codes + scales + zero-points (+ rows never quantized)
  std::int64_t codeBytesPerToken = 0, scaleBytesPerToken = 0;  // of the quantized rows: codes; scales and zeros
  std::int64_t bytesFor(std::int64_t tokens) const;
};
KvQuantBudget kvQuantBudget(const ModelConfig& cfg, const KvQuantSettings& s, DType computeDType);

}  // namespace latentlab
