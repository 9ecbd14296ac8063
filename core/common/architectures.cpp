// Built-in shapes: SmolLM-135M/360M/1.7B, Llama-2-7B, Qwen3-0.6B/1.7B/4B,
// SmolLM3-3B, Phi-4-mini, Gemma-3-1B, Qwen3-30B-A3B, the MLRA paper's scale and the demo models;
// attention variants of a shape.
#include "latentlab/architectures.h"

#include <cstdlib>
#include <map>
#include <optional>

#include "latentlab/error.h"

namespace latentlab {

namespace {
ModelConfig shape(int vocab, int hidden, int inter, int layers, int heads, int kv, bool tied, double eps, double theta,
                  int maxPos) {
  ModelConfig c;
  c.vocabSize = vocab;
  c.hiddenSize = hidden;
  c.intermediateSize = inter;
  c.numLayers = layers;
  c.numHeads = heads;
  c.numKvHeads = kv;
  c.headDim = hidden / heads;
  c.tieWordEmbeddings = tied;
  c.rmsNormEps = eps;
  c.ropeTheta = theta;
  c.maxPositionEmbeddings = maxPos;
  return c;
}

// Qwen3: QK norms, head_dim 128 whatever the width, tied at these sizes.
ModelConfig qwen3(int hidden, int inter, int layers, int heads, bool tied) {
  ModelConfig c = shape(151936, hidden, inter, layers, heads, 8, tied, 1e-6, 1000000.0, 40960);
  c.modelType = "qwen3";
  c.architecture = "Qwen3ForCausalLM";
  c.headDim = 128;
  c.qkNorm = true;
  return c;
}

// SmolLM3-3B: every 4th layer without RoPE.
ModelConfig smollm3() {
  ModelConfig c = shape(128256, 2048, 11008, 36, 16, 4, true, 1e-6, 5000000.0, 65536);
  c.modelType = "smollm3";
  c.architecture = "SmolLM3ForCausalLM";
  for (int l = 3; l < c.numLayers; l += 4) c.nopeLayers.push_back(l);
  return c;
}

// Phi-4-mini: 96 of 128 head dims rotate, fused projections. The shape only:
// its checkpoint's longrope factors come with the checkpoint (the shape's RoPE
// is unscaled, at the 4k original context).
ModelConfig phi4mini() {
  ModelConfig c = shape(200064, 3072, 8192, 32, 24, 8, true, 1e-5, 10000.0, 4096);
  c.modelType = "phi3";
  c.architecture = "Phi3ForCausalLM";
  c.rotaryDim = 96;
  c.fusedProjections = true;
  return c;
}

// Gemma-3-1B (text): one KV head of 256, every 6th layer global, the others
// windowed to 512 tokens at RoPE base 10,000.
ModelConfig gemma3(int hidden, int inter, int layers, int heads, int kv, int window) {
  ModelConfig c = shape(262144, hidden, inter, layers, heads, kv, true, 1e-6, 1000000.0, 32768);
  c.modelType = "gemma3_text";
  c.architecture = "Gemma3ForCausalLM";
  c.headDim = 256;
  c.qkNorm = c.normPlusOne = c.sandwichNorms = c.scaleEmbeddings = c.geluTanh = true;
  c.queryScalar = 256.0;
  c.slidingWindow = window;
  for (int l = 0; l < layers; ++l) {
    if ((l + 1) % 6 != 0) c.slidingLayers.push_back(l);
  }
  c.localRopeTheta = 10000.0;
  return c;
}

// Qwen3-30B-A3B: 8 of 128 experts of width 768 per token in every layer.
ModelConfig qwen3Moe() {
  ModelConfig c = shape(151936, 2048, 6144, 48, 32, 4, false, 1e-6, 1000000.0, 40960);
  c.modelType = "qwen3_moe";
  c.architecture = "Qwen3MoeForCausalLM";
  c.headDim = 128;
  c.qkNorm = true;
  MoeConfig m;
  m.experts = 128;
  m.topK = 8;
  m.intermediate = 768;
  m.normTopK = true;
  c.moe = m;
  return c;
}

const std::map<std::string, ModelConfig>& table() {
  static const std::map<std::string, ModelConfig> t = {
      // HF SmolLM family (GQA, tied embeddings, d_h 64).
      {"smollm-135m", shape(49152, 576, 1536, 30, 9, 3, true, 1e-5, 10000.0, 2048)},
      {"smollm-360m", shape(49152, 960, 2560, 32, 15, 5, true, 1e-5, 10000.0, 2048)},
      {"smollm-1.7b", shape(49152, 2048, 8192, 24, 32, 32, true, 1e-5, 10000.0, 2048)},
      // Llama-2-7B (MHA, d_h 128).
      {"llama-2-7b", shape(32000, 4096, 11008, 32, 32, 32, false, 1e-5, 10000.0, 4096)},
      // The 2025-26 small open models.
      {"qwen3-0.6b", qwen3(1024, 3072, 28, 16, true)},
      {"qwen3-1.7b", qwen3(2048, 6144, 28, 16, true)},
      {"qwen3-4b", qwen3(2560, 9728, 36, 32, true)},
      {"smollm3-3b", smollm3()},
      {"phi-4-mini", phi4mini()},
      {"gemma-3-1b", gemma3(1152, 6912, 26, 4, 1, 512)},
      {"qwen3-30b-a3b", qwen3Moe()},
      // Demo bases pre-trained by LatentLab on CPU (d_h 32: r = 2 by default).
      {"demo-mha", shape(4096, 128, 352, 4, 4, 4, true, 1e-5, 10000.0, 1024)},
      {"demo-gqa", shape(4096, 128, 352, 4, 4, 2, true, 1e-5, 10000.0, 1024)},
      // The MLRA paper's scale (arXiv 2603.02188): d 3072, 24 layers, 24 heads of 128,
      // MHA with MLP 8192, GPT-2 vocabulary padded to 50304, tied embeddings, 2048 context.
      {"mlra-paper", shape(50304, 3072, 8192, 24, 24, 24, true, 1e-6, 10000.0, 2048)},
  };
  return t;
}
}  // namespace

std::vector<std::string> builtinArchitectureNames() {
  std::vector<std::string> out;
  for (const auto& [name, cfg] : table()) out.push_back(name);
  return out;
}

ModelConfig builtinArchitecture(const std::string& name, int vocabSize) {
  auto it = table().find(name);
  if (it == table().end()) {
    std::string known;
    for (const auto& n : builtinArchitectureNames()) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::BadInput, "unknown architecture '" + name + "'", "Known: " + known + ".");
  }
  ModelConfig c = it->second;
  if (vocabSize > 0) c.vocabSize = vocabSize;
  c.validate("architecture '" + name + "'");
  return c;
}

