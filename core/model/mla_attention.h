// MHA2MLA-converted attention (algorithms.md §2.2-2.3): partial RoPE on the
// kept frequency pairs of each KV head, a low-rank latent for the NoPE key and
// the value, and a decode cache that holds only the latent and the RoPE key.
#pragma once

#include <torch/torch.h>

#include <array>
#include <functional>
#include <utility>
#include <vector>

#include "model/attention.h"
#include "model/decode_linear.h"
#include "model/llama.h"

namespace latentlab {

// How attention runs on top of a cache. Absorbed: W_up_k is folded into the
// query and W_up_v applied after attending over the latent. Naive: K and V are
// rebuilt from the cached latent each step (for benchmarks and equality tests).
enum class MlaDecode { Absorbed, Naive };

// Per-head dim layout of q (rows of q_proj, per head) and of the key:
//   [0, 2r)   RoPE dims: the kept pairs' first dims p_0 < ... < p_{r-1}, then
//             their partners p_i + d_rot/2 (rotate_half layout on 2r dims);
//   [2r, d_h) NoPE dims: the remaining original dims, ascending.
// Pair p keeps its original frequency theta_p. d_rot = ropeDim() is d_h but
// for a partially rotating head (Phi-3), whose dims past d_rot are NoPE
// from the start. A layer without RoPE (SmolLM3's NoPE layers) has r = 0:
// its key is all latent and its cache the latent alone.
// QK-norm families (Qwen3): q_norm and k_norm keep their weights in the
// original dim order; the key norm divides each head's whole raw key
// [k_rope; W_up_k c] by its RMS, as the original model does. The decode
// cache holds that divisor's inverse, one scalar per token and KV head,
// beside the normalised, rotated RoPE key (docs/conversion.md, "QK norms").
class MlaAttention : public AttentionModule {
 public:
  MlaAttention(const ModelConfig& cfg, int layer);
  torch::Tensor forward(const torch::Tensor& x, AttentionContext& ctx) override;

  void setDecode(MlaDecode mode) { m_decode = mode; }
  MlaDecode decode() const { return m_decode; }
  bool isSplit() const { return m_split; }
  int ropePairs() const { return m_ropePairs; }
  int latentDim() const { return m_latent; }                              // n_kv * d_kv
  const std::vector<std::vector<int>>& pairs() const { return m_pairs; }  // [kvHead][i]

  // Original head dims in the converted order: RoPE dims then NoPE dims (d_h entries).
  static std::vector<int> headDimOrder(const std::vector<int>& keptPairs, int headDim, int ropeDim);

  // Joint SVD: kv_down (n_kv*d_kv, d) and kv_up ([k_nope (n_kv*(d_h-2r)); v (n_kv*d_h)], n_kv*d_kv).
  // Split SVD: k_down/v_down (n_kv*d_kv, d), k_up (n_kv*(d_h-2r), n_kv*d_kv), v_up (n_kv*d_h, n_kv*d_kv).
  torch::nn::Linear q_proj{nullptr}, k_rope_proj{nullptr}, o_proj{nullptr};
  torch::nn::Linear kv_down{nullptr}, kv_up{nullptr};
  torch::nn::Linear k_down{nullptr}, v_down{nullptr}, k_up{nullptr}, v_up{nullptr};
  RmsNorm q_norm{nullptr}, k_norm{nullptr};  // QK-norm families, weights in the original dim order

