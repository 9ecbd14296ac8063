// Llama-family decoder modules.
#include "model/llama.h"

#include "latentlab/error.h"

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>

#include "model/autocast_scope.h"
#include "model/decode_linear.h"
#include "model/fused_ops.h"

namespace latentlab {
namespace F = torch::nn::functional;

RmsNormImpl::RmsNormImpl(int dim, double eps, bool plusOne) : m_eps(eps), m_plusOne(plusOne) {
  // A (1 + w) norm starts as the identity at w = 0.
  weight = register_parameter("weight", plusOne ? torch::zeros({dim}) : torch::ones({dim}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  return rmsNorm(x, weight, m_eps, m_plusOne);
}

LlamaMlpImpl::LlamaMlpImpl(int hidden, int intermediate, bool bias, bool geluTanh) : m_geluTanh(geluTanh) {
  gate_proj =
      register_module("gate_proj", torch::nn::Linear(torch::nn::LinearOptions(hidden, intermediate).bias(bias)));
  up_proj = register_module("up_proj", torch::nn::Linear(torch::nn::LinearOptions(hidden, intermediate).bias(bias)));
  down_proj =
      register_module("down_proj", torch::nn::Linear(torch::nn::LinearOptions(intermediate, hidden).bias(bias)));
}

torch::Tensor LlamaMlpImpl::forward(const torch::Tensor& x) {
  const auto gateUp = linearForwardMany(x, {gate_proj, up_proj});
  return linearForward(down_proj, gatedActivation(gateUp[0], gateUp[1], m_geluTanh));
}

SparseMoeImpl::SparseMoeImpl(int hidden, const MoeConfig& moe, bool geluTanh)
    : m_topK(moe.topK), m_normTopK(moe.normTopK) {
  gate = register_module("gate", torch::nn::Linear(torch::nn::LinearOptions(hidden, moe.experts).bias(false)));
  experts = register_module("experts", torch::nn::ModuleList());
  for (int e = 0; e < moe.experts; ++e) experts->push_back(LlamaMlp(hidden, moe.intermediate, false, geluTanh));
}

torch::Tensor SparseMoeImpl::forward(const torch::Tensor& x) {
  const auto shape = x.sizes().vec();
  auto flat = x.reshape({-1, x.size(-1)});  // (N, d)
  const auto compute = flat.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto probs = torch::softmax(linearForward(gate, flat).to(compute), -1);  // (N, E), fp32
  auto [weights, chosen] = probs.topk(m_topK, -1);                         // (N, k), most probable first
  if (m_normTopK) weights = weights / weights.sum(-1, /*keepdim=*/true);
  weights = weights.to(flat.scalar_type());
  auto out = torch::zeros_like(flat);
  // Each expert runs once over the tokens that chose it.
  const auto counts = torch::bincount(chosen.reshape({-1}), {}, static_cast<std::int64_t>(experts->size())).cpu();
  const auto count = counts.accessor<std::int64_t, 1>();  // one copy to the host, not one per expert
  for (std::int64_t e = 0; e < static_cast<std::int64_t>(experts->size()); ++e) {
    if (count[e] == 0) continue;
    auto hit = (chosen == e).nonzero();  // (n_e, 2): token, slot
    auto tokens = hit.select(1, 0);
    auto w = weights.index({tokens, hit.select(1, 1)}).unsqueeze(1);  // (n_e, 1)
    auto y = experts->ptr<LlamaMlpImpl>(static_cast<std::size_t>(e))->forward(flat.index_select(0, tokens));
    out.index_add_(0, tokens, y * w);
  }
  return out.view(shape);
}

LlamaAttention::LlamaAttention(const ModelConfig& cfg, int layer)
    : m_heads(cfg.numHeads),
      m_kvHeads(cfg.numKvHeads),
      m_headDim(cfg.headDim),
      m_scale(cfg.softmaxScale(cfg.headDim)),
      m_rope(cfg.usesRope(layer)),
      m_window(cfg.windowOf(layer)) {
  const int d = cfg.hiddenSize, q = cfg.numHeads * cfg.headDim, kv = cfg.numKvHeads * cfg.headDim;
  q_proj = register_module("q_proj", torch::nn::Linear(torch::nn::LinearOptions(d, q).bias(cfg.attentionBias)));
  k_proj = register_module("k_proj", torch::nn::Linear(torch::nn::LinearOptions(d, kv).bias(cfg.attentionBias)));
  v_proj = register_module("v_proj", torch::nn::Linear(torch::nn::LinearOptions(d, kv).bias(cfg.attentionBias)));
  o_proj = register_module("o_proj", torch::nn::Linear(torch::nn::LinearOptions(q, d).bias(cfg.oProjBias)));
  if (cfg.qkNorm) {
    q_norm = register_module("q_norm", RmsNorm(cfg.headDim, cfg.rmsNormEps, cfg.normPlusOne));
    k_norm = register_module("k_norm", RmsNorm(cfg.headDim, cfg.rmsNormEps, cfg.normPlusOne));
  }
}

torch::Tensor LlamaAttention::forward(const torch::Tensor& x, AttentionContext& ctx) {
  const auto B = x.size(0), T = x.size(1);
  const auto qkv = linearForwardMany(x, {q_proj, k_proj, v_proj});
  auto q = qkv[0].view({B, T, m_heads, m_headDim});
  auto k = qkv[1].view({B, T, m_kvHeads, m_headDim});
  if (q_norm) {  // Qwen3: each head's query and key normalised before RoPE
    q = q_norm(q);
    k = k_norm(k);
  }
  q = q.transpose(1, 2);                                               // (B, nh, T, hd)
  k = k.transpose(1, 2);                                               // (B, nkv, T, hd)
  auto v = qkv[2].view({B, T, m_kvHeads, m_headDim}).transpose(1, 2);  // (B, nkv, T, hd)
  if (m_rope) {
    auto [cos, sin] = ctx.rope->range(ctx.startPos, T, q.scalar_type(), q.device());
    q = applyRope(q, cos, sin);
    k = applyRope(k, cos, sin);
  }
  torch::Tensor out;
  if (ctx.cache != nullptr && ctx.cache->quantizes()) {
    // A quantized cache: a first chunk attends to itself in full precision
    // (as it is computed); later ones read the older tokens back from codes.
    const bool first = ctx.cache->length() == 0;
    const QuantizedSlot& ks = ctx.cache->appendQuantized(0, k);
    const QuantizedSlot& vs = ctx.cache->appendQuantized(1, v);
    out = first ? causalAttention(q, k, v, m_scale, m_window) : quantizedCausalAttention(q, ks, vs, m_scale, m_window);
    return linearForward(o_proj, out.transpose(1, 2).reshape({B, T, m_heads * m_headDim}));
  }
  if (ctx.cache != nullptr) {
    k = ctx.cache->append(0, k);  // (B, nkv, past+T, hd)
    v = ctx.cache->append(1, v);
  }
  out = causalAttention(q, k, v, m_scale, m_window);
  return linearForward(o_proj, out.transpose(1, 2).reshape({B, T, m_heads * m_headDim}));  // (B, T, nh*hd)
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& cfg, std::shared_ptr<AttentionModule> attention, int layer) {
  const auto norm = [&] { return RmsNorm(cfg.hiddenSize, cfg.rmsNormEps, cfg.normPlusOne); };
  self_attn = register_module("self_attn", std::move(attention));
  if (cfg.sparseLayer(layer)) {
    moe = register_module("mlp", SparseMoe(cfg.hiddenSize, *cfg.moe, cfg.geluTanh));
  } else {
    mlp = register_module("mlp", LlamaMlp(cfg.hiddenSize, cfg.intermediateSize, cfg.mlpBias, cfg.geluTanh));
  }
  input_layernorm = register_module("input_layernorm", norm());
  post_attention_layernorm = register_module("post_attention_layernorm", norm());
  if (cfg.sandwichNorms) {
    pre_feedforward_layernorm = register_module("pre_feedforward_layernorm", norm());
    post_feedforward_layernorm = register_module("post_feedforward_layernorm", norm());
  }
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, AttentionContext& ctx) {
  const auto ffn = [&](const torch::Tensor& in) { return moe ? moe(in) : mlp(in); };
  if (pre_feedforward_layernorm) {  // Gemma: each sublayer's output normalised before the residual add
    auto h = x + post_attention_layernorm(self_attn->forward(input_layernorm(x), ctx));
    return h + post_feedforward_layernorm(ffn(pre_feedforward_layernorm(h)));
  }
  auto h = x + self_attn->forward(input_layernorm(x), ctx);
  return h + ffn(post_attention_layernorm(h));
}

namespace {

// One decoder layer run without keeping its activations: the forward runs
// with grad off and saves the layer's input; backward runs the layer again
// with grad on (under the forward's autocast state, which backward does not
// have by itself), back-propagates the incoming gradient through it (the
// layer's parameter gradients accumulate as usual) and returns the input's.
struct LayerCall : torch::CustomClassHolder {
  DecoderLayerImpl* layer = nullptr;
  AttentionContext ctx;
  torch::DeviceType device = torch::kCPU;
  bool autocast = false;
  at::ScalarType autocastType = at::kBFloat16;
};

struct RecomputedLayer : torch::autograd::Function<RecomputedLayer> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                                const c10::intrusive_ptr<LayerCall>& call) {
    ctx->save_for_backward({x});
    ctx->saved_data["call"] = c10::IValue::make_capsule(call);
    // Grad mode is off inside a custom forward; the operators backward runs
    // again, not the inference kernels, so that both passes give one value.
    UnfusedOpsScope unfused;
    return {call->layer->forward(x, call->ctx)};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto call = c10::static_intrusive_pointer_cast<LayerCall>(ctx->saved_data["call"].toCapsule());
    auto x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    torch::Tensor out;
    {
      torch::AutoGradMode grad(true);
      AutocastScope autocast(call->device, call->autocast, call->autocastType);  // the forward's state again
      out = call->layer->forward(x, call->ctx);
    }
    torch::autograd::backward({out}, {grads[0]});
    return {x.grad(), torch::Tensor()};
  }
};

}  // namespace

LlamaBackboneImpl::LlamaBackboneImpl(const ModelConfig& cfg, const AttentionFactory& factory) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(cfg.vocabSize, cfg.hiddenSize));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < cfg.numLayers; ++i) layers->push_back(DecoderLayer(cfg, factory(cfg, i), i));
  norm = register_module("norm", RmsNorm(cfg.hiddenSize, cfg.rmsNormEps, cfg.normPlusOne));
}

