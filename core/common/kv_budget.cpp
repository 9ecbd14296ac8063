// KV-cache budget of original, MHA2MLA-converted (algorithms.md §2.3) and
// from-scratch latent models (§4), total and per tensor-parallel device.
#include "latentlab/kv_budget.h"
#include "latentlab/run_spec.h"

#include <algorithm>
#include <queue>

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
  if (!s.layerDKv.empty()) {
    if (static_cast<int>(s.layerDKv.size()) != cfg.numLayers) {
      return "d_kv per layer: " + std::to_string(s.layerDKv.size()) + " entries for " + std::to_string(cfg.numLayers) +
             " layers";
    }
    for (int l = 0; l < cfg.numLayers; ++l) {
      const int d = s.layerDKv[static_cast<std::size_t>(l)];
      const bool converted = !s.layers || std::binary_search(s.layers->begin(), s.layers->end(), l);
      if (converted ? d < 1 || d > s.dKv : d != 0) {
        return "d_kv per layer: layer " + std::to_string(l) + " has " + std::to_string(d) +
               (converted ? " (1 to d_kv = " + std::to_string(s.dKv) + ")" : " (an unconverted layer has 0)");
      }
    }
  }
  return std::nullopt;
}

namespace {
// The largest d_kv the conversion's [W_k_nope; W_v] (or each factor) allows.
int largestDKv(const ModelConfig& cfg, const KvSettings& s) {
  const int nope = cfg.headDim - 2 * effectivePairs(cfg, s);
  const std::int64_t nkv = cfg.numKvHeads;
  std::int64_t rank = 0;
  if (s.svd == SvdMethod::Joint) {
    rank = std::min<std::int64_t>(nkv * (nope + cfg.headDim), cfg.hiddenSize);
  } else {
    rank = std::min({nkv * nope, nkv * cfg.headDim, static_cast<std::int64_t>(cfg.hiddenSize)});
  }
  return static_cast<int>(rank / nkv);
}
}  // namespace

std::optional<std::string> resolveKvBudget(const ModelConfig& cfg, const KvSettings& settings, DType cacheDType,
                                           const std::string& text, const std::string& field, KvBudgetLimits* out) {
  if (settings.method != KvMethod::Mha2Mla) return field + ": a KV budget spread over layers is for the mha2mla target";
  KvSettings s = settings;
  s.layerDKv.clear();
  s.dKv = 1;
  if (auto why = checkKvSettings(cfg, s)) return field + ": " + *why;
  KvBudgetLimits lim;
  lim.maxDKv = largestDKv(cfg, s);
  const KvBudget atOne = computeKvBudget(cfg, s, cacheDType);
  s.dKv = lim.maxDKv;
  const KvBudget atMax = computeKvBudget(cfg, s, cacheDType);
  lim.convertedLayers = cfg.numLayers - atOne.originalLayers;
  if (lim.convertedLayers == 0) return field + ": no layer is converted, so there is no latent to size";
  lim.minBytes = atOne.bytesPerToken;
  lim.maxBytes = atMax.bytesPerToken;
  lim.stepBytes = static_cast<std::int64_t>(cfg.numKvHeads) * (s.svd == SvdMethod::Joint ? 1 : 2) *
                  static_cast<std::int64_t>(dtypeSize(cacheDType));
  // The text: bytes, a saving in percent, or the bytes of a uniform d_kv.
  const auto number = [&](const std::string& t, double* v) {
    if (t.empty() || t.find_first_not_of("0123456789.") != std::string::npos) return false;
    try {
      *v = std::stod(t);
    } catch (const std::exception&) {
      return false;
    }
    return true;
  };
  const std::string form =
      "give bytes per token (12288), a saving in percent (75%) or the bytes of a uniform d_kv (d_kv:8)";
  double v = 0.0;
  if (text.rfind("d_kv:", 0) == 0) {
    if (!number(text.substr(5), &v) || v < 1 || v != static_cast<int>(v)) {
      return field + " '" + text + "': d_kv:K needs a whole K of at least 1";
    }
    if (v > lim.maxDKv) {
      return field + " '" + text + "': d_kv " + std::to_string(static_cast<int>(v)) + " is past the largest, " +
             std::to_string(lim.maxDKv);
    }
    lim.budgetBytes = lim.minBytes + lim.stepBytes * lim.convertedLayers * (static_cast<std::int64_t>(v) - 1);
  } else if (!text.empty() && text.back() == '%') {
    std::string t = text.substr(0, text.size() - 1);
    if (!t.empty() && t.front() == '-') t.erase(0, 1);  // "-75%", the sign the saving is shown with
    if (!number(t, &v) || v <= 0.0 || v >= 100.0) {
      return field + " '" + text + "': a saving must be a percentage between 0 and 100 (exclusive)";
    }
    lim.budgetBytes = static_cast<std::int64_t>(static_cast<double>(atOne.originalBytesPerToken) * (1.0 - v / 100.0));
  } else {
    std::string t = text;
    if (!t.empty() && (t.back() == 'B' || t.back() == 'b')) t.pop_back();
    if (!number(t, &v) || v != static_cast<double>(static_cast<std::int64_t>(v))) {
      return field + " '" + text + "': " + form;
    }
    lim.budgetBytes = static_cast<std::int64_t>(v);
  }
  if (lim.budgetBytes < lim.minBytes) {
    return field + " '" + text + "': " + std::to_string(lim.budgetBytes) +
           " bytes per token is under the smallest cache, " + std::to_string(lim.minBytes) +
           " bytes (d_kv 1 in each of the " + std::to_string(lim.convertedLayers) + " converted layers)";
  }
  if (lim.budgetBytes > lim.maxBytes) {
    return field + " '" + text + "': " + std::to_string(lim.budgetBytes) +
           " bytes per token is past the full-rank cache, " + std::to_string(lim.maxBytes) + " bytes (d_kv " +
           std::to_string(lim.maxDKv) + " in every converted layer)";
  }
  const std::int64_t steps = (lim.budgetBytes - lim.minBytes) / lim.stepBytes;  // steps past d_kv 1 everywhere
  lim.uniformDKv = static_cast<int>(std::min<std::int64_t>(lim.maxDKv, 1 + steps / lim.convertedLayers));
  if (out != nullptr) *out = lim;
  return std::nullopt;
}

