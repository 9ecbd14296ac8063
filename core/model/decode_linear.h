// Linear layers on the few rows of a decode step. With one to eight rows a
// GEMM is a pass over the weights, and LibTorch's packs each weight panel
// before using it; the CPU kernel (model/kernels/linear_kernel.cpp) reads
// every weight once instead, in fp32 or bf16 (fp32 sums, as LibTorch's bf16
// linear). Training, long chunks, CUDA, autocast and other dtypes use
// LibTorch's linear unchanged.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace latentlab {

// Rows (all dims of x but the last, multiplied) up to which the kernel is used.
constexpr std::int64_t kDecodeLinearMaxRows = 8;

// x @ weight^T + bias, as at::linear.
torch::Tensor linearForward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});
// The same for a module: its weight and bias.
inline torch::Tensor linearForward(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return linearForward(x, layer->weight, layer->bias);
}

// Several linear layers on the same input (q, k and v; gate and up): one
// result per (weight, bias), as linearForward gives each. Where the kernel
// applies to all of them, their outputs are split over the threads as one
// range, so a step wakes the threads once for the lot and copies no weight.
std::vector<torch::Tensor> linearForwardMany(const torch::Tensor& x,
                                             const std::vector<std::pair<torch::Tensor, torch::Tensor>>& layers);
std::vector<torch::Tensor> linearForwardMany(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers);

// Weights derived from a module's parameters for decoding (projections
// stacked into one, products folded ahead of time), rebuilt whenever a source
// changes: another tensor (a move to another device or dtype), or an in-place
// update (an optimizer step, a checkpoint load), which bumps the tensor's
// version counter. Sources may be undefined (a layer without bias).
class DerivedWeights {
 public:
  using Build = std::function<std::vector<torch::Tensor>()>;
  // The tensors `build` made from `sources`, built again when any of them changed.
  const std::vector<torch::Tensor>& get(const std::vector<torch::Tensor>& sources, const Build& build);
  void clear();

 private:
  struct Key {
    const void* impl;
    const void* data;
    std::int64_t version;
    bool operator==(const Key&) const = default;
  };
  std::vector<Key> m_key;
  std::vector<torch::Tensor> m_sources;  // held, so that no other tensor can take a source's address
  std::vector<torch::Tensor> m_tensors;
};

// Whether a decode step may run on derived weights: no autograd through `w`.
inline bool derivedWeightsApply(const torch::Tensor& w) {
  return !(torch::GradMode::is_enabled() && w.requires_grad());
}

}  // namespace latentlab