namespace {
// mha, gqa, or a latent kind with its k (gla: latent heads; mlra: branches).
struct ParsedVariant {
  enum class Cache { Mha, Gqa, Latent } cache = Cache::Latent;
  LatentKind latent = LatentKind::Mla;
  int k = 1;
};

std::optional<ParsedVariant> parseVariant(const std::string& name) {
  using C = ParsedVariant::Cache;
  if (name == "mha") return ParsedVariant{C::Mha, LatentKind::Mla, 1};
  if (name == "gqa") return ParsedVariant{C::Gqa, LatentKind::Mla, 1};
  if (name == "mla") return ParsedVariant{C::Latent, LatentKind::Mla, 1};
  if (name == "mlra-2") return ParsedVariant{C::Latent, LatentKind::Mlra, 2};
  if (name == "mlra-4") return ParsedVariant{C::Latent, LatentKind::Mlra, 4};
  if (name.rfind("gla-", 0) == 0 && name.size() > 4 && name.size() < 8) {
    const std::string digits = name.substr(4);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits[0] == '0') return std::nullopt;
    return ParsedVariant{C::Latent, LatentKind::Gla, std::atoi(digits.c_str())};
  }
  return std::nullopt;
}

[[noreturn]] void badOption(const std::string& where, const std::string& field, const std::string& problem) {
  throw Error(ErrorCode::BadSpec, where + "." + field + " " + problem);
}
}  // namespace

bool isAttentionVariant(const std::string& attention) {
  return parseVariant(attention).has_value();
}

