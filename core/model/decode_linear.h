// Linear layers on the few rows of a decode step. With one to eight rows a
// GEMM is a pass over the weights, and LibTorch's packs each weight panel
// before using it; the CPU kernel (model/kernels/linear_kernel.cpp) reads
// every weight once instead. Training, long chunks, CUDA and dtypes other
// than fp32 use LibTorch's linear unchanged.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace latentlab {

// Rows (all dims of x but the last, multiplied) up to which the kernel is used.
constexpr std::int64_t kDecodeLinearMaxRows = 8;

// x @ weight^T + bias, as at::linear.
torch::Tensor linearForward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});
// The same for a module: its weight and bias.
inline torch::Tensor linearForward(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return linearForward(x, layer->weight, layer->bias);
}

}  // namespace latentlab