CausalLm::CausalLm(const ModelConfig& cfg, const AttentionFactory& factory)
    : m_cfg(cfg),
      m_rope(cfg.ropeDim(), cfg.ropeTheta, cfg.ropeScaling, cfg.maxPositionEmbeddings, cfg.ropeTableScale()) {
  if (cfg.localRopeTheta) m_localRope.emplace(cfg.ropeDim(), *cfg.localRopeTheta);  // unscaled, as transformers
  model = register_module("model", LlamaBackbone(cfg, factory));
  if (!cfg.tieWordEmbeddings) {
    lm_head = register_module("lm_head",
                              torch::nn::Linear(torch::nn::LinearOptions(cfg.hiddenSize, cfg.vocabSize).bias(false)));
  }
}

bool CausalLm::ropeRegimeChanges(std::int64_t cached, std::int64_t adding) const {
  if (m_cfg.ropeScaling.type != "longrope" || cached == 0) return false;
  const std::int64_t original = m_cfg.ropeScaling.originalMaxPositionEmbeddings;
  return cached <= original && cached + adding > original;
}

DecoderLayer CausalLm::layer(int i) const {
  return DecoderLayer(model->layers->ptr<DecoderLayerImpl>(static_cast<std::size_t>(i)));
}

torch::Tensor CausalLm::hidden(const torch::Tensor& ids, KvCache* cache) {
  AttentionContext ctx;
  ctx.rope = &m_rope;
  ctx.startPos = cache != nullptr ? cache->length() : 0;
  auto x = embed(ids);  // (B, T, d)
  const bool recompute = m_recompute && cache == nullptr && torch::GradMode::is_enabled();
  for (int i = 0; i < m_cfg.numLayers; ++i) {
    ctx.cache = cache != nullptr ? &cache->layer(i) : nullptr;
    ctx.rope = &ropeFor(i);
    DecoderLayerImpl* layer = model->layers->ptr<DecoderLayerImpl>(static_cast<std::size_t>(i)).get();
    if (!recompute) {
      x = layer->forward(x, ctx);
      continue;
    }
    auto call = c10::make_intrusive<LayerCall>();
    call->layer = layer;
    call->ctx = ctx;
    call->device = x.device().type();
    call->autocast = at::autocast::is_autocast_enabled(call->device);
    call->autocastType = at::autocast::get_autocast_dtype(call->device);
    x = RecomputedLayer::apply(x, call)[0];
  }
  if (cache != nullptr) {
    for (int i = 0; i < m_cfg.numLayers; ++i) cache->layer(i).advance(ids.size(1));
  }
  return model->norm(x);
}