ModelConfig attentionVariant(const ModelConfig& base, const std::string& attention, const AttentionOptions& o,
                             const std::string& where) {
  const auto v = parseVariant(attention);
  if (!v) badOption(where, "attention", "must be mha, gqa, mla, gla-<k>, mlra-2 or mlra-4, got '" + attention + "'");
  const std::string opt = "attention_options";
  if (o.matchMultiple < 1) badOption(where, opt + ".match_multiple", "must be at least 1");
  if (base.moe) {
    badOption(where, "attention",
              "variants of a mixture-of-experts shape are not supported: the variants compare "
              "dense decoders at matched parameters");
  }
  ModelConfig cfg = base;
  cfg.mla.reset();
  cfg.latent.reset();
  cfg.attentionBias = false;
  cfg.oProjBias = false;
  const int nh = cfg.numHeads, dh = cfg.headDim;
  if (v->cache == ParsedVariant::Cache::Mha) {
    cfg.numKvHeads = nh;
  } else if (v->cache == ParsedVariant::Cache::Gqa) {
    const int group = o.gqaGroup > 0 ? o.gqaGroup : (base.numKvHeads < nh ? base.kvGroupSize() : 4);
    if (nh % group != 0) {
      badOption(where, opt + ".gqa_group",
                "(" + std::to_string(group) + ") does not divide the " + std::to_string(nh) + " query heads");
    }
    cfg.numKvHeads = nh / group;
  } else {
    LatentAttention a;
    a.kind = v->latent;
    a.latentHeads = v->latent == LatentKind::Gla ? v->k : v->latent == LatentKind::Mlra ? 4 : 1;
    a.branches = v->latent == LatentKind::Mlra ? v->k : 1;
    a.dC = o.dC > 0 ? o.dC : 4 * dh;
    a.dRope = o.dRope > 0 ? o.dRope : dh / 2;
    a.dNope = o.dNope > 0 ? o.dNope : dh;
    a.dV = o.dV > 0 ? o.dV : dh;
    a.qLoraRank = o.qLoraRank > 0 ? o.qLoraRank : defaultQLoraRank(cfg.hiddenSize, a.kind, o.matchMultiple);
    a.scaled = o.scaled;
    if (nh % a.latentsPerBranch() != 0) {
      badOption(where, "attention",
                "'" + attention + "' splits the query heads into " + std::to_string(a.latentsPerBranch()) +
                    " groups, but there are " + std::to_string(nh) + " heads");
    }
    if (a.dC % a.latentHeads != 0) {
      badOption(where, opt + ".d_c",
                "(" + std::to_string(a.dC) + ") is not divisible by the " + std::to_string(a.latentHeads) +
                    " latent heads of " + attention);
    }
    if (a.dRope % 2 != 0)
      badOption(where, opt + ".d_rope", "must be even (RoPE rotates pairs), got " + std::to_string(a.dRope));
    cfg.numKvHeads = nh;
    cfg.latent = a;
    // A latent layer has its own RoPE key and no QK norms: a family's layer
    // options stay with the family's own attention (MHA / GQA variants).
    // The rest of the decoder becomes Llama's too, as its config.json is written.
    cfg.qkNorm = false;
    cfg.nopeLayers.clear();
    cfg.rotaryDim = 0;
    cfg.fusedProjections = false;
    cfg.slidingWindow.reset();
    cfg.slidingLayers.clear();
    cfg.localRopeTheta.reset();
    cfg.queryScalar.reset();
    cfg.normPlusOne = cfg.sandwichNorms = cfg.scaleEmbeddings = cfg.geluTanh = false;
    cfg.finalLogitSoftcap.reset();
    cfg.modelType = "llama";
    cfg.architecture = "LlamaForCausalLM";
  }
  cfg.validate(where + ".attention");
  if (o.match == "architecture") return matchParameters(cfg, countParameters(base), o.matchMultiple);
  if (o.match == "target") {
    if (o.targetParameters <= 0) badOption(where, opt + ".target_parameters", "must be positive for match 'target'");
    return matchParameters(cfg, o.targetParameters, o.matchMultiple);
  }
  if (o.match != "none")
    badOption(where, opt + ".match", "must be architecture, target or none, got '" + o.match + "'");
  return cfg;
}

}  // namespace latentlab
