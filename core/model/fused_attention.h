// Causal self-attention in fp32 on the CPU, forward and backward, computed a
// block of queries at a time with the blocks past the diagonal skipped (the
// causal half of the score matrix is never computed, where LibTorch's CPU
// flash kernel computes every 512-key block a query block touches), the
// matrix products through the BLAS LibTorch itself uses, and the softmax rows
// through model/kernels/fused_kernel.cpp. The output and the gradients of q,
// k and v come back in the layout the projections give them (heads inside
// positions), so that the reshapes around attention copy nothing.
#pragma once

#include <torch/torch.h>

namespace latentlab {

// softmax(scale q k^T, causal) v for q (B, H, T, D), k (B, Hk, T, D) and v
// (B, Hk, T, Dv), Hk dividing H (query head h reads key head h / (H / Hk)),
// each with its last dim contiguous: in fp32 on the CPU with the kernels on
// and no autocast, in every grad mode (with its own backward where a graph
// is built, so a recomputed layer gets the forward's value); an undefined
// tensor where it does not apply (another dtype or device, autocast, the
// kernels off, no BLAS found), for the caller to run LibTorch's attention.
torch::Tensor fusedCausalAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   double scale);

}  // namespace latentlab
