// Second moments of each layer's attention input over calibration text: what
// activation-aware factorisation (docs/conversion.md) and the DeepSeek-target
// conversion read instead of the activations themselves.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "latentlab/progress.h"
#include "model/llama.h"

namespace latentlab {

struct LayerInputStats {
  // cov[l] = sum over calibration tokens t of h_t h_t^T, (d, d) float64 on the
  // model's device, with h_t = input_layernorm(x_t) the input of layer l's attention.
  std::vector<torch::Tensor> cov;
  std::int64_t tokens = 0;
  bool empty() const { return cov.empty(); }
};

// Runs the original model over `batches` (each (B, T) int64 ids) layer by
// layer and calls visit(layer, attention, h) with each layer's attention input
// h = input_layernorm(x) (B, T, d). Progress ("calibrate") and cancel between
// batches; returns the tokens seen. Throws Error(BadInput) naming `what` when
// there are no batches or a layer is not original MHA/GQA attention.
std::int64_t forEachAttentionInput(CausalLm& model, const std::vector<torch::Tensor>& batches, ProgressSink& progress,
                                   const CancelToken& cancel, const std::string& what,
                                   const std::function<void(int, LlamaAttention&, const torch::Tensor&)>& visit);

// Empty second moments for every layer of `model` (on its device), and the
// one step that adds a layer's attention input h (B, T, d) to them.
LayerInputStats emptyInputStats(CausalLm& model);
void addAttentionInput(LayerInputStats& stats, int layer, const torch::Tensor& h);

// Runs the original model layer by layer over `batches` (each (B, T) int64
// ids), progress and cancel between batches. Throws Error(BadInput) when a
// layer is not original MHA/GQA attention or there are no batches.
LayerInputStats attentionInputStats(CausalLm& model, const std::vector<torch::Tensor>& batches, ProgressSink& progress,
                                    const CancelToken& cancel);

}  // namespace latentlab
