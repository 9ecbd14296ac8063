// Parameter counts of a ModelConfig, the default q_lora_rank of a latent
// attention, and matching a variant's MLP width to a parameter budget.
#include <algorithm>
#include <cmath>

#include "latentlab/error.h"
#include "latentlab/model_config.h"

namespace latentlab {

std::int64_t attentionParametersPerLayer(const ModelConfig& c) {
  for (int l = 0; l < c.numLayers; ++l) {
    if (c.usesRope(l)) return attentionParameters(c, l);
  }
  return attentionParameters(c, 0);
}

std::int64_t attentionParameters(const ModelConfig& c, int layer) {
  const std::int64_t d = c.hiddenSize, dh = c.headDim, nh = c.numHeads, nkv = c.numKvHeads;
  if (c.latent) {
    // q_a_proj + q_a_layernorm + q_b_proj, kv_a_proj_with_mqa + kv_a_layernorm,
    // kv_b_proj (each latent head to its G heads' [k_nope; v]), o_proj.
    const LatentAttention& a = *c.latent;
    const std::int64_t q = a.qLoraRank, qk = a.dNope + a.dRope, dc = a.dC;
    const std::int64_t G = nh / a.latentsPerBranch();
    std::int64_t attn = q > 0 ? d * q + q + q * nh * qk : d * nh * qk;
    attn += d * (dc + a.dRope) + (a.latentNorm ? dc : 0);
    attn += static_cast<std::int64_t>(a.latentHeads) * G * (a.dNope + a.dV) * a.latentDim();
    attn += nh * a.dV * d;
    return attn;
  }
  std::int64_t attn = d * nh * dh + nh * dh * d;  // q, o
  if (c.attentionBias) attn += nh * dh;
  if (c.oProjBias) attn += d;
  if (c.qkNorm) attn += 2 * dh;  // q_norm, k_norm
  if (!c.mla || !c.mla->converts(layer)) {
    attn += 2 * d * nkv * dh;
    if (c.attentionBias) attn += 2 * nkv * dh;
  } else {
    // A NoPE layer keeps no RoPE key (no k_rope_proj).
    const std::int64_t r2 = c.usesRope(layer) ? 2 * c.mla->ropePairs : 0, nope = dh - r2, dkv = c.mla->dKvOf(layer);
    attn += d * nkv * r2;                                           // k_rope_proj
    if (c.attentionBias) attn += nkv * r2 + nkv * nope + nkv * dh;  // rope, up-k, up-v biases
    if (c.mla->svdMethod == SvdMethod::Split) {
      attn += 2 * d * nkv * dkv;                              // k_down, v_down
      attn += nkv * nope * nkv * dkv + nkv * dh * nkv * dkv;  // k_up, v_up
    } else {
      attn += d * nkv * dkv;                        // kv_down
      attn += (nkv * nope + nkv * dh) * nkv * dkv;  // kv_up
    }
  }
  return attn;
}

std::int64_t countParameters(const ModelConfig& c) {
  const std::int64_t d = c.hiddenSize, I = c.intermediateSize, V = c.vocabSize;
  std::int64_t mlp = 3 * d * I + (c.mlpBias ? 2 * I + d : 0);
  std::int64_t total = V * d + d;
  const std::int64_t norms = (c.sandwichNorms ? 4 : 2) * d;  // Gemma: pre/post feed-forward norms too
  for (int l = 0; l < c.numLayers; ++l) {
    // A sparse layer: the router and every expert's SwiGLU.
    const std::int64_t ffn =
        c.sparseLayer(l) ? c.moe->experts * (d + 3 * d * static_cast<std::int64_t>(c.moe->intermediate)) : mlp;
    total += attentionParameters(c, l) + ffn + norms;
  }
  if (!c.tieWordEmbeddings) total += V * d;
  return total;
}

namespace {
int roundToMultiple(double x, int multiple) {
  return static_cast<int>(std::llround(x / multiple)) * multiple;
}
}  // namespace

int defaultQLoraRank(int hidden, LatentKind kind, int multiple) {
  // The paper's ranks at d = 3072: MLA 1536 (d/2), GLA-2 and MLRA-2 1024 (d/3).
  const double share = kind == LatentKind::Mla ? 2.0 : 3.0;
  return std::max(multiple, roundToMultiple(hidden / share, multiple));
}

ModelConfig matchParameters(ModelConfig cfg, std::int64_t target, int multiple) {
  if (multiple < 1) throw Error(ErrorCode::BadInput, "parameter matching: the MLP width multiple must be positive");
  if (cfg.moe) {
    throw Error(ErrorCode::BadInput, "parameter matching: a mixture-of-experts model has no one MLP width to match");
  }
  if (cfg.latent && cfg.latent->qLoraRank == 0) {
    cfg.latent->qLoraRank = defaultQLoraRank(cfg.hiddenSize, cfg.latent->kind, multiple);
  }
  // countParameters is affine in the MLP width I: total(I) = total(0) + L * per.
  ModelConfig zero = cfg;
  zero.intermediateSize = 0;
  const std::int64_t fixed = countParameters(zero);
  const std::int64_t per = static_cast<std::int64_t>(cfg.numLayers) * (3LL * cfg.hiddenSize + (cfg.mlpBias ? 2 : 0));
  const double width = static_cast<double>(target - fixed) / static_cast<double>(per);
  const int I = roundToMultiple(width, multiple);
  if (I < multiple) {
    throw Error(ErrorCode::BadInput,
                "parameter matching: a target of " + std::to_string(target) +
                    " parameters leaves no room for an MLP (" + std::to_string(fixed) + " parameters without it)",
                "Raise the target or shrink the attention (d_c, q_lora_rank).");
  }
  cfg.intermediateSize = I;
  return cfg;
}

}  // namespace latentlab
