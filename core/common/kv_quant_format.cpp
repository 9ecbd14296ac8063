// The quantized cache's settings and bytes (docs/kv_quant.md).
#include <algorithm>
#include <cstdio>

#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "latentlab/kv_quant.h"

namespace latentlab {

int parseKvQuantBits(const std::string& text, const std::string& flag) {
  if (text == "none") return 0;
  if (text == "int8") return 8;
  if (text == "int4") return 4;
  if (text == "int2") return 2;
  throw Error(ErrorCode::BadInput, flag + " '" + text + "': not a cache format", "Give none, int8, int4 or int2.");
}

const char* kvQuantName(int bits) {
  switch (bits) {
    case 8:
      return "int8";
    case 4:
      return "int4";
    case 2:
      return "int2";
    default:
      return "none";
  }
}

std::string kvQuantLabel(const KvQuantSettings& s) {
  if (!s.on()) return {};
  const KvQuantSettings defaults;
  std::string label = std::string(kvQuantName(s.bits)) + " cache";
  if (s.group != defaults.group || s.residual != defaults.residual)
    label += ", group " + std::to_string(s.group) + ", window " + std::to_string(s.residual);
  return label;
}

std::string kvQuantTaskName(const std::string& task, const KvQuantSettings& s) {
  return s.on() ? task + " (" + kvQuantLabel(s) + ")" : task;
}

std::pair<std::string, KvQuantSettings> splitKvQuantTaskName(const std::string& stored) {
  const auto open = stored.rfind(" (");
  if (open == std::string::npos || stored.back() != ')') return {stored, {}};
  const std::string task = stored.substr(0, open);
  for (const int bits : {8, 4, 2}) {
    KvQuantSettings s;
    s.bits = bits;
    // The default group and window, or those the label names.
    for (int g = 0; g < 2; ++g) {
      if (g == 1) {
        int group = 0, window = -1;
        const std::string prefix = task + " (" + kvQuantName(bits) + " cache, group ";
        if (stored.rfind(prefix, 0) != 0 ||
            std::sscanf(stored.c_str() + prefix.size(), "%d, window %d)", &group, &window) != 2)
          continue;
        s.group = group;
        s.residual = window;
      }
      if (kvQuantTaskName(task, s) == stored) return {task, s};
    }
  }
  return {stored, {}};
}

std::int64_t groupOf(int group, std::int64_t width) {
  return std::min<std::int64_t>(group, width);
}

std::int64_t quantizedRowBytes(std::int64_t width, int bits, int group, std::int64_t dtypeBytes) {
  const std::int64_t g = groupOf(group, width);
  return width * bits / 8 + 2 * (width / g) * dtypeBytes;
}

std::vector<CacheRow> layerCacheRows(const ModelConfig& cfg, int layer) {
  const std::int64_t nkv = cfg.numKvHeads;
  if (cfg.latent) {
    const LatentAttention& a = *cfg.latent;
    return {{"latent", a.latentHeads, a.latentDim(), true}, {"rope key", 1, a.dRope, true}};
  }
  if (!cfg.mla || !cfg.mla->converts(layer)) return {{"K", nkv, cfg.headDim, true}, {"V", nkv, cfg.headDim, true}};
  std::vector<CacheRow> rows;
  const std::int64_t r2 = cfg.usesRope(layer) ? 2LL * cfg.mla->ropePairs : 0;
  if (r2 > 0) rows.push_back({"rope key", nkv, r2, true});
  const std::int64_t latent = nkv * cfg.mla->dKvOf(layer);
  rows.push_back({"latent", cfg.mla->svdMethod == SvdMethod::Split ? 2 : 1, latent, true});
  if (cfg.qkNorm) rows.push_back({"key scale", nkv, 1, false});
  return rows;
}

std::optional<std::string> checkKvQuant(const KvQuantSettings& s, const ModelConfig& cfg, std::int64_t context) {
  if (!s.on()) return std::nullopt;
  if (s.bits != 8 && s.bits != 4 && s.bits != 2) {
    return "--kv-quant: " + std::to_string(s.bits) + " bits is not one of 8, 4, 2";
  }
  if (s.group < 1) return "--kv-group " + std::to_string(s.group) + ": must be at least 1";
  if (s.residual < 0) return "--kv-residual " + std::to_string(s.residual) + ": must be 0 or more";
  if (context > 0 && s.residual > context) {
    return "--kv-residual " + std::to_string(s.residual) + ": past the context of " + std::to_string(context) +
           " tokens (nothing would be quantized)";
  }
  const int perByte = 8 / s.bits;
  for (int l = 0; l < cfg.numLayers; ++l) {
    for (const CacheRow& row : layerCacheRows(cfg, l)) {
      if (!row.quantized) continue;
      const std::int64_t g = groupOf(s.group, row.width);
      if (row.width % g != 0) {
        return "--kv-group " + std::to_string(s.group) + ": does not divide the " + row.name + " rows of " +
               std::to_string(row.width) + " channels (layer " + std::to_string(l) + "; give a divisor of " +
               std::to_string(row.width) + ", or a group at least as large)";
      }
      if (g % perByte != 0) {
        return "--kv-group " + std::to_string(s.group) + ": a group of " + std::to_string(g) + " " + row.name +
               " values does not fill whole bytes of " + std::to_string(perByte) + " " + std::to_string(s.bits) +
               "-bit codes";
      }
    }
  }
  return std::nullopt;
}

std::int64_t KvQuantBudget::bytesFor(std::int64_t tokens) const {
  if (!settings.on()) return tokens * fullBytesPerToken;
  const std::int64_t full = std::min<std::int64_t>(tokens, settings.residual);
  return full * fullBytesPerToken + (tokens - full) * quantizedBytesPerToken;
}

KvQuantBudget kvQuantBudget(const ModelConfig& cfg, const KvQuantSettings& s, DType computeDType) {
  KvQuantBudget b;
  b.settings = s;
  const auto bytes = static_cast<std::int64_t>(dtypeSize(computeDType));
  for (int l = 0; l < cfg.numLayers; ++l) {
    for (const CacheRow& row : layerCacheRows(cfg, l)) {
      const std::int64_t full = row.count * row.width * bytes;
      b.fullBytesPerToken += full;
      if (!s.on() || !row.quantized) {
        b.quantizedBytesPerToken += full;
        continue;
      }
      const std::int64_t codes = row.count * row.width * s.bits / 8;
      const std::int64_t scales =
          row.count * (quantizedRowBytes(row.width, s.bits, s.group, bytes) - row.width * s.bits / 8);
      b.codeBytesPerToken += codes;
      b.scaleBytesPerToken += scales;
      b.quantizedBytesPerToken += codes + scales;
    }
  }
  return b;
}

}  // namespace latentlab
