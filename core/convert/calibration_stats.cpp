// Attention-input second moments over calibration text (docs/conversion.md).
#include "convert/calibration_stats.h"

#include "latentlab/error.h"

namespace latentlab {

LayerInputStats attentionInputStats(CausalLm& model, const std::vector<torch::Tensor>& batches,
                                    ProgressSink& progress, const CancelToken& cancel) {
  const ModelConfig& cfg = model.config();
  if (batches.empty()) {
    throw Error(ErrorCode::BadInput, "calibration: no calibration sequences",
                "Give calibration text or token ids from the training data.");
  }
  torch::NoGradGuard noGrad;
  const auto device = model.model->embed_tokens->weight.device();
  LayerInputStats out;
  for (int l = 0; l < cfg.numLayers; ++l) {
    out.cov.push_back(torch::zeros({cfg.hiddenSize, cfg.hiddenSize}, torch::TensorOptions(torch::kFloat64).device(device)));
  }
  for (std::size_t i = 0; i < batches.size(); ++i) {
    throwIfCancelled(cancel, "calibration");
    progress.progress("calibrate", static_cast<double>(i), static_cast<double>(batches.size()), "");
    auto ids = batches[i].to(device, torch::kInt64);
    if (ids.dim() == 1) ids = ids.unsqueeze(0);
    auto x = model.model->embed_tokens(ids);  // (B, T, d)
    AttentionContext ctx;
    ctx.rope = &model.rope();
    for (int l = 0; l < cfg.numLayers; ++l) {
      auto layer = model.layer(l);
      if (dynamic_cast<LlamaAttention*>(layer->self_attn.get()) == nullptr) {
        throw Error(ErrorCode::BadInput, "calibration: layer " + std::to_string(l) + " is not original MHA/GQA attention",
                    "Convert the original model, not a converted one.");
      }
      auto h = layer->input_layernorm(x).reshape({-1, cfg.hiddenSize}).to(torch::kFloat64);
      out.cov[static_cast<std::size_t>(l)].add_(torch::matmul(h.t(), h));
      x = layer->forward(x, ctx);
    }
    out.tokens += ids.numel();
  }
  progress.progress("calibrate", static_cast<double>(batches.size()), static_cast<double>(batches.size()), "");
  return out;
}

}  // namespace latentlab
