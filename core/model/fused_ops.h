// RMSNorm, the gated MLP activation and rotary embeddings for inference on
// the CPU, each one pass over the activations (model/kernels/fused_kernel.cpp)
// instead of the five, two and five LibTorch operators of their autograd forms: with the weights
// read by the decode kernels, those operators were most of what a decode
// step spent outside its matrix products, and on a prompt each one woke the
// OpenMP threads. Used where no autograd graph is being built (grad mode
// off), fp32 or bf16 on the CPU, no autocast, and the decode kernels switched
// on (model/decode_attention.h); everything else runs the operators.
#pragma once

#include <torch/torch.h>

namespace latentlab {

// x / sqrt(mean(x^2, -1) + eps) in fp32 (fp64 stays fp64), then scaled by
// `weight` in x's dtype, or by (1 + weight) in fp32 before the cast (plusOne,
// Gemma): HF's LlamaRMSNorm and Gemma3RMSNorm.
torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps, bool plusOne);

// act(gate) * up, act SiLU or (geluTanh) tanh-approximated GELU, the
// activation rounded to the inputs' dtype before the product.
torch::Tensor gatedActivation(const torch::Tensor& gate, const torch::Tensor& up, bool geluTanh);

// x cos + rotate_half(x) sin (model/rope.h's applyRope) for x (B, H, T, d)
// with its last dim contiguous and cos, sin (T, rd), rd <= d, even: the dims
// from rd on pass through. An undefined tensor where the kernel does not
// apply (other shapes, autograd, ...), for the caller to run the operators.
torch::Tensor fusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// While one is alive on a thread, these run the operators there: a layer
// recomputed for its backward must give the values its forward gave.
class UnfusedOpsScope {
 public:
  UnfusedOpsScope();
  ~UnfusedOpsScope();
  UnfusedOpsScope(const UnfusedOpsScope&) = delete;
  UnfusedOpsScope& operator=(const UnfusedOpsScope&) = delete;
};

}  // namespace latentlab
