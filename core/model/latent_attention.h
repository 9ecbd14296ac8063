// Latent attention trained from scratch (algorithms.md §4): MLA in DeepSeek's
// form, GLA-k and MLRA-2/-4, with the MLRA paper's scale factors switchable,
// naive and absorbed decode over a cache of the latent and the shared RoPE key.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <utility>
#include <vector>

#include "model/attention.h"
#include "model/llama.h"
#include "model/mla_attention.h"

namespace latentlab {

// Checkpoint keys under self_attn (DeepSeek's names):
//   q_a_proj (q_lora, d), q_a_layernorm (q_lora), q_b_proj (n_h*(d_nope+d_R), q_lora)
//     with per-head rows [nope; rope]; or, with q_lora_rank 0, one q_proj (n_h*(d_nope+d_R), d);
//   kv_a_proj_with_mqa (d_c + d_R, d): the latent heads side by side, then the RoPE key;
//   kv_a_layernorm (d_c): RMS statistics per latent head, weights concatenated
//     (absent with latent_norm false);
//   kv_b_proj (latent_heads*G*(d_nope+d_v), d_c/latent_heads): latent head l's block of
//     rows maps it to its G query heads' [k_nope; v];
//   o_proj (d, n_h*d_v).
// RoPE (HF rotate_half layout over the d_R dims, theta_k = rope_theta^(-2k/d_R), or
// the source model's frequencies of a conversion) acts on the query's last d_R
// dims per head and on the single shared key.
class LatentAttentionLayer : public AttentionModule {
 public:
  LatentAttentionLayer(const ModelConfig& cfg, int layer);
  torch::Tensor forward(const torch::Tensor& x, AttentionContext& ctx) override;

  void setDecode(MlaDecode mode) { m_decode = mode; }
  MlaDecode decode() const { return m_decode; }

  torch::nn::Linear q_proj{nullptr}, q_a_proj{nullptr}, q_b_proj{nullptr}, kv_a_proj_with_mqa{nullptr},
      kv_b_proj{nullptr}, o_proj{nullptr};
  RmsNorm q_a_layernorm{nullptr}, kv_a_layernorm{nullptr};

 private:
  // RMSNorm of each latent head of c (B, T, d_c) -> (B, L, T, d_c/L), times the KV scale.
  torch::Tensor latentHeads(const torch::Tensor& c);
  // Attention of queries over the cached/whole latent c (B, L, Tk, dl) and RoPE key (B, 1, Tk, d_R):
  // K and V rebuilt per branch, or W_UK absorbed into the query and W_UV applied after.
  torch::Tensor naive(const torch::Tensor& qNope, const torch::Tensor& qRope, const torch::Tensor& kRope,
                      const torch::Tensor& c);
  torch::Tensor absorbed(const torch::Tensor& qNope, const torch::Tensor& qRope, const torch::Tensor& kRope,
                         const torch::Tensor& c);
  // The same over a cache read a block at a time: read(b) gives the RoPE key
  // (B, 1, len, dR) and the latent heads (B, L, len, dl) of block b (the
  // blocks of a quantized cache, or one block holding a plain one).
  using CachedLatent = std::function<std::pair<torch::Tensor, torch::Tensor>(const TokenBlock&)>;
  torch::Tensor absorbedBlocks(const torch::Tensor& qNope, const torch::Tensor& qRope, std::int64_t Tk,
                               const std::vector<TokenBlock>& blocks, const CachedLatent& read);

  int m_heads, m_dNope, m_dRope, m_dV, m_dC, m_latentHeads, m_branches;
  int m_perBranch;  // P: latent heads per branch
  int m_group;      // G: query heads one latent head serves
  double m_eps, m_qScale, m_kvScale, m_branchScale, m_softmaxScale;
  bool m_interleaved = false;  // DeepSeek's RoPE layout in the projections
  MlaDecode m_decode = MlaDecode::Absorbed;
  RopeTables m_rope;
  torch::Tensor m_ropeCols;          // conversions: the d_R columns of the source head's (T, d_h) tables
  bool m_sourceIsModelHead = false;  // ... and that head is the model's: its RoPE table is the model's
};

// Sets the decode mode of every from-scratch latent layer of `model`.
void setLatentDecode(CausalLm& model, MlaDecode mode);

}  // namespace latentlab
