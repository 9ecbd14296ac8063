// From-scratch MLA / GLA-k / MLRA-k attention: training forward, naive and
// absorbed latent-cache decode.
//
// Where the sources differ, the choices made here:
// - Scale factors follow the MLRA reference code: the normed query latent is
//   multiplied by sqrt(d/q_lora_rank) and each normed KV latent head by
//   sqrt(d/(d_c/latent_heads)) before the up-projections (GLA's paper has no such
//   factors; DeepSeek has none). The MLRA branch outputs are each multiplied by
//   1/sqrt(branches) before summing. "scaled: false" drops all three, as the
//   paper's no-scale ablation does.
// - The RoPE key is not normalised (DeepSeek and MLRA agree) and uses the HF
//   rotate_half layout on its d_R dims, like the rest of LatentLab; DeepSeek's
//   checkpoints interleave pairs instead (rope_interleave), which a model read
//   from a DeepSeek-V3 folder undoes on the projected query and key.
// - Query head layout [nope; rope] per head (DeepSeek), softmax scale
//   1/sqrt(d_nope + d_R) in every path.
// - The cache holds the normed latent times its constant scale, i.e. exactly
//   what W_UK / W_UV read; the scale costs nothing there and nothing is re-normed.
#include "model/latent_attention.h"

#include <cmath>
#include <limits>

#include "latentlab/error.h"
#include "model/decode_attention.h"
#include "model/decode_linear.h"

