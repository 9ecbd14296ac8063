// Helpers for the conversion tests: the independent partial-RoPE reference
// model and small shape/option shorthands.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "../model/model_test_util.h"
#include "convert/converter.h"
#include "model/mla_attention.h"

namespace latentlab::test {

// The original attention with RoPE applied only to the kept pairs of each KV
// head (query heads use their group's pairs), written directly in the HF
// layout: a kept pair k rotates dims (k, k + d_rot/2) by angle pos * theta_k,
// every other dim passes through unrotated. No permutation, no latent. With
// the family's options as the original applies them: QK norms over the whole
// head before RoPE, no RoPE at all in a NoPE layer, d_rot = ropeDim().
class PartialRopeAttention : public AttentionModule {
 public:
  PartialRopeAttention(const ModelConfig& cfg, std::vector<std::vector<int>> pairs, int layer = 0)
      : m_cfg(cfg), m_pairs(std::move(pairs)), m_window(cfg.windowOf(layer)) {
    const int d = cfg.hiddenSize, dh = cfg.headDim, q = cfg.numHeads * dh, kv = cfg.numKvHeads * dh;
    q_proj = register_module("q_proj", torch::nn::Linear(torch::nn::LinearOptions(d, q).bias(cfg.attentionBias)));
    k_proj = register_module("k_proj", torch::nn::Linear(torch::nn::LinearOptions(d, kv).bias(cfg.attentionBias)));
    v_proj = register_module("v_proj", torch::nn::Linear(torch::nn::LinearOptions(d, kv).bias(cfg.attentionBias)));
    o_proj = register_module("o_proj", torch::nn::Linear(torch::nn::LinearOptions(q, d).bias(cfg.oProjBias)));
    if (cfg.qkNorm) {
      q_norm = register_module("q_norm", RmsNorm(dh, cfg.rmsNormEps, cfg.normPlusOne));
      k_norm = register_module("k_norm", RmsNorm(dh, cfg.rmsNormEps, cfg.normPlusOne));
    }
  }

  // x (B, H, T, d_h) with head h using KV head h / groupSize's pairs; cos/sin
  // (T, d_h) are the original model's tables (column k holds pair k's angle).
  torch::Tensor rotateKept(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                           int groupSize) const {
    const int half = m_cfg.ropeDim() / 2;
    auto out = x.clone();
    for (std::int64_t h = 0; h < x.size(1); ++h) {
      for (int k : m_pairs[static_cast<std::size_t>(h / groupSize)]) {
        auto c = cos.select(-1, k), s = sin.select(-1, k);                               // (T,)
        auto a = x.select(1, h).select(-1, k), b = x.select(1, h).select(-1, k + half);  // (B, T)
        out.select(1, h).select(-1, k).copy_(a * c - b * s);
        out.select(1, h).select(-1, k + half).copy_(b * c + a * s);
      }
    }
    return out;
  }

  torch::Tensor forward(const torch::Tensor& x, AttentionContext& ctx) override {
    const auto B = x.size(0), T = x.size(1);
    const int nh = m_cfg.numHeads, nkv = m_cfg.numKvHeads, dh = m_cfg.headDim;
    auto q = q_proj(x).view({B, T, nh, dh});
    auto k = k_proj(x).view({B, T, nkv, dh});
    if (q_norm) {
      q = q_norm(q);
      k = k_norm(k);
    }
    q = q.transpose(1, 2);  // (B, nh, T, dh)
    k = k.transpose(1, 2);  // (B, nkv, T, dh)
    auto v = v_proj(x).view({B, T, nkv, dh}).transpose(1, 2);
    auto [cos, sin] = ctx.rope->range(ctx.startPos, T, q.scalar_type(), q.device());
    q = rotateKept(q, cos, sin, nh / nkv);
    k = rotateKept(k, cos, sin, 1);
    // A partially rotating head's attention factor a stays on the rotating pairs
    // that lose their rotation (a^2 on their products, as when they rotated).
    if (const double a = m_cfg.ropeTableScale(); a != 1.0) {
      const int half = m_cfg.ropeDim() / 2;
      for (std::int64_t h = 0; h < nh; ++h) {
        const auto& kept = m_pairs[static_cast<std::size_t>(h / (nh / nkv))];
        for (int p = 0; p < half; ++p) {
          if (std::find(kept.begin(), kept.end(), p) != kept.end()) continue;
          q.select(1, h).select(-1, p).mul_(a * a);
          q.select(1, h).select(-1, p + half).mul_(a * a);
        }
      }
    }
    // Plain softmax attention with an explicit causal mask and GQA repeat.
    k = k.repeat_interleave(nh / nkv, 1);
    v = v.repeat_interleave(nh / nkv, 1);
    // yarn's attention factor scales every query-key product, RoPE and NoPE dims alike.
    auto scores = torch::matmul(q, k.transpose(-1, -2)) * m_cfg.softmaxScale(dh);
    auto mask = torch::ones({T, T}, torch::kBool).triu(1);
    if (m_window > 0) mask = mask.logical_or(torch::ones({T, T}, torch::kBool).tril(-m_window));  // keys W or more back
    scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
    auto out = torch::matmul(torch::softmax(scores, -1), v);  // (B, nh, T, dh)
    return o_proj(out.transpose(1, 2).reshape({B, T, nh * dh}));
  }

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RmsNorm q_norm{nullptr}, k_norm{nullptr};

