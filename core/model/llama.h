// The Llama-family decoder (algorithms.md §1): pre-norm blocks, fp32 RMSNorm,
// SwiGLU MLP, causal attention with GQA, HF rotate_half RoPE, optional tied LM
// head. Modules are named like the HF checkpoint keys, so named_parameters()
// is the key table ("model.layers.0.self_attn.q_proj.weight", ...).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>

#include "latentlab/model_config.h"
#include "model/attention.h"
#include "model/kv_cache.h"
#include "model/rope.h"

namespace latentlab {

// x / rms(x) * w with fp32 statistics, cast back before the weight (Llama);
// with plusOne, x / rms(x) * (1 + w) entirely in fp32, then cast (Gemma).
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int dim, double eps, bool plusOne = false);
  torch::Tensor forward(const torch::Tensor& x);
  bool plusOne() const { return m_plusOne; }
  torch::Tensor weight;

 private:
  double m_eps;
  bool m_plusOne;
};
TORCH_MODULE(RmsNorm);

// down(act(gate(x)) * up(x)): SwiGLU (silu), or GeGLU (gelu, tanh) for Gemma.
class LlamaMlpImpl : public torch::nn::Module {
 public:
  LlamaMlpImpl(int hidden, int intermediate, bool bias, bool geluTanh = false);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 private:
  bool m_geluTanh;
};
TORCH_MODULE(LlamaMlp);

// Qwen3-MoE's sparse MLP: router logits gate(x) in the model's dtype, softmax
// over every expert in fp32, the top-k probabilities (renormalised with
// normTopK) cast back and weighting the chosen experts' SwiGLU outputs.
// Named like the checkpoint: mlp.gate, mlp.experts.{e}.{gate,up,down}_proj.
class SparseMoeImpl : public torch::nn::Module {
 public:
  SparseMoeImpl(int hidden, const MoeConfig& moe, bool geluTanh = false);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear gate{nullptr};
  torch::nn::ModuleList experts{nullptr};

 private:
  int m_topK;
  bool m_normTopK;
};
TORCH_MODULE(SparseMoe);

// Original MHA/GQA attention of layer `layer`, with the family's options:
// QK norms (Qwen3), no RoPE in NoPE layers (SmolLM3), RoPE on the leading
// ropeDim() dims of each head (Phi-3).
class LlamaAttention : public AttentionModule {
 public:
  LlamaAttention(const ModelConfig& cfg, int layer);
  torch::Tensor forward(const torch::Tensor& x, AttentionContext& ctx) override;
  bool usesRope() const { return m_rope; }
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RmsNorm q_norm{nullptr}, k_norm{nullptr};  // over head_dim, with qkNorm

 private:
  int m_heads, m_kvHeads, m_headDim;
  double m_scale;  // softmax scale: 1/sqrt(d_h) times yarn's (longrope's) attention factor squared
  bool m_rope;     // false in a NoPE layer
  int m_window;    // sliding window, 0 for full causal attention
};

using AttentionFactory = std::function<std::shared_ptr<AttentionModule>(const ModelConfig&, int layer)>;
// LlamaAttention for original configs, the converted MLA module when cfg.mla is set.
std::shared_ptr<AttentionModule> makeAttention(const ModelConfig& cfg, int layer);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const ModelConfig& cfg, std::shared_ptr<AttentionModule> attention, int layer = 0);
  torch::Tensor forward(const torch::Tensor& x, AttentionContext& ctx);
  std::shared_ptr<AttentionModule> self_attn;
  LlamaMlp mlp{nullptr};
  SparseMoe moe{nullptr};  // in place of mlp in a sparse layer (registered as "mlp")
  // Llama: x + attn(input_layernorm(x)), then h + mlp(post_attention_layernorm(h)).
  // Gemma's sandwich: post_attention_layernorm on the attention's output, and
  // pre_ / post_feedforward_layernorm around the MLP.
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  RmsNorm pre_feedforward_layernorm{nullptr}, post_feedforward_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

// "model": embeddings, layers, final norm.
class LlamaBackboneImpl : public torch::nn::Module {
 public:
  LlamaBackboneImpl(const ModelConfig& cfg, const AttentionFactory& factory);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RmsNorm norm{nullptr};
};
TORCH_MODULE(LlamaBackbone);

class CausalLm : public torch::nn::Module {
 public:
  explicit CausalLm(const ModelConfig& cfg, const AttentionFactory& factory = makeAttention);

  // ids (B, T) int64 -> logits (B, T, V). With a cache, positions continue
  // after the cached tokens and the cache grows by T.
  torch::Tensor forward(const torch::Tensor& ids, KvCache* cache = nullptr);
  torch::Tensor hidden(const torch::Tensor& ids, KvCache* cache = nullptr);  // (B, T, d) after the final norm
  torch::Tensor logitsFromHidden(const torch::Tensor& h);

  // Activation recompute: with it on, a training forward (grad mode on, no
  // cache) keeps only each decoder layer's input and runs the layer again in
  // backward, under the autocast state of the forward. Gradients are the
  // same; activation memory is one tensor a layer instead of all of them.
  void setRecompute(bool on) { m_recompute = on; }
  bool recompute() const { return m_recompute; }

  // Whether adding `adding` tokens after `cached` cached ones crosses a RoPE
  // regime (longrope's original context), so the cached keys would rotate
  // with other frequencies than the new ones: decoding then recomputes the
  // whole sequence, as transformers' Phi-3 generation does.
  bool ropeRegimeChanges(std::int64_t cached, std::int64_t adding) const;
  const ModelConfig& config() const { return m_cfg; }
  RopeTables& rope() { return m_rope; }
  // The tables layer `layer` rotates with (a windowed Gemma-3 layer's own base).
  RopeTables& ropeFor(int layer) { return m_localRope && m_cfg.windowOf(layer) > 0 ? *m_localRope : m_rope; }
  // ids (B, T) -> the first layer's input (B, T, d): the embedding, Gemma's scaled by sqrt(d).
  torch::Tensor embed(const torch::Tensor& ids);
  DecoderLayer layer(int i) const;
  int numLayers() const { return m_cfg.numLayers; }

  LlamaBackbone model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tied to the embedding

 private:
  ModelConfig m_cfg;
  RopeTables m_rope;
  std::optional<RopeTables> m_localRope;  // Gemma-3's windowed layers: their own base
  bool m_recompute = false;
};

// Mean next-token cross-entropy of windows (B, T+1): inputs [:, :-1], targets [:, 1:].
torch::Tensor languageModelLoss(CausalLm& model, const torch::Tensor& windows);

}  // namespace latentlab