namespace latentlab {

namespace {
// Checked before any member is derived from it (a zero head count would divide by zero).
const LatentAttention& latentOf(const ModelConfig& cfg) {
  if (!cfg.latent) throw Error(ErrorCode::Internal, "LatentAttentionLayer built for a config without latentlab_latent");
  cfg.validate("model config");
  return *cfg.latent;
}

torch::nn::Linear linear(std::int64_t in, std::int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}
}  // namespace

LatentAttentionLayer::LatentAttentionLayer(const ModelConfig& cfg, int /*layer*/)
    : m_heads(cfg.numHeads),
      m_dNope(latentOf(cfg).dNope),
      m_dRope(cfg.latent->dRope),
      m_dV(cfg.latent->dV),
      m_dC(cfg.latent->dC),
      m_latentHeads(cfg.latent->latentHeads),
      m_branches(cfg.latent->branches),
      m_perBranch(cfg.latent->latentsPerBranch()),
      m_group(cfg.numHeads / cfg.latent->latentsPerBranch()),
      m_eps(cfg.latent->latentNormEps > 0 ? cfg.latent->latentNormEps : cfg.rmsNormEps),
      m_rope(cfg.latent->ropeSourcePairs.empty() ? cfg.latent->dRope : cfg.latent->ropeSourceHeadDim, cfg.ropeTheta,
             cfg.ropeScaling, cfg.maxPositionEmbeddings) {
  const LatentAttention& a = *cfg.latent;
  const double d = cfg.hiddenSize;
  m_qScale = a.scaled && a.qLoraRank > 0 ? std::sqrt(d / a.qLoraRank) : 1.0;
  m_kvScale = a.scaled ? std::sqrt(d / a.latentDim()) : 1.0;
  m_branchScale = a.scaled ? 1.0 / std::sqrt(static_cast<double>(m_branches)) : 1.0;
  m_softmaxScale = 1.0 / std::sqrt(static_cast<double>(m_dNope + m_dRope));
  m_interleaved = a.ropeInterleaved;

  const std::int64_t qk = m_dNope + m_dRope;
  if (a.qLoraRank > 0) {
    q_a_proj = register_module("q_a_proj", linear(cfg.hiddenSize, a.qLoraRank));
    q_a_layernorm = register_module("q_a_layernorm", RmsNorm(a.qLoraRank, m_eps));
    q_b_proj = register_module("q_b_proj", linear(a.qLoraRank, m_heads * qk));
  } else {
    q_proj = register_module("q_proj", linear(cfg.hiddenSize, m_heads * qk));
  }
  kv_a_proj_with_mqa = register_module("kv_a_proj_with_mqa", linear(cfg.hiddenSize, m_dC + m_dRope));
  if (a.latentNorm) kv_a_layernorm = register_module("kv_a_layernorm", RmsNorm(m_dC, m_eps));
  if (!a.ropeSourcePairs.empty()) {
    // rotate_half layout on d_R: pair k at column k and k + d_R/2.
    std::vector<std::int64_t> cols;
    const int half = a.ropeSourceHeadDim / 2;
    for (int p : a.ropeSourcePairs) cols.push_back(p);
    for (int p : a.ropeSourcePairs) cols.push_back(p + half);
    m_ropeCols = torch::tensor(cols, torch::kInt64);
    m_sourceIsModelHead = a.ropeSourceHeadDim == cfg.headDim;
  }
  kv_b_proj = register_module(
      "kv_b_proj", linear(a.latentDim(), static_cast<std::int64_t>(m_latentHeads) * m_group * (m_dNope + m_dV)));
  o_proj = register_module("o_proj", linear(static_cast<std::int64_t>(m_heads) * m_dV, cfg.hiddenSize));
}

torch::Tensor LatentAttentionLayer::latentHeads(const torch::Tensor& c) {
  const auto B = c.size(0), T = c.size(1);
  const std::int64_t dl = m_dC / m_latentHeads;
  if (!kv_a_layernorm) {
    auto plain = m_kvScale != 1.0 ? c * m_kvScale : c;
    return plain.view({B, T, m_latentHeads, dl}).transpose(1, 2);
  }
  // Same numerics as RmsNorm (fp32 statistics, fp64 stays fp64), per latent head.
  const auto compute = c.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto cf = c.view({B, T, m_latentHeads, dl}).to(compute);  // (B, T, L, dl)
  cf = cf * torch::rsqrt(cf.pow(2).mean(-1, /*keepdim=*/true) + m_eps);
  auto normed = kv_a_layernorm->weight.view({m_latentHeads, dl}) * cf.to(c.scalar_type());
  if (m_kvScale != 1.0) normed = normed * m_kvScale;
  return normed.transpose(1, 2);  // (B, L, T, dl)
}

torch::Tensor LatentAttentionLayer::naive(const torch::Tensor& qNope, const torch::Tensor& qRope,
                                          const torch::Tensor& kRope, const torch::Tensor& c) {
  const auto B = c.size(0), Tk = c.size(2), dl = c.size(3);
  const std::int64_t kvDim = m_dNope + m_dV;
  auto w = kv_b_proj->weight.view({m_latentHeads, m_group * kvDim, dl});          // (L, G*(dn+dv), dl)
  auto kv = torch::matmul(c, w.transpose(1, 2));                                  // (B, L, Tk, G*(dn+dv))
  kv = kv.view({B, m_latentHeads, Tk, m_group, kvDim}).permute({0, 1, 3, 2, 4});  // (B, L, G, Tk, dn+dv)
  // Latent l = b*P + p serves heads [p*G, (p+1)*G) of branch b, so P*G = n_h heads per branch.
  kv = kv.reshape({B, m_branches, m_heads, Tk, kvDim});  // (B, nb, nh, Tk, dn+dv)
  auto q = torch::cat({qNope, qRope}, -1);               // (B, nh, Tq, dn+dR)
  auto kR = kRope.expand({B, m_heads, Tk, m_dRope});     // (B, nh, Tk, dR)
  torch::Tensor out;
  for (int b = 0; b < m_branches; ++b) {
    auto kvB = kv.select(1, b);                                                     // (B, nh, Tk, dn+dv)
    auto k = torch::cat({kvB.narrow(-1, 0, m_dNope), kR}, -1);                      // (B, nh, Tk, dn+dR)
    auto y = causalAttention(q, k, kvB.narrow(-1, m_dNope, m_dV), m_softmaxScale);  // (B, nh, Tq, dv)
    out = out.defined() ? out + y : y;
  }
  return m_branchScale != 1.0 ? out * m_branchScale : out;
}

torch::Tensor LatentAttentionLayer::absorbed(const torch::Tensor& qNope, const torch::Tensor& qRope,
                                             const torch::Tensor& kRope, const torch::Tensor& c) {
  const auto B = qNope.size(0), Tq = qNope.size(2), Tk = c.size(2), dl = c.size(3);
  if (fusedDecodeApplies(qNope, c, Tq)) {
    const std::int64_t P = m_perBranch, G = m_group;
    auto w = kv_b_proj->weight.view({m_latentHeads, G, m_dNope + m_dV, dl});  // (L, G, dn+dv, dl)
    auto wk = w.narrow(2, 0, m_dNope);                                        // (L, G, dn, dl)
    auto wv = w.narrow(2, m_dNope, m_dV);                                     // (L, G, dv, dl)
    auto qn = qNope.reshape({B, P, G, Tq, m_dNope});                          // heads of latent p contiguous
    // One pass over each branch's latents (model/decode_attention.h); the one
    // shared RoPE key serves all n_h*Tq query rows of every branch.
    DecodeAttentionInputs in;
    in.qRope = qRope.reshape({B, 1, m_heads * Tq, m_dRope}).contiguous();  // (B, 1, nh*Tq, dR), every branch
    in.kRope = kRope;                                                      // (B, 1, Tk, dR)
    in.queries = Tq;
    in.scale = m_softmaxScale;
    torch::Tensor out;
    for (int b = 0; b < m_branches; ++b) {
      auto cB = c.narrow(1, b * P, P);                                               // (B, P, Tk, dl)
      in.q = torch::matmul(qn, wk.narrow(0, b * P, P)).reshape({B, P, G * Tq, dl});  // W_UK^T q: (B, P, G*Tq, dl)
      in.k = cB;
      in.v = cB;
      auto ctxLat = fusedDecodeAttention(in);  // (B, P, G*Tq, dl)
      auto y = torch::matmul(ctxLat.view({B, P, G, Tq, dl}), wv.narrow(0, b * P, P).transpose(-1, -2));
      y = y.reshape({B, m_heads, Tq, m_dV});  // (B, nh, Tq, dv)
      out = out.defined() ? out + y : y;
    }
    return m_branchScale != 1.0 ? out * m_branchScale : out;
  }
  return absorbedBlocks(qNope, qRope, Tk, {{0, Tk}}, [&](const TokenBlock& b) {
    return std::pair{kRope.narrow(2, b.from, b.len), c.narrow(2, b.from, b.len)};
  });
}

torch::Tensor LatentAttentionLayer::absorbedBlocks(const torch::Tensor& qNope, const torch::Tensor& qRope,
                                                   std::int64_t Tk, const std::vector<TokenBlock>& blocks,
                                                   const CachedLatent& read) {
  const auto B = qNope.size(0), Tq = qNope.size(2);
  const std::int64_t P = m_perBranch, G = m_group;
  const std::int64_t dl = m_dC / m_latentHeads;
  auto w = kv_b_proj->weight.view({m_latentHeads, G, m_dNope + m_dV, dl});  // (L, G, dn+dv, dl)
  auto wk = w.narrow(2, 0, m_dNope);                                        // (L, G, dn, dl)
  auto wv = w.narrow(2, m_dNope, m_dV);                                     // (L, G, dv, dl)
  auto qn = qNope.reshape({B, P, G, Tq, m_dNope});                          // heads of latent p contiguous
  const auto compute = qNope.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  torch::Tensor out;
  for (int br = 0; br < m_branches; ++br) {
    auto qAbs = torch::matmul(qn, wk.narrow(0, br * P, P)).reshape({B, P, G * Tq, dl});  // W_UK^T q
    const auto scores = [&](const TokenBlock& b) {
      const auto [kRope, c] = read(b);
      const auto cB = c.narrow(1, br * P, P);  // (B, P, len, dl)
      // The RoPE part is the same for every branch: one shared key for all heads.
      auto ropeScores = torch::matmul(qRope, kRope.transpose(-1, -2)).view({B, P, G, Tq, b.len});
      auto s = torch::matmul(qAbs, cB.transpose(-1, -2)).view({B, P, G, Tq, b.len});
      s = (s + ropeScores).to(compute) * m_softmaxScale;
      if (Tq == 1) return s;
      auto hidden = visibleKeys(Tq, Tq, Tk - 1, b.from, b.len, 0, s.device()).logical_not();  // (Tq, len)
      return s.masked_fill(hidden, -std::numeric_limits<double>::infinity());
    };
    const auto values = [&](const torch::Tensor& p, const TokenBlock& b) {
      const auto cB = read(b).second.narrow(1, br * P, P);
      return torch::matmul(p.to(cB.scalar_type()).reshape({B, P, G * Tq, b.len}), cB);  // (B, P, G*Tq, dl)
    };
    auto ctxLat = blockwiseAttention(blocks, scores, values);
    auto y = torch::matmul(ctxLat.view({B, P, G, Tq, dl}), wv.narrow(0, br * P, P).transpose(-1, -2));
    y = y.reshape({B, m_heads, Tq, m_dV});  // (B, nh, Tq, dv)
    out = out.defined() ? out + y : y;
  }
  return m_branchScale != 1.0 ? out * m_branchScale : out;
}

torch::Tensor LatentAttentionLayer::forward(const torch::Tensor& x, AttentionContext& ctx) {
  const auto B = x.size(0), T = x.size(1);
  torch::Tensor q;
  if (q_proj) {
    q = linearForward(q_proj, x);
  } else {
    auto cq = q_a_layernorm(linearForward(q_a_proj, x));  // (B, T, q_lora)
    if (m_qScale != 1.0) cq = cq * m_qScale;
    q = linearForward(q_b_proj, cq);
  }
  q = q.view({B, T, m_heads, m_dNope + m_dRope}).transpose(1, 2);  // (B, nh, T, dn+dR)
  auto qNope = q.narrow(-1, 0, m_dNope);                           // (B, nh, T, dn)
  auto qRope = q.narrow(-1, m_dNope, m_dRope);                     // (B, nh, T, dR)
  auto kv = linearForward(kv_a_proj_with_mqa, x);                  // (B, T, d_c + dR)
  auto c = latentHeads(kv.narrow(-1, 0, m_dC));                    // (B, L, T, dl)
  auto kRope = kv.narrow(-1, m_dC, m_dRope).unsqueeze(1);          // (B, 1, T, dR)
  if (m_interleaved) {
    // DeepSeek's layout [x0, y0, x1, y1, ...] to rotate_half's [x0, x1, ..., y0, y1, ...].
    auto halves = [&](const torch::Tensor& t) {
      auto sizes = t.sizes().vec();
      sizes.back() = m_dRope / 2;
      sizes.push_back(2);
      return t.reshape(sizes).transpose(-1, -2).reshape(t.sizes());
    };
    qRope = halves(qRope);
    kRope = halves(kRope);
  }
  // A conversion whose source head is the model's own uses the model's table
  // (the same frequencies) rather than a copy per layer.
  RopeTables& rope = m_sourceIsModelHead && ctx.rope != nullptr ? *ctx.rope : m_rope;
  auto [cos, sin] = rope.range(ctx.startPos, T, x.scalar_type(), x.device());  // (T, dR) or the source's (T, d_h)
  if (m_ropeCols.defined()) {
    if (m_ropeCols.device() != x.device()) m_ropeCols = m_ropeCols.to(x.device());
    cos = cos.index_select(1, m_ropeCols);
    sin = sin.index_select(1, m_ropeCols);
  }
  qRope = applyRope(qRope, cos, sin);
  kRope = applyRope(kRope, cos, sin);
  torch::Tensor out;
  if (ctx.cache == nullptr) {
    out = naive(qNope, qRope, kRope, c);
  } else {
    // The cache: slot 0 the rotated RoPE key (B, 1, T, dR), slot 1 the latent heads (B, L, T, dl).
    LayerCache& cache = *ctx.cache;
    if (cache.quantizes()) {
      // A first chunk attends to itself in full precision (as it is computed);
      // later ones read the older tokens back from codes, a block at a time
      // (naive: the reference path, the cache dequantized whole).
      const bool first = cache.length() == 0;
      const QuantizedSlot& kr = cache.appendQuantized(0, kRope);
      const QuantizedSlot& cs = cache.appendQuantized(1, c);
      if (first) {
        out = m_decode == MlaDecode::Absorbed ? absorbed(qNope, qRope, kRope, c) : naive(qNope, qRope, kRope, c);
      } else if (m_decode == MlaDecode::Absorbed) {
        out = absorbedBlocks(qNope, qRope, cs.length(), cs.blocks(0), [&](const TokenBlock& b) {
          return std::pair{kr.tokens(b), cs.tokens(b)};
        });
      } else {
        out = naive(qNope, qRope, kr.tokens({0, kr.length()}), cs.tokens({0, cs.length()}));
      }
    } else {
      auto kRopeAll = cache.append(0, kRope);
      auto cAll = cache.append(1, c);
      out = m_decode == MlaDecode::Absorbed ? absorbed(qNope, qRope, kRopeAll, cAll)
                                            : naive(qNope, qRope, kRopeAll, cAll);
    }
  }
  return linearForward(o_proj, out.transpose(1, 2).reshape({B, T, m_heads * m_dV}));  // (B, T, nh*dv)
}

void setLatentDecode(CausalLm& model, MlaDecode mode) {
  for (int i = 0; i < model.numLayers(); ++i) {
    if (auto* l = dynamic_cast<LatentAttentionLayer*>(model.layer(i)->self_attn.get())) l->setDecode(mode);
  }
}

}  // namespace latentlab
