// Key table of Llama-family (Phi-3's fused layout included), MHA2MLA-converted
// and from-scratch latent checkpoints.
#include "model/weight_table.h"

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
      if (!c.mla) {
        out.push_back({a + "k_proj.weight", S{nkv * dh, d}});
        out.push_back({a + "v_proj.weight", S{nkv * dh, d}});
        if (c.attentionBias) {
          out.push_back({a + "k_proj.bias", S{nkv * dh}});
          out.push_back({a + "v_proj.bias", S{nkv * dh}});
        }
      } else {
        // A NoPE layer (SmolLM3) keeps no RoPE key.
        const std::int64_t r2 = c.usesRope(l) ? 2 * c.mla->ropePairs : 0, nope = dh - r2, lat = nkv * c.mla->dKv;
        if (r2 > 0) {
          out.push_back({a + "k_rope_proj.weight", S{nkv * r2, d}});
          if (c.attentionBias) out.push_back({a + "k_rope_proj.bias", S{nkv * r2}});
        }
        if (c.mla->svdMethod == "split") {
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
    if (c.fusedProjections) {
      out.push_back({m + "gate_up_proj.weight", S{2 * I, d}});
    } else {
      out.push_back({m + "gate_proj.weight", S{I, d}});
      out.push_back({m + "up_proj.weight", S{I, d}});
    }
    out.push_back({m + "down_proj.weight", S{d, I}});
    if (c.mlpBias) {
      out.push_back({m + "gate_proj.bias", S{I}});
      out.push_back({m + "up_proj.bias", S{I}});
      out.push_back({m + "down_proj.bias", S{d}});
    }
    out.push_back({p + "input_layernorm.weight", S{d}});
    out.push_back({p + "post_attention_layernorm.weight", S{d}});
  }
  out.push_back({"model.norm.weight", S{d}});
  if (!c.tieWordEmbeddings) out.push_back({"lm_head.weight", S{V, d}});
  return out;
}

TensorSource checkpointSource(const ModelConfig& c, const std::string& parameter) {
  if (!c.fusedProjections) return {parameter};
  auto fusedPart = [&](const std::string& suffix, const std::string& fused, std::int64_t begin, std::int64_t rows,
                       TensorSource* out) {
    if (!parameter.ends_with(suffix)) return false;
    *out = {parameter.substr(0, parameter.size() - suffix.size()) + fused, begin, rows};
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
  return {parameter};
}

bool isIgnorableKey(const std::string& name) {
  return name.find("rotary_emb.inv_freq") != std::string::npos;
}

} // namespace latentlab