 private:
  // cos/sin of each head's RoPE dims: (H, T, 2r) for KV heads, repeated for query heads.
  std::pair<torch::Tensor, torch::Tensor> ropeTables(AttentionContext& ctx, std::int64_t T, const torch::Tensor& like);
  // K_nope (B, n_kv, T, d_h-2r) and V (B, n_kv, T, d_h) from latents (B, T, n_kv*d_kv).
  std::pair<torch::Tensor, torch::Tensor> expand(const torch::Tensor& cK, const torch::Tensor& cV);
  // W_up_v,g (and its bias) on each head's softmax-weighted latent: (B, nh, T, lat) -> (B, nh, T, dh).
  torch::Tensor upValues(const torch::Tensor& ctxLat);
  // Cached tokens of a block: the RoPE key (B, nkv, len, 2r), the key and
  // value latents (B, 1, len, lat) and the key scales (B, nkv, len, 1), each
  // undefined where the layer has none or the reader did not ask for it.
  struct CachedTokens {
    torch::Tensor kRope, latentK, latentV, keyScale;
  };
  // Reads a block of the cache: its keys' parts (keys = true) or its value latent.
  using CachedLatent = std::function<CachedTokens(const TokenBlock&, bool keys)>;
  // Absorbed attention of the queries (the last Tq of Tk cached tokens) over
  // the cache read block by block: one block holding every visible token for
  // a plain cache, blocks of KvQuantSettings::block codes then the window for a quantized one.
  torch::Tensor absorbed(const torch::Tensor& qRope, const torch::Tensor& qNope, std::int64_t Tk,
                         const std::vector<TokenBlock>& blocks, const CachedLatent& read);
  // The first of Tk cached tokens any of the last Tq can see (0 but for a windowed layer).
  std::int64_t firstVisible(std::int64_t Tk, std::int64_t Tq) const;
  // RoPE on the kept dims of the query heads (B, nh, T, 2r) and KV heads (B, nkv, T, 2r).
  std::pair<torch::Tensor, torch::Tensor> rotate(AttentionContext& ctx, const torch::Tensor& like,
                                                 const torch::Tensor& qRope, const torch::Tensor& kRope);
  // Appends to the cache (slot 0 the RoPE key (B, nkv, T, 2r) unless r = 0,
  // slot 1 the latent (B, 1, T, lat), slot 2 the value latent, split only,
  // slot 3 the key-norm scale (B, nkv, T, 1), QK norm only) and returns the
  // cached prefixes [kRope, latent, value latent, key scale]. A quantized
  // cache keeps slots 0-2 as codes past its window and returns the new tokens
  // for a first chunk, only the key scales (always exact) after it.
  std::array<torch::Tensor, 4> appendToCache(LayerCache& cache, const torch::Tensor& kRope, const torch::Tensor& cK,
                                             const torch::Tensor& cV, const torch::Tensor& keyScale);
  // QK norm: the per-head gains of q_norm / k_norm in the converted dim order, (nkv, d_h).
  torch::Tensor convertedGains(const RmsNorm& norm);
  // QK norm: q (B, nh, T, d_h) in the converted layout, normalised per head.
  torch::Tensor normQuery(const torch::Tensor& q);
  // QK norm: the whole raw key [kRope; kNope] (B, nkv, T, d_h) normalised per
  // head; returns the normalised key and the scale 1/rms (B, nkv, T, 1).
  std::pair<torch::Tensor, torch::Tensor> normKey(const torch::Tensor& kRope, const torch::Tensor& kNope);
  bool qkNorm() const { return static_cast<bool>(q_norm); }
  // Whether a step on top of the cache runs absorbedStep: absorbed decode of a
  // few queries through the CPU kernel, no autograd through any parameter.
  // Otherwise absorbed() runs LibTorch's operators.
  bool stepApplies(const torch::Tensor& x, const AttentionContext& ctx) const;
  // That step: the query, RoPE key and latent projections in one pass
  // (linearForwardMany), the latent attention, the output projection.
  torch::Tensor absorbedStep(const torch::Tensor& x, AttentionContext& ctx);
  // [W_q, b_q, W_o, b_o] of that step. W_q: the RoPE query rows of every head,
  // then W_up_k,g^T W_q,h,nope per head h (its query absorbed, read directly
  // against the latent); q_proj itself where the latent is wider than the NoPE
  // query. W_o: o_proj with W_up_v,g folded in per head; o_proj itself where
  // the latent is wider than a head. Rebuilt when the parameters change.
  const std::vector<torch::Tensor>& decodeWeights();
  bool absorbsQuery() const { return m_latent <= m_nope; }
  bool absorbsOutput() const { return m_latent <= m_headDim; }
  // W_up_k (n_kv*(d_h-2r), lat), W_up_v (n_kv*d_h, lat) and their biases (undefined without).
  torch::Tensor upK() const;
  torch::Tensor upV() const;
  torch::Tensor upKBias() const;
  torch::Tensor upVBias() const;

  int m_heads, m_kvHeads, m_headDim, m_ropePairs, m_nope, m_latent;
  double m_normEps = 0.0;
  double m_scale;  // softmax scale: 1/sqrt(d_h) times yarn's attention factor squared
  int m_window;    // sliding window (Gemma-3's windowed layers, Mistral), 0 for full causal attention
  bool m_split;
  MlaDecode m_decode = MlaDecode::Absorbed;
  std::vector<std::vector<int>> m_pairs;
  torch::Tensor m_ropeCols;    // (n_kv * 2r) int64 columns of the (T, d_rot) RoPE tables
  torch::Tensor m_dimOrder;    // (n_kv * d_h) int64: original dim of each converted dim, per KV head
  torch::Tensor m_qNopeScale;  // (n_kv, nope) fp64: a^2 on the dropped rotating pairs' query dims, or undefined
  DerivedWeights m_decodeWeights;
};

// Sets the decode mode of every MLA layer of `model` (no-op for original layers).
void setMlaDecode(CausalLm& model, MlaDecode mode);

}  // namespace latentlab
