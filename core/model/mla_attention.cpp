// MHA2MLA attention: training forward, naive and absorbed latent-cache decode.
#include "model/mla_attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <tuple>

#include "latentlab/error.h"
#include "model/decode_attention.h"
#include "model/decode_linear.h"

namespace latentlab {

namespace {
torch::nn::Linear linear(int in, int out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}
}  // namespace

std::vector<int> MlaAttention::headDimOrder(const std::vector<int>& keptPairs, int headDim, int ropeDim) {
  const int half = ropeDim / 2;
  std::vector<int> order;
  std::vector<bool> used(static_cast<std::size_t>(headDim), false);
  for (int p : keptPairs) order.push_back(p);
  for (int p : keptPairs) order.push_back(p + half);
  for (int i : order) used[static_cast<std::size_t>(i)] = true;
  for (int i = 0; i < headDim; ++i) {
    if (!used[static_cast<std::size_t>(i)]) order.push_back(i);
  }
  return order;
}

MlaAttention::MlaAttention(const ModelConfig& cfg, int layer)
    : m_heads(cfg.numHeads),
      m_kvHeads(cfg.numKvHeads),
      m_headDim(cfg.headDim),
      m_scale(cfg.softmaxScale(cfg.headDim)),
      m_window(cfg.windowOf(layer)) {
  if (!cfg.mla) throw Error(ErrorCode::Internal, "MlaAttention built for a config without latentlab_mla");
  const MlaConversion& m = *cfg.mla;
  const int half = cfg.ropeDim() / 2;
  m_ropePairs = cfg.usesRope(layer) ? m.ropePairs : 0;  // a NoPE layer keeps no RoPE dims
  m_nope = m_headDim - 2 * m_ropePairs;
  m_latent = m_kvHeads * m.dKvOf(layer);
  m_split = m.svdMethod == SvdMethod::Split;
  if (cfg.usesRope(layer) && (m_ropePairs < 1 || m_ropePairs > half)) {
    throw Error(ErrorCode::BadModel, "config.json latentlab_mla.rope_pairs: " + std::to_string(m_ropePairs) +
                                         " is outside [1, rotating dims/2 = " + std::to_string(half) + "]");
  }
  if (layer >= static_cast<int>(m.pairs.size()) ||
      static_cast<int>(m.pairs[static_cast<std::size_t>(layer)].size()) != m_kvHeads) {
    throw Error(ErrorCode::BadModel, "config.json latentlab_mla.pairs: no pair list for layer " +
                                         std::to_string(layer) + " and each of its " + std::to_string(m_kvHeads) +
                                         " KV heads");
  }
  m_pairs = m.pairs[static_cast<std::size_t>(layer)];
  std::vector<std::int64_t> cols, dims;
  for (const auto& kept : m_pairs) {
    if (static_cast<int>(kept.size()) != m_ropePairs) {
      throw Error(ErrorCode::BadModel, "config.json latentlab_mla.pairs: layer " + std::to_string(layer) + " lists " +
                                           std::to_string(kept.size()) + " pairs for a KV head, it keeps " +
                                           std::to_string(m_ropePairs));
    }
    auto order = headDimOrder(kept, m_headDim, cfg.ropeDim());
    for (int j = 0; j < 2 * m_ropePairs; ++j) cols.push_back(order[static_cast<std::size_t>(j)]);
    for (int j : order) dims.push_back(j);
  }
  m_ropeCols = torch::tensor(cols, torch::kInt64);
  m_dimOrder = torch::tensor(dims, torch::kInt64);
  // A partially rotating head with a RoPE attention factor a (Phi-4-mini's
  // longrope): every rotating pair's products carry a^2 (a on cos and sin of
  // both the query and the key). The pairs the conversion drops keep it as a
  // query scale; the dims that never rotated carry none.
  if (const double a = cfg.ropeTableScale(); a != 1.0) {
    std::vector<double> scale;
    for (std::size_t j = 0; j < dims.size(); ++j) {
      if (static_cast<int>(j % static_cast<std::size_t>(m_headDim)) < 2 * m_ropePairs) continue;  // RoPE dims: tables
      scale.push_back(dims[j] < cfg.ropeDim() ? a * a : 1.0);
    }
    m_qNopeScale = torch::tensor(scale, torch::kFloat64).view({m_kvHeads, m_nope});
  }

  const int d = cfg.hiddenSize, dh = m_headDim, nkv = m_kvHeads, r2 = 2 * m_ropePairs;
  const bool b = cfg.attentionBias;
  q_proj = register_module("q_proj", linear(d, m_heads * dh, b));
  if (r2 > 0) k_rope_proj = register_module("k_rope_proj", linear(d, nkv * r2, b));
  if (m_split) {
    k_down = register_module("k_down", linear(d, m_latent, false));
    v_down = register_module("v_down", linear(d, m_latent, false));
    k_up = register_module("k_up", linear(m_latent, nkv * m_nope, b));
    v_up = register_module("v_up", linear(m_latent, nkv * dh, b));
  } else {
    kv_down = register_module("kv_down", linear(d, m_latent, false));
    kv_up = register_module("kv_up", linear(m_latent, nkv * m_nope + nkv * dh, b));
  }
  o_proj = register_module("o_proj", linear(m_heads * dh, d, cfg.oProjBias));
  if (cfg.qkNorm) {
    q_norm = register_module("q_norm", RmsNorm(dh, cfg.rmsNormEps, cfg.normPlusOne));
    k_norm = register_module("k_norm", RmsNorm(dh, cfg.rmsNormEps, cfg.normPlusOne));
    m_normEps = cfg.rmsNormEps;
  }
}

torch::Tensor MlaAttention::upK() const {
  return m_split ? k_up->weight : kv_up->weight.narrow(0, 0, m_kvHeads * m_nope);
}
torch::Tensor MlaAttention::upV() const {
  return m_split ? v_up->weight : kv_up->weight.narrow(0, m_kvHeads * m_nope, m_kvHeads * m_headDim);
}
torch::Tensor MlaAttention::upKBias() const {
  const auto& bias = m_split ? k_up->bias : kv_up->bias;
  if (!bias.defined()) return {};
  return m_split ? bias : bias.narrow(0, 0, m_kvHeads * m_nope);
}
torch::Tensor MlaAttention::upVBias() const {
  const auto& bias = m_split ? v_up->bias : kv_up->bias;
  if (!bias.defined()) return {};
  return m_split ? bias : bias.narrow(0, m_kvHeads * m_nope, m_kvHeads * m_headDim);
}

torch::Tensor MlaAttention::convertedGains(const RmsNorm& norm) {
  const auto& w = norm->weight;
  if (m_dimOrder.device() != w.device()) m_dimOrder = m_dimOrder.to(w.device());
  // w in its dtype, or Gemma's 1 + w in fp32 (fp64 stays fp64), as RmsNorm computes them.
  const auto gain =
      norm->plusOne() ? w.to(w.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32) + 1.0 : w;
  return gain.index_select(0, m_dimOrder).view({m_kvHeads, m_headDim});  // (nkv, dh)
}

namespace {
// x / rms(x) over the last dim in fp32 (fp64 stays fp64) times `gains`, as
// RmsNorm computes it: cast back before the gains (Llama), or after them
// (Gemma's plusOne norm). `scale` receives 1/rms.
torch::Tensor rmsNormalised(const torch::Tensor& x, double eps, const torch::Tensor& gains, bool gainsInFp32,
                            torch::Tensor* scale = nullptr) {
  const auto compute = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto xf = x.to(compute);
  auto inv = torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  if (scale != nullptr) *scale = inv;
  if (gainsInFp32) return (xf * inv * gains.to(compute)).to(x.scalar_type());
  return (xf * inv).to(x.scalar_type()) * gains.to(x.scalar_type());
}
}  // namespace

torch::Tensor MlaAttention::normQuery(const torch::Tensor& q) {
  const auto B = q.size(0), T = q.size(2);
  const std::int64_t G = m_heads / m_kvHeads;
  auto gains = convertedGains(q_norm).view({1, m_kvHeads, 1, 1, m_headDim});  // query heads of group g share g's order
  return rmsNormalised(q.view({B, m_kvHeads, G, T, m_headDim}), m_normEps, gains, q_norm->plusOne())
      .view({B, m_heads, T, m_headDim});
}

std::pair<torch::Tensor, torch::Tensor> MlaAttention::normKey(const torch::Tensor& kRope, const torch::Tensor& kNope) {
  auto k = m_ropePairs > 0 ? torch::cat({kRope, kNope}, -1) : kNope;  // (B, nkv, T, dh), converted order
  torch::Tensor scale;
  auto normed = rmsNormalised(k, m_normEps, convertedGains(k_norm).unsqueeze(1), k_norm->plusOne(), &scale);
  return {normed, scale.to(k.scalar_type())};
}

std::pair<torch::Tensor, torch::Tensor> MlaAttention::ropeTables(AttentionContext& ctx, std::int64_t T,
                                                                 const torch::Tensor& like) {
  if (m_ropeCols.device() != like.device()) m_ropeCols = m_ropeCols.to(like.device());
  auto [cos, sin] = ctx.rope->range(ctx.startPos, T, like.scalar_type(), like.device());  // (T, d_h)
  const std::int64_t r2 = 2 * m_ropePairs;
  auto pick = [&](const torch::Tensor& t) {
    return t.index_select(1, m_ropeCols).view({T, m_kvHeads, r2}).transpose(0, 1);  // (nkv, T, 2r)
  };
  return {pick(cos), pick(sin)};
}

std::pair<torch::Tensor, torch::Tensor> MlaAttention::expand(const torch::Tensor& cK, const torch::Tensor& cV) {
  const auto B = cK.size(0), T = cK.size(1);
  torch::Tensor kNope, v;
  if (m_split) {
    kNope = k_up(cK);
    v = v_up(cV);
  } else {
    auto kv = kv_up(cK);  // (B, T, nkv*(nope+dh))
    kNope = kv.narrow(-1, 0, m_kvHeads * m_nope);
    v = kv.narrow(-1, m_kvHeads * m_nope, m_kvHeads * m_headDim);
  }
  kNope = kNope.reshape({B, T, m_kvHeads, m_nope}).transpose(1, 2);  // (B, nkv, T, nope)
  v = v.reshape({B, T, m_kvHeads, m_headDim}).transpose(1, 2);       // (B, nkv, T, dh)
  return {kNope, v};
}

torch::Tensor MlaAttention::upValues(const torch::Tensor& ctxLat) {
  const std::int64_t B = ctxLat.size(0), T = ctxLat.size(2), G = m_heads / m_kvHeads;
  auto out = torch::matmul(ctxLat.reshape({B, m_kvHeads, G * T, m_latent}),
                           upV().view({m_kvHeads, m_headDim, m_latent}).transpose(-1, -2));  // (B, nkv, G*T, dh)
  if (upVBias().defined()) out = out + upVBias().view({1, m_kvHeads, 1, m_headDim});         // softmax rows sum to 1
  return out.view({B, m_heads, T, m_headDim});
}

torch::Tensor MlaAttention::absorbed(const torch::Tensor& qRope, const torch::Tensor& qNope, std::int64_t Tk,
                                     const std::vector<TokenBlock>& blocks, const CachedLatent& read) {
  const auto B = qNope.size(0), Tq = qNope.size(2);
  const std::int64_t G = m_heads / m_kvHeads, r2 = 2 * m_ropePairs, rows = m_heads * Tq;
  const double scale = m_scale;
  // The cache slots are prefixes of buffers that grow along T: kRope (B, nkv, Tk, 2r)
  // and the latents (B, 1, Tk, lat) keep a unit stride on their last dim, so the
  // views below merge leading dims without copying and every product is one bmm
  // over the cache as it lies. The softmax scale is folded into the (small) query.
  // Query heads of KV group g are consecutive, so (B, nh, Tq, .) views as (B, nkv, G*Tq, .).
  torch::Tensor qAbs, biasScores, qr;
  if (m_nope > 0) {
    auto qn = qNope.reshape({B, m_kvHeads, G * Tq, m_nope});  // (B, nkv, G*Tq, nope)
    // QK norm: the key's NoPE gains move onto the query (k_hat_nope = g * (W_up_k c) / rms).
    if (qkNorm()) qn = qn * convertedGains(k_norm).narrow(1, r2, m_nope).unsqueeze(1).to(qn.scalar_type());
    auto wk = upK().view({m_kvHeads, m_nope, m_latent});                // (nkv, nope, lat)
    qAbs = torch::matmul(qn, wk).reshape({B, rows, m_latent}) * scale;  // W_up_k,g^T q: (B, nh*Tq, lat)
    // q_nope . b_k: the same for every key (kept so scores match the naive path)
    if (auto bk = upKBias(); bk.defined())
      biasScores = (qn * bk.view({1, m_kvHeads, 1, m_nope})).sum(-1).reshape({B, rows, 1}) * scale;
  }
  if (r2 > 0) qr = qRope.reshape({B * m_kvHeads, G * Tq, r2}) * scale;  // (B*nkv, G*Tq, 2r)
  const auto compute = qNope.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const auto scores = [&](const TokenBlock& b) {
    const CachedTokens c = read(b, true);
    torch::Tensor s;  // (B, nh*Tq, len)
    if (m_nope > 0) {
      s = torch::bmm(qAbs, c.latentK.squeeze(1).transpose(1, 2));  // all heads against the one shared latent
      if (biasScores.defined()) s.add_(biasScores);
      // QK norm: each key's NoPE score times its head's 1/rms, one cached scalar per token.
      if (qkNorm()) s.view({B, m_kvHeads, G * Tq, b.len}).mul_(c.keyScale.transpose(-1, -2));
      // Each KV group's RoPE scores added in place.
      if (r2 > 0) s.view({B * m_kvHeads, G * Tq, b.len}).baddbmm_(qr, c.kRope.flatten(0, 1).transpose(1, 2));
    } else {
      s = torch::bmm(qr, c.kRope.flatten(0, 1).transpose(1, 2)).view({B, rows, b.len});
    }
    s = s.to(compute).view({B, m_heads, Tq, b.len});
    if (Tq == 1) return s;  // the blocks start at the one query's window
    auto hidden = visibleKeys(Tq, Tq, Tk - 1, b.from, b.len, m_window, s.device()).logical_not();
    return s.masked_fill(hidden, -std::numeric_limits<double>::infinity());
  };
  // Every head attends over the one shared latent: one (nh*Tq, len) @ (len, lat)
  // product per batch row, so the latent is never broadcast (copied) per head.
  const auto values = [&](const torch::Tensor& p, const TokenBlock& b) {
    const auto latV = read(b, false).latentV.squeeze(1);  // (B, len, lat)
    return torch::bmm(p.to(latV.scalar_type()).reshape({B, rows, b.len}), latV);
  };
  return upValues(blockwiseAttention(blocks, scores, values).view({B, m_heads, Tq, m_latent}));  // (B, nh, Tq, dh)
}

std::int64_t MlaAttention::firstVisible(std::int64_t Tk, std::int64_t Tq) const {
  // A windowed layer: only the cache's last `window + Tq - 1` tokens can be seen.
  return m_window > 0 ? std::max<std::int64_t>(0, Tk - Tq - m_window + 1) : std::int64_t{0};
}

std::pair<torch::Tensor, torch::Tensor> MlaAttention::rotate(AttentionContext& ctx, const torch::Tensor& like,
                                                             const torch::Tensor& qRope, const torch::Tensor& kRope) {
  if (m_ropePairs == 0) return {qRope, kRope};
  const auto B = qRope.size(0), T = qRope.size(2);
  auto [cosK, sinK] = ropeTables(ctx, T, like);
  // Query heads of KV group g share its tables: broadcast over the group, no repeated copy.
  auto q = applyRope(qRope.reshape({B, m_kvHeads, m_heads / m_kvHeads, T, 2 * m_ropePairs}), cosK.unsqueeze(1),
                     sinK.unsqueeze(1));
  return {q.view({B, m_heads, T, 2 * m_ropePairs}), applyRope(kRope, cosK, sinK)};
}

std::array<torch::Tensor, 4> MlaAttention::appendToCache(LayerCache& cache, const torch::Tensor& kRope,
                                                         const torch::Tensor& cK, const torch::Tensor& cV,
                                                         const torch::Tensor& keyScale) {
  if (cache.quantizes()) {  // the tokens appended as they are computed, the cache keeping codes
    if (m_ropePairs > 0) cache.appendQuantized(0, kRope);
    cache.appendQuantized(1, cK.unsqueeze(1));
    if (m_split) cache.appendQuantized(2, cV.unsqueeze(1));
    auto scaleAll = keyScale.defined() ? cache.append(3, keyScale) : torch::Tensor();  // key scales stay exact
    if (cache.length() > 0) return {torch::Tensor(), torch::Tensor(), torch::Tensor(), scaleAll};
    const auto latentK = cK.unsqueeze(1);
    return {kRope, latentK, m_split ? cV.unsqueeze(1) : latentK, scaleAll};
  }
  auto kRopeAll = m_ropePairs > 0 ? cache.append(0, kRope) : torch::Tensor();  // (B, nkv, Tk, 2r)
  auto cKAll = cache.append(1, cK.unsqueeze(1));                               // (B, 1, Tk, lat)
  auto cVAll = m_split ? cache.append(2, cV.unsqueeze(1)) : cKAll;
  auto scaleAll = keyScale.defined() ? cache.append(3, keyScale) : torch::Tensor();  // (B, nkv, Tk, 1)
  return {kRopeAll, cKAll, cVAll, scaleAll};
}

bool MlaAttention::stepApplies(const torch::Tensor& x, const AttentionContext& ctx) const {
  // QK-norm layers scale each key's NoPE score, which the kernel does not: they run absorbed().
  // A windowed layer takes one query at a time there (the kernel has no window mask).
  if (ctx.cache == nullptr || ctx.cache->quantizes() || m_decode != MlaDecode::Absorbed || m_nope == 0 || qkNorm() ||
      m_qNopeScale.defined() || x.size(1) > kFusedDecodeMaxQueries || (m_window > 0 && x.size(1) > 1) ||
      !fusedDecodeApplies(x, x, x.size(1)))
    return false;
  if (!torch::GradMode::is_enabled()) return true;
  const auto params = parameters();
  return std::all_of(params.begin(), params.end(), [](const torch::Tensor& p) { return derivedWeightsApply(p); });
}

const std::vector<torch::Tensor>& MlaAttention::decodeWeights() {
  // The parameters themselves (upK() and the like are new views at every call).
  std::vector<torch::Tensor> sources = {q_proj->weight, q_proj->bias, o_proj->weight, o_proj->bias};
  for (const auto& m : m_split ? std::vector<torch::nn::Linear>{v_down, k_up, v_up} : std::vector{kv_up}) {
    sources.push_back(m->weight);
    sources.push_back(m->bias);
  }
  return m_decodeWeights.get(sources, [&] {
    const std::int64_t nh = m_heads, G = m_heads / m_kvHeads, dh = m_headDim, r2 = 2 * m_ropePairs;
    const auto type = q_proj->weight.scalar_type();
    // Products in fp64, stored in the weights' dtype.
    const auto f64 = [](const torch::Tensor& t) { return t.to(torch::kFloat64); };
    torch::Tensor wIn = q_proj->weight, bIn = q_proj->bias;
    if (absorbsQuery()) {
      const auto wq = f64(q_proj->weight).view({nh, dh, -1});                                  // (nh, dh, d)
      const auto wk = f64(upK()).view({m_kvHeads, m_nope, m_latent}).repeat_interleave(G, 0);  // (nh, nope, lat)
      const auto wkT = wk.transpose(1, 2);                                                     // (nh, lat, nope)
      wIn = torch::cat({wq.narrow(1, 0, r2).reshape({nh * r2, wq.size(2)}),                    // RoPE rows
                        torch::matmul(wkT, wq.narrow(1, r2, m_nope)).reshape({nh * m_latent, -1})})
                .to(type);
      if (bIn.defined()) {
        const auto bq = f64(bIn).view({nh, dh});
        bIn = torch::cat({bq.narrow(1, 0, r2).reshape({nh * r2}),
                          torch::matmul(wkT, bq.narrow(1, r2, m_nope).unsqueeze(-1)).reshape({-1})})
                  .to(type);
      }
    }
    torch::Tensor wOut = o_proj->weight, bOut = o_proj->bias;
    if (absorbsOutput()) {
      // o = sum_h W_o,h (W_up_v,g c_h + b_v,g) + b_o: W_o,h W_up_v,g per head, the b_v terms into the bias.
      const auto wo = f64(o_proj->weight).view({-1, nh, dh}).transpose(0, 1);              // (nh, d, dh)
      const auto wv = f64(upV()).view({m_kvHeads, dh, m_latent}).repeat_interleave(G, 0);  // (nh, dh, lat)
      wOut = torch::matmul(wo, wv).permute({1, 0, 2}).reshape({wo.size(1), nh * m_latent}).to(type);
      const auto bv = upVBias();
      if (bv.defined()) {
        const auto bvHead = f64(bv).view({m_kvHeads, dh}).repeat_interleave(G, 0).unsqueeze(-1);  // (nh, dh, 1)
        const auto extra = torch::matmul(wo, bvHead).sum(0).view({-1});
        bOut = (bOut.defined() ? f64(bOut) + extra : extra).to(type);
      }
    }
    return std::vector<torch::Tensor>{wIn.contiguous(), bIn, wOut.contiguous(), bOut};
  });
}

torch::Tensor MlaAttention::absorbedStep(const torch::Tensor& x, AttentionContext& ctx) {
  const auto B = x.size(0), T = x.size(1);
  const std::int64_t nh = m_heads, G = m_heads / m_kvHeads, r2 = 2 * m_ropePairs;
  const auto& dw = decodeWeights();
  const auto& down = m_split ? k_down : kv_down;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> in = {{dw[0], dw[1]}, {down->weight, {}}};
  if (m_split) in.emplace_back(v_down->weight, torch::Tensor());
  if (r2 > 0) in.emplace_back(k_rope_proj->weight, k_rope_proj->bias);
  const auto y = linearForwardMany(x, in);
  torch::Tensor qRope, qLat, qNope;  // qLat (B, nh, T, lat) where the query is absorbed, else qNope
  if (absorbsQuery()) {
    qRope = y[0].narrow(-1, 0, nh * r2).view({B, T, nh, r2}).transpose(1, 2);
    qLat = y[0].narrow(-1, nh * r2, nh * m_latent).view({B, T, nh, m_latent}).transpose(1, 2);
  } else {
    auto q = y[0].view({B, T, nh, m_headDim}).transpose(1, 2);
    qRope = q.narrow(-1, 0, r2);
    qNope = q.narrow(-1, r2, m_nope);
  }
  auto cK = y[1];
  auto cV = m_split ? y[2] : cK;
  torch::Tensor kRope;
  if (r2 > 0) kRope = y.back().view({B, T, m_kvHeads, r2}).transpose(1, 2);  // (B, nkv, T, 2r)
  std::tie(qRope, kRope) = rotate(ctx, x, qRope, kRope);
  auto [kRopeAll, cKAll, cVAll, unusedScale] = appendToCache(*ctx.cache, kRope, cK, cV, {});
  if (m_window > 0 && cKAll.size(2) > m_window) {  // one query: the window is the cache's last W tokens
    const auto from = cKAll.size(2) - m_window;
    cKAll = cKAll.narrow(2, from, m_window);
    cVAll = cVAll.narrow(2, from, m_window);
    if (kRopeAll.defined()) kRopeAll = kRopeAll.narrow(2, from, m_window);
  }
  if (!absorbsQuery()) {  // W_up_k,g^T q_nope, per head
    auto qn = qNope.reshape({B, m_kvHeads, G * T, m_nope});
    qLat = torch::matmul(qn, upK().view({m_kvHeads, m_nope, m_latent})).view({B, nh, T, m_latent});
  }
  DecodeAttentionInputs att;
  att.q = qLat.reshape({B, 1, nh * T, m_latent});
  att.k = cKAll;
  att.v = cVAll;
  if (r2 > 0) {  // a NoPE layer attends over the latent alone
    att.qRope = qRope.reshape({B, m_kvHeads, G * T, r2});
    att.kRope = kRopeAll;
  }
  att.queries = T;
  att.scale = m_scale;
  auto ctxLat = fusedDecodeAttention(att).view({B, nh, T, m_latent});  // softmax-weighted latents per head
  if (absorbsOutput()) return linearForward(ctxLat.transpose(1, 2).reshape({B, T, nh * m_latent}), dw[2], dw[3]);
  return linearForward(upValues(ctxLat).transpose(1, 2).reshape({B, T, nh * m_headDim}), dw[2], dw[3]);
}

torch::Tensor MlaAttention::forward(const torch::Tensor& x, AttentionContext& ctx) {
  if (stepApplies(x, ctx)) return absorbedStep(x, ctx);
  const auto B = x.size(0), T = x.size(1);
  const std::int64_t r2 = 2 * m_ropePairs;
  std::vector<torch::nn::Linear> projections = {q_proj};
  for (const auto& m : m_split ? std::vector{k_down, v_down} : std::vector{kv_down}) projections.push_back(m);
  if (r2 > 0) projections.push_back(k_rope_proj);
  const auto proj = linearForwardMany(x, projections);
  auto q = proj[0].view({B, T, m_heads, m_headDim}).transpose(1, 2);  // (B, nh, T, dh), RoPE dims first
  if (qkNorm()) q = normQuery(q);
  auto qRope = q.narrow(-1, 0, r2);       // (B, nh, T, 2r)
  auto qNope = q.narrow(-1, r2, m_nope);  // (B, nh, T, nope)
  if (m_qNopeScale.defined()) {           // query heads of group g take g's scales
    const std::int64_t G = m_heads / m_kvHeads;
    qNope = (qNope.reshape({B, m_kvHeads, G, T, m_nope}) *
             m_qNopeScale.to(qNope.device(), qNope.scalar_type()).view({1, m_kvHeads, 1, 1, m_nope}))
                .view({B, m_heads, T, m_nope});
  }
  auto cK = proj[1];  // (B, T, lat)
  auto cV = m_split ? proj[2] : cK;
  torch::Tensor kRope;  // (B, nkv, T, 2r)
  if (r2 > 0) kRope = proj.back().view({B, T, m_kvHeads, r2}).transpose(1, 2);
  // The new tokens' NoPE key and value, where they are needed: training, or the key norm.
  torch::Tensor kNopeNew, vNew;
  if (ctx.cache == nullptr || qkNorm()) std::tie(kNopeNew, vNew) = expand(cK, cV);
  torch::Tensor keyScale;  // QK norm: 1/rms of each head's whole raw key (B, nkv, T, 1)
  if (qkNorm()) {
    auto [kHat, s] = normKey(kRope, kNopeNew);
    if (r2 > 0) kRope = kHat.narrow(-1, 0, r2);
    kNopeNew = kHat.narrow(-1, r2, m_nope);
    keyScale = s;
  }
  std::tie(qRope, kRope) = rotate(ctx, x, qRope, kRope);
  auto keys = [&](const torch::Tensor& rope, const torch::Tensor& nope) {
    return r2 > 0 ? torch::cat({rope, nope}, -1) : nope;
  };
  auto queries = r2 > 0 ? torch::cat({qRope, qNope}, -1) : qNope;
  torch::Tensor out;
  if (ctx.cache == nullptr) {
    out = causalAttention(queries, keys(kRope, kNopeNew), vNew, m_scale, m_window);
  } else {
    LayerCache& cache = *ctx.cache;
    // A quantized cache: a first chunk attends to itself in full precision (as
    // it is computed); later ones read the older tokens back from codes.
    const bool quantized = cache.quantizes() && cache.length() > 0;
    const auto [kRopeAll, cKAll, cVAll, scaleAll] = appendToCache(cache, kRope, cK, cV, keyScale);
    const std::int64_t Tk = quantized ? cache.quantizedSlot(1).length() : cKAll.size(2);
    const auto read = [&](const TokenBlock& b, bool keys) {
      CachedTokens c;
      const auto slot = [&](int i, const torch::Tensor& plain) {
        return quantized ? cache.quantizedSlot(i).tokens(b) : plain.narrow(2, b.from, b.len);
      };
      if (keys) {
        if (r2 > 0) c.kRope = slot(0, kRopeAll);
        c.latentK = slot(1, cKAll);
        if (scaleAll.defined()) c.keyScale = scaleAll.narrow(2, b.from, b.len);
      }
      if (!keys || m_decode == MlaDecode::Naive) c.latentV = m_split ? slot(2, cVAll) : slot(1, cKAll);
      return c;
    };
    if (m_decode == MlaDecode::Absorbed) {
      const std::int64_t from = firstVisible(Tk, T);
      const auto blocks = quantized ? cache.quantizedSlot(1).blocks(from) : std::vector<TokenBlock>{{from, Tk - from}};
      out = absorbed(qRope, qNope, Tk, blocks, read);
    } else {
      // K and V rebuilt from the cached latents (and, with QK norm, the cached
      // key scales); a quantized cache dequantized whole (the reference path).
      const CachedTokens c = read({0, Tk}, true);
      auto [kNope, v] = expand(c.latentK.squeeze(1), c.latentV.squeeze(1));
      if (qkNorm()) {
        kNope = kNope * c.keyScale * convertedGains(k_norm).narrow(1, r2, m_nope).unsqueeze(1).to(kNope.scalar_type());
      }
      out = causalAttention(queries, keys(c.kRope, kNope), v, m_scale, m_window);
    }
  }
  return linearForward(o_proj, out.transpose(1, 2).reshape({B, T, m_heads * m_headDim}));  // (B, T, nh*dh)
}

void setMlaDecode(CausalLm& model, MlaDecode mode) {
  for (int i = 0; i < model.numLayers(); ++i) {
    if (auto* mla = dynamic_cast<MlaAttention*>(model.layer(i)->self_attn.get())) mla->setDecode(mode);
  }
}

}  // namespace latentlab
