// RMSNorm, the gated MLP activation and rotary embeddings on the CPU, each
// one pass over the activations (model/kernels/fused_kernel.cpp) instead of
// the five, two and five LibTorch operators of their autograd forms: with the
// weights read by the decode kernels, those operators were most of what a
// decode step spent outside its matrix products, and on a prompt each one woke
// the OpenMP threads. In fp32 (no autocast) the norm and the activation run
// the kernels in every grad mode, with backward kernels of their own where a
// graph is built (one pass for each gradient instead of the operators' chain
// of products, slices and sums), and so does RoPE, so training, a recomputed
// layer and an evaluation all get one value. The bf16 norm, activation and
// RoPE run the kernels only where no graph is built (inference), else the
// operators. Everything runs the
// operators on other devices, in fp64, under autocast, or with the decode
// kernels switched off (model/decode_attention.h).
#pragma once

#include <torch/torch.h>

#include <initializer_list>

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
// apply (other shapes, bf16 autograd, ...), for the caller to run the operators.
torch::Tensor fusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// The mean cross-entropy of logits (N, V) against targets (N): in fp32 on
// the CPU (no autocast, the kernels on, every target in [0, V)) one kernel
// pass per row forward (the log-sum-exp) and one backward (softmax minus the
// target), keeping the logits and each row's log-sum-exp where LibTorch keeps
// the log-probabilities and, in backward, fills a zero gradient and runs two
// more passes; LibTorch's cross_entropy elsewhere. A row holding NaN or an
// infinity makes the loss and that row's gradient NaN.
torch::Tensor crossEntropy(const torch::Tensor& logits, const torch::Tensor& targets);

// Whether the fp32 training kernels run on these tensors (every one defined,
// fp32, on the CPU, not empty), with the kernels on and no autocast: then
// they run in every grad mode, with their own backward where a graph is
// built, so a forward, a recomputed forward and an evaluation all give one
// value (this file's norm, activation, RoPE and loss, model/fused_attention.h,
// a tied embedding's lookup).
bool fp32KernelsApply(std::initializer_list<const torch::Tensor*> tensors);

// While one is alive on a thread, the inference-only kernels (the bf16
// norm, activation and RoPE) run the operators there: a layer recomputed for
// its backward must give the values its forward gave. The fp32 norm,
// activation and RoPE keep their kernels, which give one value in every grad
// mode.
class UnfusedOpsScope {
 public:
  UnfusedOpsScope();
  ~UnfusedOpsScope();
  UnfusedOpsScope(const UnfusedOpsScope&) = delete;
  UnfusedOpsScope& operator=(const UnfusedOpsScope&) = delete;
};

}  // namespace latentlab