namespace {

// The lookup of an embedding the output layer shares, whose backward gives
// the looked-up rows' gradient as a sparse tensor: autograd adds it in place
// to the output layer's dense gradient of the same weight (the batch's token
// rows), where the dense lookup's backward fills a vocabulary-sized zero
// gradient, scatters the rows into it and then adds the two whole tables.
struct TiedEmbeddingFn : torch::autograd::Function<TiedEmbeddingFn> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& weight,
                               const torch::Tensor& ids) {
    const auto flat = ids.reshape({-1});
    ctx->save_for_backward({flat});
    ctx->saved_data["vocab"] = weight.size(0);
    auto sizes = ids.sizes().vec();
    sizes.push_back(weight.size(1));
    return weight.index_select(0, flat).view(sizes);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto flat = ctx->get_saved_variables()[0];
    const auto d = grads[0].size(-1);
    const auto rows = grads[0].reshape({-1, d}).contiguous();
    return {torch::sparse_coo_tensor(flat.unsqueeze(0), rows, {ctx->saved_data["vocab"].toInt(), d}), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor CausalLm::embed(const torch::Tensor& ids) {
  const auto& w = model->embed_tokens->weight;
  // Training a tied embedding where the fp32 kernels run: the sparse lookup gradient above.
  const bool sparseGradient = !lm_head && torch::GradMode::is_enabled() && w.requires_grad() && fp32KernelsApply({&w});
  auto x = sparseGradient ? TiedEmbeddingFn::apply(w, ids) : model->embed_tokens(ids);
  if (m_cfg.scaleEmbeddings) {  // Gemma: sqrt(d), rounded to the weights' dtype first
    x = x * torch::tensor(std::sqrt(static_cast<double>(m_cfg.hiddenSize)), torch::kFloat32).to(x.scalar_type());
  }
  return x;
}

torch::Tensor CausalLm::logitsFromHidden(const torch::Tensor& h) {
  auto logits = lm_head ? linearForward(lm_head, h) : linearForward(h, model->embed_tokens->weight);
  if (m_cfg.finalLogitSoftcap) {  // c * tanh(logits / c)
    const double c = *m_cfg.finalLogitSoftcap;
    logits = torch::tanh(logits / c) * c;
  }
  return logits;
}

torch::Tensor CausalLm::forward(const torch::Tensor& ids, KvCache* cache) {
  return logitsFromHidden(hidden(ids, cache));
}

torch::Tensor languageModelLoss(CausalLm& model, const torch::Tensor& windows) {
  const auto T = windows.size(1) - 1;
  auto inputs = windows.narrow(1, 0, T);
  auto targets = windows.narrow(1, 1, T);
  auto logits = model.forward(inputs);                                               // (B, T, V)
  if (logits.scalar_type() != torch::kFloat64) logits = logits.to(torch::kFloat32);  // loss in fp32 under bf16
  return crossEntropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

}  // namespace latentlab