KvAllocation allocateKvBudget(const KvBudgetLimits& limits, const std::vector<std::vector<double>>& gains) {
  KvAllocation a;
  a.limits = limits;
  const std::size_t layers = gains.size();
  a.layerDKv.assign(layers, 0);
  std::int64_t steps = (limits.budgetBytes - limits.minBytes) / limits.stepBytes;
  // Every converted layer has d_kv 1; the further steps go, one at a time, to
  // the layer whose next step keeps the most (the gains of a layer fall, so
  // this is the best split of the steps).
  using Next = std::pair<double, std::size_t>;  // (gain of the layer's next step, layer)
  std::priority_queue<Next> next;
  const auto push = [&](std::size_t l) {
    const auto k = static_cast<std::size_t>(a.layerDKv[l]);
    if (a.layerDKv[l] < limits.maxDKv && k < gains[l].size()) next.emplace(gains[l][k], l);
  };
  for (std::size_t l = 0; l < layers; ++l) {
    if (gains[l].empty()) continue;
    a.layerDKv[l] = 1;
    push(l);
  }
  for (; steps > 0 && !next.empty(); --steps) {
    const auto [gain, l] = next.top();
    next.pop();
    ++a.layerDKv[l];
    push(l);
  }
  std::int64_t used = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    if (gains[l].empty()) {
      a.kept.push_back(0.0);
      a.uniformKept.push_back(0.0);
      continue;
    }
    used += a.layerDKv[l] - 1;
    double total = 0.0, kept = 0.0, uniform = 0.0;
    for (std::size_t k = 0; k < gains[l].size(); ++k) {
      total += gains[l][k];
      if (k < static_cast<std::size_t>(a.layerDKv[l])) kept += gains[l][k];
      if (k < static_cast<std::size_t>(limits.uniformDKv)) uniform += gains[l][k];
    }
    a.kept.push_back(total > 0.0 ? kept / total : 1.0);
    a.uniformKept.push_back(total > 0.0 ? uniform / total : 1.0);
  }
  a.bytesPerToken = limits.minBytes + used * limits.stepBytes;
  a.uniformBytesPerToken =
      limits.minBytes + static_cast<std::int64_t>(limits.convertedLayers) * (limits.uniformDKv - 1) * limits.stepBytes;
  return a;
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

ModelConfig convertedCacheConfig(const ModelConfig& cfg, const KvSettings& s) {
  if (s.method == KvMethod::None) return cfg;
  if (s.method == KvMethod::DeepSeek) return deepSeekConvertedConfig(cfg, s, true);
  ModelConfig out = cfg;
  MlaConversion m;
  m.ropePairs = effectivePairs(cfg, s);
  m.dKv = s.dKv;
  m.svdMethod = s.svd;
  m.layers = s.layers;
  m.layerDKv = s.layerDKv;
  out.mla = m;
  return out;
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
  b.perToken = b.perTokenPerLayer * ropeLayers + b.nopePerTokenPerLayer * b.nopeLayers +
               b.originalPerTokenPerLayer * b.originalLayers;
  for (int l = 0; l < cfg.numLayers; ++l) {
    const bool converted =
        s.method != KvMethod::Mha2Mla || !s.layers || std::binary_search(s.layers->begin(), s.layers->end(), l);
    if (!converted) {
      b.layerElements.push_back(b.originalPerTokenPerLayer);
    } else if (s.method != KvMethod::Mha2Mla) {
      b.layerElements.push_back(b.perTokenPerLayer);
    } else {
      const std::int64_t full = cfg.usesRope(l) ? b.perTokenPerLayer : b.nopePerTokenPerLayer;
      const std::int64_t unit = s.svd == SvdMethod::Joint ? 1 : 2;  // latent dims per KV head and d_kv step
      const int dKv = s.layerDKv.empty() ? s.dKv : s.layerDKv[static_cast<std::size_t>(l)];
      b.layerElements.push_back(full - static_cast<std::int64_t>(cfg.numKvHeads) * unit * (s.dKv - dKv));
      if (!s.layerDKv.empty()) {  // the totals at each layer's own d_kv
        const std::int64_t less = unit * (s.dKv - dKv);
        b.perToken -= cfg.numKvHeads * less;
        b.perDevicePerToken -= onDevice * less;
      }
    }
  }
  b.perDeviceBytesPerToken = b.perDevicePerToken * bytes;
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
    b.layerElements.assign(static_cast<std::size_t>(cfg.numLayers), b.perTokenPerLayer);
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
  s.layerDKv = cfg.mla->layerDKv;
  return computeKvBudget(original, s, cacheDType, tpDegree);
}

}  // namespace latentlab
