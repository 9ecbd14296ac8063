// KV-cache budget of original, MHA2MLA-converted (algorithms.md §2.3) and
// from-scratch latent models (§4), total and per tensor-parallel device.
#include "latentlab/kv_budget.h"
#include "latentlab/run_spec.h"

#include <algorithm>

#include "latentlab/error.h"

namespace latentlab {

int defaultRopePairs(int headDim) {
  return std::max(1, headDim / 16);
}

int headsPerDevice(int heads, int tpDegree) {
  if (tpDegree < 1) throw Error(ErrorCode::BadInput, "tensor-parallel degree must be at least 1");
  return std::max(1, (heads + tpDegree - 1) / tpDegree);
}

namespace {
int effectivePairs(const ModelConfig& cfg, const KvSettings& s) {
  if (s.fullRope) return cfg.ropeDim() / 2;
  return s.ropePairs > 0 ? s.ropePairs : defaultRopePairs(cfg.headDim);
}
}  // namespace

int effectiveRopeWidth(const ModelConfig& cfg, const KvSettings& s) {
  if (s.ropeWidth > 0) return s.ropeWidth;
  return 2 * effectivePairs(cfg, s) * cfg.numKvHeads;
}

std::optional<std::string> roRopeLayout(const ModelConfig& cfg, int ropeWidth, int fold, RoRopeLayout* out) {
  const int half = cfg.headDim / 2;
  if (fold < 1 || half % fold != 0) {
    return "the frequency fold (" + std::to_string(fold) + ") must divide d_h/2 = " + std::to_string(half);
  }
  if (ropeWidth < 2 || ropeWidth % 2 != 0) {
    return "the RoPE key width d_R must be a positive even number (got " + std::to_string(ropeWidth) + ")";
  }
  const int groups = half / fold, pairs = ropeWidth / 2, perGroup = cfg.numKvHeads * fold;
  RoRopeLayout l;
  l.width = ropeWidth;
  l.fold = fold;
  if (pairs <= groups) {
    l.groups = pairs;
    l.components = 1;
  } else {
    if (pairs % groups != 0 || pairs / groups > perGroup) {
      return "d_R = " + std::to_string(ropeWidth) + " does not fit " + std::to_string(groups) +
             " frequency groups: above " + std::to_string(2 * groups) + " it must be a multiple of " +
             std::to_string(2 * groups) + " up to " + std::to_string(2 * groups * perGroup) +
             " (every rotated component of every group)";
    }
    l.groups = groups;
    l.components = pairs / groups;
  }
  for (int g = 0; g < l.groups; ++g) {
    for (int j = 0; j < l.components; ++j) l.sourcePairs.push_back(g * fold);
  }
  if (out != nullptr) *out = l;
  return std::nullopt;
}

std::optional<std::string> checkKvSettings(const ModelConfig& cfg, const KvSettings& s) {
  if (s.method == KvMethod::None) return std::nullopt;
  if (cfg.mla) return std::string("the model is already MLA-converted; convert its original instead");
  if (s.layers) {
    if (s.method != KvMethod::Mha2Mla) return std::string("converting some layers only is for the mha2mla target");
    for (std::size_t i = 0; i < s.layers->size(); ++i) {
      const int l = (*s.layers)[i];
      if (l < 0 || l >= cfg.numLayers) {
        return "layers: " + std::to_string(l) + " is not a decoder layer (the model has " +
               std::to_string(cfg.numLayers) + ", 0 to " + std::to_string(cfg.numLayers - 1) + ")";
      }
      if (i > 0 && l <= (*s.layers)[i - 1]) return std::string("layers: must be ascending, each layer once");
    }
  }
  if (cfg.latent) return std::string("the model has latent attention from scratch; conversion needs MHA/GQA");
  if (s.method == KvMethod::DeepSeek) {
    if (cfg.qkNorm) {
      return std::string(
          "the model normalises its keys (QK norm, q_norm/k_norm); DeepSeek-V3 attention has no key norm "
          "and its latent cannot hold one exactly: use the mha2mla target, whose cache keeps the norm exact");
    }
    if (!cfg.nopeLayers.empty()) {
      return std::string(
          "the model has layers without RoPE (no_rope_layers); the DeepSeek target's shared RoPE key "
          "needs RoPE in every layer: use the mha2mla target");
    }
    if (cfg.rotaryDim > 0) {
      return std::string(
          "the model rotates only part of each head (partial_rotary_factor); the DeepSeek target needs "
          "fully rotating heads: use the mha2mla target");
    }
    if (s.ropePairs < 0) return "r must be at least 1 (got " + std::to_string(s.ropePairs) + ")";
    if (auto why = roRopeLayout(cfg, effectiveRopeWidth(cfg, s), s.freqFold, nullptr)) return why;
    if (s.svd == SvdMethod::Split) return std::string("the DeepSeek target has one joint latent; use SVD_joint");
    if (s.dKv < 1) return "d_kv must be at least 1 (got " + std::to_string(s.dKv) + ")";
    const std::int64_t latent = static_cast<std::int64_t>(cfg.numKvHeads) * s.dKv;
    const std::int64_t rank = std::min<std::int64_t>(2LL * cfg.numKvHeads * cfg.headDim, cfg.hiddenSize);
    if (latent > rank) {
      return "d_kv = " + std::to_string(s.dKv) + " needs a rank-" + std::to_string(latent) +
             " latent but [K_nope; V] has rank at most " + std::to_string(rank) +
             " (d_kv <= " + std::to_string(rank / cfg.numKvHeads) + ")";
    }
    if (cfg.attentionBias || cfg.oProjBias) {
      return std::string(
          "the model has attention biases (Qwen2-style q/k/v biases); DeepSeek-V3's q_proj and kv_b_proj "
          "have none, so the DeepSeek target refuses them: use the mha2mla target");
    }
    if (cfg.slidingWindow) return std::string("the model uses a sliding window, which DeepSeek-V3 attention has not");
    return std::nullopt;
  }
  const int half = cfg.ropeDim() / 2;  // the pairs of the rotating dims
  if (!s.fullRope) {
    if (s.ropePairs < 0) return "r must be at least 1 (got " + std::to_string(s.ropePairs) + ")";
    const int r = effectivePairs(cfg, s);
    if (r < 1) return std::string("r must be at least 1");
    if (r > half) {
      if (cfg.rotaryDim > 0) {
        return "r = " + std::to_string(r) + " exceeds the " + std::to_string(half) + " frequency pairs that rotate (" +
               std::to_string(cfg.rotaryDim) + " of " + std::to_string(cfg.headDim) + " head dims)";
      }
      return "r = " + std::to_string(r) + " exceeds d_h/2 = " + std::to_string(half) + " frequency pairs per head";
    }
    if (s.uniformStrategy && half % r != 0) {
      return "S_uniform needs r to divide " + std::string(cfg.rotaryDim > 0 ? "the rotating pairs" : "d_h/2") + " = " +
             std::to_string(half) + " (got r = " + std::to_string(r) + ")";
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
    const std::int64_t rankV =
        std::min<std::int64_t>(static_cast<std::int64_t>(cfg.numKvHeads) * cfg.headDim, cfg.hiddenSize);
    if (latent > std::min(rankK, rankV)) {
      return "d_kv = " + std::to_string(s.dKv) + " exceeds the rank of W_k_nope (" + std::to_string(rankK) +
             ") or W_v (" + std::to_string(rankV) + ") divided by n_kv";
    }
  }
  return std::nullopt;
}

KvSettings kvSettingsFor(const ConversionSpec& conversion) {
  KvSettings kv;
  kv.method = conversion.deepseek() ? KvMethod::DeepSeek : KvMethod::Mha2Mla;
  kv.ropeWidth = conversion.ropeWidth;
  kv.freqFold = conversion.freqFold;
  kv.ropePairs = conversion.ropePairs;
  kv.dKv = conversion.dKv;
  kv.svd = conversion.svd;
  // The RoPE strategy is the MHA2MLA method's: the DeepSeek target's RoPE key
  // is d_R wide (from r) whatever the strategy says.
  kv.fullRope = !conversion.deepseek() && conversion.ropeStrategy == RopeStrategy::Full;
  kv.uniformStrategy = !conversion.deepseek() && conversion.ropeStrategy == RopeStrategy::Uniform;
  return kv;
}

ModelConfig deepSeekConvertedConfig(const ModelConfig& cfg, const KvSettings& s, bool activations, bool latentNorm) {
  RoRopeLayout layout;
  if (auto why = roRopeLayout(cfg, effectiveRopeWidth(cfg, s), s.freqFold, &layout)) {
    throw Error(ErrorCode::BadInput, "DeepSeek-target conversion: " + *why);
  }
  ModelConfig out = cfg;
  LatentAttention a;
  a.kind = LatentKind::Mla;
  a.dC = cfg.numKvHeads * s.dKv;
  a.dRope = layout.width;
  a.dNope = cfg.headDim;
  a.dV = cfg.headDim;
  a.qLoraRank = 0;
  a.latentHeads = 1;
  a.branches = 1;
  a.scaled = false;
  a.latentNorm = latentNorm;
  a.ropeSourceHeadDim = cfg.headDim;
  a.ropeSourcePairs = layout.sourcePairs;
  LatentConversion c;
  c.sourceKvHeads = cfg.numKvHeads;
  c.freqFold = s.freqFold;
  c.factorise = activations ? Factorisation::Activations : Factorisation::Weights;
  a.conversion = c;
  out.latent = a;
  out.numKvHeads = cfg.numHeads;
  out.validate("converted config");
  return out;
}

std::optional<std::vector<int>> resolveLayerSelection(const std::string& text, int numLayers,
                                                      const std::string& field) {
  const auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::BadInput, field + " '" + text + "': " + why,
                "Give all, none, every:K, last:N or a comma list of layer indices (0 to " +
                    std::to_string(numLayers - 1) + ").");
  };
  const auto number = [&](const std::string& s) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 6)
      fail("'" + s + "' is not a layer count or index");
    return std::stoi(s);
  };
  if (text.empty() || text == "all") return std::nullopt;
  std::vector<int> out;
  if (text == "none") return out;
  if (text.rfind("every:", 0) == 0) {
    const int k = number(text.substr(6));
    if (k < 1) fail("every:K needs K >= 1");
    for (int l = k - 1; l < numLayers; l += k) out.push_back(l);
    return out;
  }
  if (text.rfind("last:", 0) == 0) {
    const int n = number(text.substr(5));
    if (n > numLayers) fail("the model has " + std::to_string(numLayers) + " layers");
    for (int l = numLayers - n; l < numLayers; ++l) out.push_back(l);
    return out;
  }
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    std::string part = text.substr(at, end - at);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    const int l = number(part);
    if (l >= numLayers) fail("layer " + part + " is past the model's " + std::to_string(numLayers) + " layers");
    out.push_back(l);
    at = end + 1;
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) fail("a layer is listed twice");
  return out;
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
  } else if (s.method == KvMethod::DeepSeek) {
    // One latent and one shared RoPE key, the same on every device.
    b.perTokenPerLayer = static_cast<std::int64_t>(cfg.numKvHeads) * s.dKv + effectiveRopeWidth(cfg, s);
    b.perDevicePerTokenPerLayer = b.perTokenPerLayer;
  } else {
    const int r = effectivePairs(cfg, s);
    b.effectiveRopePairs = r;
    const std::int64_t latentPerHead = s.svd == SvdMethod::Joint ? s.dKv : 2LL * s.dKv;
    // QK norm: one key-norm scale per token and KV head beside the latent (docs/conversion.md).
    b.keyScalePerTokenPerLayer = cfg.qkNorm ? cfg.numKvHeads : 0;
    const std::int64_t scalePerHead = cfg.qkNorm ? 1 : 0;
    b.perTokenPerLayer = static_cast<std::int64_t>(cfg.numKvHeads) * (2LL * r + latentPerHead + scalePerHead);
    b.perDevicePerTokenPerLayer = onDevice * (2LL * r + latentPerHead + scalePerHead);
    // A NoPE layer (SmolLM3) caches the latent alone.
    b.nopeLayers = static_cast<int>(cfg.nopeLayers.size());
    b.nopePerTokenPerLayer = static_cast<std::int64_t>(cfg.numKvHeads) * (latentPerHead + scalePerHead);
    b.nopePerDevicePerTokenPerLayer = onDevice * (latentPerHead + scalePerHead);
  }
  std::int64_t ropeLayers = cfg.numLayers - b.nopeLayers;
  if (s.method == KvMethod::Mha2Mla && s.layers) {  // hybrid: the unconverted layers keep the original cache
    ropeLayers = 0;
    b.nopeLayers = 0;
    for (int l = 0; l < cfg.numLayers; ++l) {
      if (!std::binary_search(s.layers->begin(), s.layers->end(), l)) {
        ++b.originalLayers;
      } else if (cfg.usesRope(l)) {
        ++ropeLayers;
      } else {
        ++b.nopeLayers;
      }
    }
  }
  const std::int64_t originalOnDevice = onDevice * 2LL * cfg.headDim;
  b.perDevicePerToken = b.perDevicePerTokenPerLayer * ropeLayers + b.nopePerDevicePerTokenPerLayer * b.nopeLayers +
                        originalOnDevice * b.originalLayers;
  b.perDeviceBytesPerToken = b.perDevicePerToken * bytes;
  b.perToken = b.perTokenPerLayer * ropeLayers + b.nopePerTokenPerLayer * b.nopeLayers +
               b.originalPerTokenPerLayer * b.originalLayers;
  b.bytesPerToken = b.perToken * bytes;
  const std::int64_t originalPerToken = b.originalPerTokenPerLayer * cfg.numLayers;
  b.originalBytesPerToken = originalPerToken * bytes;
  b.saving = static_cast<double>(b.perToken - originalPerToken) / static_cast<double>(originalPerToken);
  return b;
}

KvBudget currentKvBudget(const ModelConfig& cfg, DType cacheDType, int tpDegree) {
  if (cfg.latent) {
    // Cache per token and layer: every latent head (d_c in all) and the shared RoPE key.
    const LatentAttention& a = *cfg.latent;
    const std::int64_t bytes = static_cast<std::int64_t>(dtypeSize(cacheDType));
    KvBudget b;
    b.tpDegree = tpDegree;
    // A conversion's original is the source model's cache; from scratch, MHA with the same heads.
    const int originalKvHeads = a.conversion ? a.conversion->sourceKvHeads : cfg.numHeads;
    b.originalPerTokenPerLayer = 2LL * originalKvHeads * cfg.headDim;
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
  s.fullRope = cfg.mla->ropePairs * 2 == cfg.ropeDim();
  s.dKv = cfg.mla->dKv;
  s.svd = cfg.mla->svdMethod;
  s.layers = cfg.mla->layers;
  return computeKvBudget(original, s, cacheDType, tpDegree);
}

}  // namespace latentlab