 private:
  ModelConfig m_cfg;
  std::vector<std::vector<int>> m_pairs;
  int m_window;
};

// A CausalLm with PartialRopeAttention layers carrying base's weights.
inline std::shared_ptr<CausalLm> partialRopeReference(CausalLm& base, const PairSelection& pairs) {
  auto ref = std::make_shared<CausalLm>(base.config(), [&](const ModelConfig& c, int layer) {
    return std::make_shared<PartialRopeAttention>(c, pairs[static_cast<std::size_t>(layer)], layer);
  });
  ref->to(base.model->embed_tokens->weight.scalar_type());
  torch::NoGradGuard g;
  auto src = base.named_parameters(true);
  for (auto& p : ref->named_parameters(true)) p.value().copy_(src[p.key()]);
  ref->eval();
  return ref;
}

// The RoPE variants of real checkpoints, on the tiny shapes (context 16, so
// that 24-token sequences reach every regime of each variant).
inline std::vector<std::pair<std::string, ModelConfig>> scaledRopeConfigs(const TinyShape& shape) {
  std::vector<std::pair<std::string, ModelConfig>> out;
  auto with = [&](const std::string& type, double factor, auto&& edit) {
    ModelConfig c = tinyConfig(shape);
    c.maxPositionEmbeddings = 16;
    c.ropeScaling.type = type;
    c.ropeScaling.factor = factor;
    edit(c.ropeScaling);
    out.emplace_back(type, c);
  };
  with("llama3", 8, [](RopeScaling& s) { s.originalMaxPositionEmbeddings = 16; });
  with("yarn", 4, [](RopeScaling& s) { s.originalMaxPositionEmbeddings = 8; });
  with("linear", 2, [](RopeScaling&) {});
  with("dynamic", 2, [](RopeScaling&) {});
  return out;
}

// Four layers of two KV heads: layers that can differ (hybrid, per-layer d_kv).
inline ModelConfig fourLayers() {
  TinyShape s;
  s.layers = 4;
  s.kvHeads = 2;
  return tinyConfig(s);
}

inline ConversionOptions mlaOptions(RopeStrategy rope, int r, int dKv, SvdMethod svd = SvdMethod::Joint) {
  ConversionOptions o;
  o.rope = rope;
  o.ropePairs = r;
  o.dKv = dKv;
  o.svd = svd;
  return o;
}

// The largest d_kv checkKvSettings allows (full rank when n_kv divides the rank).
inline int fullRankDkv(const ModelConfig& c, int r, SvdMethod svd) {
  const int nope = c.headDim - 2 * r;
  if (svd == SvdMethod::Joint) return std::min(c.numKvHeads * (nope + c.headDim), c.hiddenSize) / c.numKvHeads;
  return std::min({c.numKvHeads * nope, c.numKvHeads * c.headDim, c.hiddenSize}) / c.numKvHeads;
}

// SVD_split factorises Wk_nope and Wv with the same rank, which is below
// rank(Wv) whenever d_h - 2r < d_h; truncating Wv to that rank first makes
// the split factorisation exact at its largest d_kv.
inline void truncateValueRank(CausalLm& model, std::int64_t rank) {
  torch::NoGradGuard g;
  for (int l = 0; l < model.numLayers(); ++l) {
    auto* a = dynamic_cast<LlamaAttention*>(model.layer(l)->self_attn.get());
    auto [u, s, vh] = at::linalg_svd(a->v_proj->weight, /*full_matrices=*/false);
    a->v_proj->weight.copy_(torch::matmul(u.narrow(1, 0, rank) * s.narrow(0, 0, rank), vh.narrow(0, 0, rank)));
  }
}

// Random calibration batches of token ids.
inline std::vector<torch::Tensor> randomBatches(int vocab, int count, int batch, int len, std::uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> out;
  for (int i = 0; i < count; ++i) out.push_back(torch::randint(0, vocab, {batch, len}, torch::kInt64));
  return out;
}

}  // namespace latentlab::test
