// Key table of Llama-family (Phi-3's fused layout included), MHA2MLA-converted
// and from-scratch latent checkpoints.
#include "io/weight_table.h"

#include <algorithm>
#include <set>

#include "latentlab/error.h"

namespace latentlab {

namespace {
// From-scratch MLA / GLA / MLRA (see model/latent_attention.h for the layout).
void appendLatentTensors(const LatentAttention& la, const ModelConfig& c, const std::string& a,
                         std::vector<ExpectedTensor>& out) {
  using S = std::vector<std::int64_t>;
  const std::int64_t d = c.hiddenSize, nh = c.numHeads, q = la.qLoraRank, G = nh / la.latentsPerBranch();
  if (q > 0) {
    out.push_back({a + "q_a_proj.weight", S{q, d}});
    out.push_back({a + "q_a_layernorm.weight", S{q}});
    out.push_back({a + "q_b_proj.weight", S{nh * (la.dNope + la.dRope), q}});
  } else {
    out.push_back({a + "q_proj.weight", S{nh * (la.dNope + la.dRope), d}});
  }
  out.push_back({a + "kv_a_proj_with_mqa.weight", S{la.dC + la.dRope, d}});
  if (la.latentNorm) out.push_back({a + "kv_a_layernorm.weight", S{la.dC}});
  out.push_back({a + "kv_b_proj.weight", S{la.latentHeads * G * (la.dNope + la.dV), la.latentDim()}});
  out.push_back({a + "o_proj.weight", S{d, nh * la.dV}});
}
// The official MHA2MLA code's names for LatentLab's converted attention
// (docs/official_mha2mla.md): format 2 k_r_proj and kv_proj.{down_kv | down_k,
// down_v, up_k, up_v}; format 1 W_k_r, W_down_k (, W_down_v), W_up_k, W_up_v.
struct OfficialNames {
  std::string kRope, down, downK, downV, upK, upV;
};
OfficialNames officialNames(int format) {
  if (format == 1) return {"W_k_r", "W_down_k", "W_down_k", "W_down_v", "W_up_k", "W_up_v"};
  return {"k_r_proj", "kv_proj.down_kv", "kv_proj.down_k", "kv_proj.down_v", "kv_proj.up_k", "kv_proj.up_v"};
}

// An official MHA2MLA checkpoint's attention (names of officialNames()).
void appendOfficialTensors(const ModelConfig& c, const std::string& a, std::int64_t r2, std::int64_t lat,
                           std::vector<ExpectedTensor>& out) {
  using S = std::vector<std::int64_t>;
  const std::int64_t d = c.hiddenSize, dh = c.headDim, nkv = c.numKvHeads, nope = dh - r2;
  const OfficialNames n = officialNames(c.mla->official->format);
  const bool b = c.attentionBias;
  out.push_back({a + n.kRope + ".weight", S{nkv * r2, d}});
  if (b) out.push_back({a + n.kRope + ".bias", S{nkv * r2}});
  if (c.mla->svdMethod == SvdMethod::Split) {
    out.push_back({a + n.downK + ".weight", S{lat, d}});
    out.push_back({a + n.downV + ".weight", S{lat, d}});
  } else {
    out.push_back({a + n.down + ".weight", S{lat, d}});
  }
  out.push_back({a + n.upK + ".weight", S{nkv * nope, lat}});
  out.push_back({a + n.upV + ".weight", S{nkv * dh, lat}});
  if (b) {
    out.push_back({a + n.upK + ".bias", S{nkv * nope}});
    out.push_back({a + n.upV + ".bias", S{nkv * dh}});
  }
}
}  // namespace

std::vector<ExpectedTensor> expectedTensors(const ModelConfig& c) {
  using S = std::vector<std::int64_t>;
  const std::int64_t d = c.hiddenSize, dh = c.headDim, nh = c.numHeads, nkv = c.numKvHeads;
  const std::int64_t I = c.intermediateSize, V = c.vocabSize;
  std::vector<ExpectedTensor> out;
  out.push_back({"model.embed_tokens.weight", S{V, d}});
  for (int l = 0; l < c.numLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string a = p + "self_attn.";
    if (c.latent) {
      appendLatentTensors(*c.latent, c, a, out);
    } else if (c.fusedProjections && !c.mla) {
      out.push_back({a + "qkv_proj.weight", S{(nh + 2 * nkv) * dh, d}});
      out.push_back({a + "o_proj.weight", S{d, nh * dh}});
    } else {
      out.push_back({a + "q_proj.weight", S{nh * dh, d}});
      if (c.attentionBias) out.push_back({a + "q_proj.bias", S{nh * dh}});
      if (!c.mla || !c.mla->converts(l)) {  // original attention (in a hybrid model, its unconverted layers)
        out.push_back({a + "k_proj.weight", S{nkv * dh, d}});
        out.push_back({a + "v_proj.weight", S{nkv * dh, d}});
        if (c.attentionBias) {
          out.push_back({a + "k_proj.bias", S{nkv * dh}});
          out.push_back({a + "v_proj.bias", S{nkv * dh}});
        }
      } else {
        // A NoPE layer (SmolLM3) keeps no RoPE key.
        const std::int64_t r2 = c.usesRope(l) ? 2 * c.mla->ropePairs : 0, nope = dh - r2, lat = nkv * c.mla->dKvOf(l);
        if (c.mla->official) {
          appendOfficialTensors(c, a, r2, lat, out);
        } else if (r2 > 0) {
          out.push_back({a + "k_rope_proj.weight", S{nkv * r2, d}});
          if (c.attentionBias) out.push_back({a + "k_rope_proj.bias", S{nkv * r2}});
        }
        if (c.mla->official) {
          // (the official names above)
        } else if (c.mla->svdMethod == SvdMethod::Split) {
          out.push_back({a + "k_down.weight", S{lat, d}});
          out.push_back({a + "v_down.weight", S{lat, d}});
          out.push_back({a + "k_up.weight", S{nkv * nope, lat}});
          out.push_back({a + "v_up.weight", S{nkv * dh, lat}});
          if (c.attentionBias) {
            out.push_back({a + "k_up.bias", S{nkv * nope}});
            out.push_back({a + "v_up.bias", S{nkv * dh}});
          }
        } else {
          out.push_back({a + "kv_down.weight", S{lat, d}});
          out.push_back({a + "kv_up.weight", S{nkv * nope + nkv * dh, lat}});
          if (c.attentionBias) out.push_back({a + "kv_up.bias", S{nkv * nope + nkv * dh}});
        }
      }
      out.push_back({a + "o_proj.weight", S{d, nh * dh}});
      if (c.oProjBias) out.push_back({a + "o_proj.bias", S{d}});
    }
    if (c.qkNorm && !c.latent) {
      out.push_back({a + "q_norm.weight", S{dh}});
      out.push_back({a + "k_norm.weight", S{dh}});
    }
    const std::string m = p + "mlp.";
    if (c.sparseLayer(l)) {  // Qwen3-MoE: the router and each expert's SwiGLU (or the two fused 3-D tensors)
      const std::int64_t E = c.moe->experts, Im = c.moe->intermediate;
      out.push_back({m + "gate.weight", S{E, d}});
      if (c.moe->fusedExperts) {
        out.push_back({m + "experts.gate_up_proj", S{E, 2 * Im, d}});
        out.push_back({m + "experts.down_proj", S{E, d, Im}});
      } else {
        for (std::int64_t e = 0; e < E; ++e) {
          const std::string x = m + "experts." + std::to_string(e) + ".";
          out.push_back({x + "gate_proj.weight", S{Im, d}});
          out.push_back({x + "up_proj.weight", S{Im, d}});
          out.push_back({x + "down_proj.weight", S{d, Im}});
        }
      }
    } else if (c.fusedProjections) {
      out.push_back({m + "gate_up_proj.weight", S{2 * I, d}});
    } else {
      out.push_back({m + "gate_proj.weight", S{I, d}});
      out.push_back({m + "up_proj.weight", S{I, d}});
    }
    if (!c.sparseLayer(l)) out.push_back({m + "down_proj.weight", S{d, I}});
    if (c.mlpBias && !c.sparseLayer(l)) {
      out.push_back({m + "gate_proj.bias", S{I}});
      out.push_back({m + "up_proj.bias", S{I}});
      out.push_back({m + "down_proj.bias", S{d}});
    }
    out.push_back({p + "input_layernorm.weight", S{d}});
    out.push_back({p + "post_attention_layernorm.weight", S{d}});
    if (c.sandwichNorms) {
      out.push_back({p + "pre_feedforward_layernorm.weight", S{d}});
      out.push_back({p + "post_feedforward_layernorm.weight", S{d}});
    }
  }
  out.push_back({"model.norm.weight", S{d}});
  if (!c.tieWordEmbeddings) out.push_back({"lm_head.weight", S{V, d}});
  return out;
}

namespace {

// The official checkpoint's rows of LatentLab's q_proj (per head: RoPE dims,
// then NoPE dims). Format 2 stores every head's RoPE rows first, then every
// head's NoPE rows, each in ascending dim order (LatentLab's order within a
// head); format 1 keeps the original rows, reordered here by each KV group's pairs.
std::vector<std::int64_t> officialQueryRows(const ModelConfig& c, int layer) {
  const std::int64_t nh = c.numHeads, dh = c.headDim, r2 = 2 * c.mla->ropePairs, G = c.kvGroupSize();
  std::vector<std::int64_t> rows;
  for (std::int64_t h = 0; h < nh; ++h) {
    if (c.mla->official->format == 2) {
      for (std::int64_t j = 0; j < r2; ++j) rows.push_back(h * r2 + j);
      for (std::int64_t j = 0; j < dh - r2; ++j) rows.push_back(nh * r2 + h * (dh - r2) + j);
    } else {
      const auto& kept = c.mla->pairs.at(static_cast<std::size_t>(layer)).at(static_cast<std::size_t>(h / G));
      // Kept dims: each kept pair's first dim, then its partner; then the rest ascending.
      std::vector<bool> used(static_cast<std::size_t>(dh), false);
      std::vector<std::int64_t> order;
      for (int p : kept) order.push_back(p);
      for (int p : kept) order.push_back(p + dh / 2);
      for (auto i : order) used[static_cast<std::size_t>(i)] = true;
      for (std::int64_t i = 0; i < dh; ++i)
        if (!used[static_cast<std::size_t>(i)]) order.push_back(i);
      for (auto i : order) rows.push_back(h * dh + i);
    }
  }
  return rows;
}

TensorSource officialSource(const ModelConfig& c, const std::string& parameter) {
  const std::string marker = ".self_attn.";
  const auto at = parameter.find(marker);
  if (at == std::string::npos) return {{{parameter}}};
  const std::string prefix = parameter.substr(0, at + marker.size());
  const std::string local = parameter.substr(at + marker.size());  // "q_proj.weight"
  const bool bias = local.ends_with(".bias");
  const std::string kind = bias ? ".bias" : ".weight";
  const OfficialNames n = officialNames(c.mla->official->format);
  auto one = [&](const std::string& name) { return TensorSource{{TensorPart{prefix + name + kind}}}; };
  if (local.starts_with("q_proj.")) {
    const int layer = std::stoi(parameter.substr(parameter.find("layers.") + 7));
    TensorPart p{prefix + "q_proj" + kind};
    p.gather = officialQueryRows(c, layer);
    return {{p}};
  }
  if (local.starts_with("k_rope_proj.")) return one(n.kRope);
  if (local.starts_with("kv_down.")) return one(n.down);
  if (local.starts_with("kv_up.")) return {{TensorPart{prefix + n.upK + kind}, TensorPart{prefix + n.upV + kind}}};
  if (local.starts_with("k_down.")) return one(n.downK);
  if (local.starts_with("v_down.")) return one(n.downV);
  if (local.starts_with("k_up.")) return one(n.upK);
  if (local.starts_with("v_up.")) return one(n.upV);
  return {{{parameter}}};
}

}  // namespace

TensorSource checkpointSource(const ModelConfig& c, const std::string& parameter) {
  if (c.moe && c.moe->fusedExperts) {
    // experts.gate_up_proj [E, 2 Im, d] holds expert e's gate rows then up rows; experts.down_proj [E, d, Im].
    const auto at = parameter.find(".mlp.experts.");
    if (at != std::string::npos) {
      const std::string prefix = parameter.substr(0, at + 13);  // "...mlp.experts."
      const std::string rest = parameter.substr(at + 13);       // "3.gate_proj.weight"
      const std::int64_t e = std::stoll(rest.substr(0, rest.find('.')));
      const std::int64_t Im = c.moe->intermediate;
      TensorPart part(prefix + (rest.find("down_proj") != std::string::npos ? "down_proj" : "gate_up_proj"));
      part.select = e;
      if (rest.find("gate_proj") != std::string::npos) part.rows = Im;
      if (rest.find("up_proj") != std::string::npos && rest.find("gate_up") == std::string::npos) {
        part.rowBegin = Im;
        part.rows = Im;
      }
      return {{part}};
    }
  }
  if (c.mla && c.mla->official) return officialSource(c, parameter);
  if (!c.fusedProjections) return {{{parameter}}};
  auto fusedPart = [&](const std::string& suffix, const std::string& fused, std::int64_t begin, std::int64_t rows,
                       TensorSource* out) {
    if (!parameter.ends_with(suffix)) return false;
    *out = {{TensorPart{parameter.substr(0, parameter.size() - suffix.size()) + fused, begin, rows}}};
    return true;
  };
  const std::int64_t q = static_cast<std::int64_t>(c.numHeads) * c.headDim;
  const std::int64_t kv = static_cast<std::int64_t>(c.numKvHeads) * c.headDim, I = c.intermediateSize;
  TensorSource s;
  // Phi-3: qkv_proj holds [q; k; v] rows, gate_up_proj [gate; up].
  if (!c.mla && !c.latent &&
      (fusedPart("self_attn.q_proj.weight", "self_attn.qkv_proj.weight", 0, q, &s) ||
       fusedPart("self_attn.k_proj.weight", "self_attn.qkv_proj.weight", q, kv, &s) ||
       fusedPart("self_attn.v_proj.weight", "self_attn.qkv_proj.weight", q + kv, kv, &s)))
    return s;
  if (fusedPart("mlp.gate_proj.weight", "mlp.gate_up_proj.weight", 0, I, &s) ||
      fusedPart("mlp.up_proj.weight", "mlp.gate_up_proj.weight", I, I, &s))
    return s;
  return {{{parameter}}};
}

bool isIgnorableKey(const std::string& name) {
  return name.find("rotary_emb.inv_freq") != std::string::npos;
}

namespace {
std::string shapeText(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}
}  // namespace

std::vector<std::string> checkCheckpoint(const HfCheckpoint& ckpt) {
  // Bound what the key table allocates by what the files hold: every layer has
  // tensors of its own, so a config with more layers than the files have
  // tensors is refused before the table is built.
  const auto names = ckpt.names();
  const int layers = ckpt.config().numLayers;
  if (static_cast<std::size_t>(layers) > names.size()) {
    throw Error(ErrorCode::BadCheckpoint,
                ckpt.dir().string() + ": config.json num_hidden_layers is " + std::to_string(layers) +
                    " but the weights hold " + std::to_string(names.size()) + " tensors",
                "The weights do not match config.json (wrong model, or an incomplete download).");
  }
  const std::string last = "model.layers." + std::to_string(layers - 1) + ".";
  if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(last, 0) == 0; })) {
    throw Error(ErrorCode::BadCheckpoint,
                ckpt.dir().string() + ": config.json num_hidden_layers is " + std::to_string(layers) +
                    " but the weights have no tensor of layer " + std::to_string(layers - 1),
                "The weights do not match config.json (wrong model, or an incomplete download).");
  }
  const auto expected = expectedTensors(ckpt.config());
  std::set<std::string> used;
  for (const auto& e : expected) {
    auto entry = ckpt.find(e.name);
    if (!entry) {
      throw Error(ErrorCode::BadCheckpoint, ckpt.dir().string() + ": tensor '" + e.name + "' is missing",
                  "The weights do not match config.json (wrong model, or an incomplete download).");
    }
    const TensorInfo& t = *entry->info;
    if (!t.dtype) {
      throw Error(ErrorCode::BadCheckpoint, entry->file->path().string() + ": tensor '" + e.name + "' has dtype " +
                                                t.dtypeName + "; expected F32, F16 or BF16");
    }
    if (t.shape != e.shape) {
      throw Error(ErrorCode::BadCheckpoint, entry->file->path().string() + ": tensor '" + e.name + "' has shape " +
                                                shapeText(t.shape) + " but config.json implies " + shapeText(e.shape));
    }
    used.insert(e.name);
  }
  std::vector<std::string> unused;
  for (const auto& name : ckpt.names()) {
    if (!used.count(name)) unused.push_back(name);
  }
  return unused;
}

}  // namespace latentlab
