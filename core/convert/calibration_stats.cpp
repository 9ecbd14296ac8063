// Attention-input second moments over calibration text (docs/conversion.md).
#include "convert/calibration_stats.h"

#include "latentlab/error.h"

namespace latentlab {

std::int64_t forEachAttentionInput(CausalLm& model, const std::vector<torch::Tensor>& batches, ProgressSink& progress,
                                   const CancelToken& cancel, const std::string& what,
                                   const std::function<void(int, LlamaAttention&, const torch::Tensor&)>& visit) {
  if (batches.empty()) {
    throw Error(ErrorCode::BadInput, what + ": no calibration sequences",
                "Give calibration text or token ids from the training data.");
  }
  torch::NoGradGuard noGrad;
  const auto device = model.model->embed_tokens->weight.device();
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    throwIfCancelled(cancel, what);
    progress.progress("calibrate", static_cast<double>(i), static_cast<double>(batches.size()), "");
    auto ids = batches[i].to(device, torch::kInt64);
    if (ids.dim() == 1) ids = ids.unsqueeze(0);
    auto x = model.embed(ids);  // (B, T, d), as the model's own forward starts
    AttentionContext ctx;
    for (int l = 0; l < model.numLayers(); ++l) {
      ctx.rope = &model.ropeFor(l);
      auto layer = model.layer(l);
      auto* attn = dynamic_cast<LlamaAttention*>(layer->self_attn.get());
      if (attn == nullptr) {
        throw Error(ErrorCode::BadInput, what + ": layer " + std::to_string(l) + " is not original MHA/GQA attention",
                    "Calibrate the original model, not a converted one.");
      }
      visit(l, *attn, layer->input_layernorm(x));
      x = layer->forward(x, ctx);
    }
    tokens += ids.numel();
  }
  progress.progress("calibrate", static_cast<double>(batches.size()), static_cast<double>(batches.size()), "");
  return tokens;
}

LayerInputStats emptyInputStats(CausalLm& model) {
  const ModelConfig& cfg = model.config();
  const auto options = torch::TensorOptions(torch::kFloat64).device(model.model->embed_tokens->weight.device());
  LayerInputStats out;
  for (int l = 0; l < cfg.numLayers; ++l) out.cov.push_back(torch::zeros({cfg.hiddenSize, cfg.hiddenSize}, options));
  return out;
}

void addAttentionInput(LayerInputStats& stats, int layer, const torch::Tensor& h) {
  auto rows = h.reshape({-1, h.size(-1)}).to(torch::kFloat64);
  stats.cov[static_cast<std::size_t>(layer)].add_(torch::matmul(rows.t(), rows));
}

LayerInputStats attentionInputStats(CausalLm& model, const std::vector<torch::Tensor>& batches, ProgressSink& progress,
                                    const CancelToken& cancel) {
  LayerInputStats out = emptyInputStats(model);
  out.tokens =
      forEachAttentionInput(model, batches, progress, cancel, "calibration",
                            [&](int l, LlamaAttention&, const torch::Tensor& h) { addAttentionInput(out, l, h); });
  return out;
}

}  // namespace latentlab
