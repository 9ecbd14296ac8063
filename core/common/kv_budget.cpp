// KV-cache budget of original, MHA2MLA-converted (algorithms.md §2.3) and
// from-scratch latent models (§4), total and per tensor-parallel device.
#include "latentlab/kv_budget.h"
#include "latentlab/run_spec.h"

#include <algorithm>

#include "latentlab/error.h"

namespace latentlab {

int defaultRopePairs(int headDim) { return std::max(1, headDim / 16); }

int headsPerDevice(int heads, int tpDegree) {
  if (tpDegree < 1) throw Error(ErrorCode::BadInput, "tensor-parallel degree must be at least 1");
  return std::max(1, (heads + tpDegree - 1) / tpDegree);
}

namespace {
int effectivePairs(const ModelConfig& cfg, const KvSettings& s) {
  if (s.fullRope) return cfg.headDim / 2;
  return s.ropePairs > 0 ? s.ropePairs : defaultRopePairs(cfg.headDim);
}
} // namespace

std::optional<std::string> checkKvSettings(const ModelConfig& cfg, const KvSettings& s) {
  if (s.method == KvMethod::None) return std::nullopt;
  if (cfg.mla) return std::string("the model is already MLA-converted; convert its original instead");
  if (cfg.latent) return std::string("the model has latent attention from scratch; conversion needs MHA/GQA");
  const int half = cfg.headDim / 2;
  if (!s.fullRope) {
    if (s.ropePairs < 0) return "r must be at least 1 (got " + std::to_string(s.ropePairs) + ")";
    const int r = effectivePairs(cfg, s);
    if (r < 1) return std::string("r must be at least 1");
    if (r > half) {
      return "r = " + std::to_string(r) + " exceeds d_h/2 = " + std::to_string(half) +
             " frequency pairs per head";
    }
    if (s.uniformStrategy && half % r != 0) {
      return "S_uniform needs r to divide d_h/2 = " + std::to_string(half) + " (got r = " +
             std::to_string(r) + ")";
    }
  }
  const int r = effectivePairs(cfg, s);
  const int nope = cfg.headDim - 2 * r;
  if (s.dKv < 1) return "d_kv must be at least 1 (got " + std::to_string(s.dKv) + ")";
  const std::int64_t latent = static_cast<std::int64_t>(cfg.numKvHeads) * s.dKv;
  if (s.svd == SvdMethod::Joint) {
    const std::int64_t rows = static_cast<std::int64_t>(cfg.numKvHeads) * (nope + cfg.headDim);
    const std::int64_t rank = std::min<std::int64_t>(rows, cfg.hiddenSize);
    if (latent > rank) {
      return "d_kv = " + std::to_string(s.dKv) + " needs a rank-" + std::to_string(latent) +
             " factorisation but [W_k_nope; W_v] has rank at most " + std::to_string(rank) +
             " (d_kv <= " + std::to_string(rank / cfg.numKvHeads) + ")";
    }
  } else {
    if (nope == 0) return std::string("SVD_split needs NoPE key dims; with every pair kept as RoPE use SVD_joint");
    const std::int64_t rankK = std::min<std::int64_t>(static_cast<std::int64_t>(cfg.numKvHeads) * nope, cfg.hiddenSize);
    const std::int64_t rankV = std::min<std::int64_t>(static_cast<std::int64_t>(cfg.numKvHeads) * cfg.headDim, cfg.hiddenSize);
    if (latent > std::min(rankK, rankV)) {
      return "d_kv = " + std::to_string(s.dKv) + " exceeds the rank of W_k_nope (" + std::to_string(rankK) +
             ") or W_v (" + std::to_string(rankV) + ") divided by n_kv";
    }
  }
  return std::nullopt;
}

KvSettings kvSettingsFor(const ConversionSpec& conversion) {
  KvSettings kv;
  kv.method = KvMethod::Mha2Mla;
  kv.ropePairs = conversion.ropePairs;
  kv.dKv = conversion.dKv;
  kv.svd = conversion.svd == "split" ? SvdMethod::Split : SvdMethod::Joint;
  kv.fullRope = conversion.ropeStrategy == "full";
  kv.uniformStrategy = conversion.ropeStrategy == "uniform";
  return kv;
}

KvBudget computeKvBudget(const ModelConfig& cfg, const KvSettings& s, DType cacheDType, int tpDegree) {
  if (auto why = checkKvSettings(cfg, s)) throw Error(ErrorCode::BadInput, *why);
  KvBudget b;
  const std::int64_t bytes = static_cast<std::int64_t>(dtypeSize(cacheDType));
  b.originalPerTokenPerLayer = 2LL * cfg.numKvHeads * cfg.headDim;
  b.tpDegree = tpDegree;
  const std::int64_t onDevice = headsPerDevice(cfg.numKvHeads, tpDegree);
  if (s.method == KvMethod::None) {
    b.perTokenPerLayer = b.originalPerTokenPerLayer;
    b.perDevicePerTokenPerLayer = onDevice * 2LL * cfg.headDim;
  } else {
    const int r = effectivePairs(cfg, s);
    b.effectiveRopePairs = r;
    const std::int64_t latentPerHead = s.svd == SvdMethod::Joint ? s.dKv : 2LL * s.dKv;
    b.perTokenPerLayer = static_cast<std::int64_t>(cfg.numKvHeads) * (2LL * r + latentPerHead);
    b.perDevicePerTokenPerLayer = onDevice * (2LL * r + latentPerHead);
  }
  b.perDevicePerToken = b.perDevicePerTokenPerLayer * cfg.numLayers;
  b.perDeviceBytesPerToken = b.perDevicePerToken * bytes;
  b.perToken = b.perTokenPerLayer * cfg.numLayers;
  b.bytesPerToken = b.perToken * bytes;
  b.originalBytesPerToken = b.originalPerTokenPerLayer * cfg.numLayers * bytes;
  b.saving = static_cast<double>(b.perTokenPerLayer - b.originalPerTokenPerLayer) /
             static_cast<double>(b.originalPerTokenPerLayer);
  return b;
}

KvBudget currentKvBudget(const ModelConfig& cfg, DType cacheDType, int tpDegree) {
  if (cfg.latent) {
    // Cache per token and layer: every latent head (d_c in all) and the shared RoPE key.
    const LatentAttention& a = *cfg.latent;
    const std::int64_t bytes = static_cast<std::int64_t>(dtypeSize(cacheDType));
    KvBudget b;
    b.tpDegree = tpDegree;
    b.originalPerTokenPerLayer = 2LL * cfg.numHeads * cfg.headDim;
    b.perTokenPerLayer = static_cast<std::int64_t>(a.dC) + a.dRope;
    b.perDevicePerTokenPerLayer =
        static_cast<std::int64_t>(headsPerDevice(a.latentHeads, tpDegree)) * a.latentDim() + a.dRope;
    b.perToken = b.perTokenPerLayer * cfg.numLayers;
    b.bytesPerToken = b.perToken * bytes;
    b.originalBytesPerToken = b.originalPerTokenPerLayer * cfg.numLayers * bytes;
    b.perDevicePerToken = b.perDevicePerTokenPerLayer * cfg.numLayers;
    b.perDeviceBytesPerToken = b.perDevicePerToken * bytes;
    b.saving = static_cast<double>(b.perTokenPerLayer - b.originalPerTokenPerLayer) /
               static_cast<double>(b.originalPerTokenPerLayer);
    return b;
  }
  if (!cfg.mla) return computeKvBudget(cfg, KvSettings{}, cacheDType, tpDegree);
  ModelConfig original = cfg;
  original.mla.reset();
  KvSettings s;
  s.method = KvMethod::Mha2Mla;
  s.ropePairs = cfg.mla->ropePairs;
  s.fullRope = cfg.mla->ropePairs * 2 == cfg.headDim;
  s.dKv = cfg.mla->dKv;
  s.svd = cfg.mla->svdMethod == "split" ? SvdMethod::Split : SvdMethod::Joint;
  return computeKvBudget(original, s, cacheDType, tpDegree);
}

} // namespace latentlab
