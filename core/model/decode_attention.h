// Fused decode attention on the CPU: a few query rows per head against a long
// KV or latent cache in one pass over the cache (model/kernels/). Every
// attention path that decodes from a cache goes through it on the CPU (the
// original MHA/GQA model, MHA2MLA naive and absorbed, the from-scratch latent
// variants), so they are compared on the same kernel; CUDA and dtypes other
// than fp32/fp64 keep LibTorch's operators.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace latentlab {

// Query rows r of cache head h (rows of a head: R = groups * queries, row r is
// query r % queries) attend causally over keys [0, Tk - queries + r % queries]:
//   s[r][t] = scale * (q[b,h,r] . k[b,h,t] + qRope[b,hr,rr] . kRope[b,hr,t])
//   out[b,h,r] = softmax_t(s[r]) @ v[b,h]
// (hr, rr) = divmod(h*R + r, Rr): the optional second term's heads may group
// the rows differently (MHA2MLA: one shared latent, a RoPE key per KV head).
struct DecodeAttentionInputs {
  torch::Tensor q;      // (B, H, R, dk)
  torch::Tensor k;      // (B, H, Tk, dk)
  torch::Tensor v;      // (B, H, Tk, dv)
  torch::Tensor qRope;  // (B, Hr, Rr, dr) with Hr*Rr == H*R, or undefined
  torch::Tensor kRope;  // (B, Hr, Tk, dr), or undefined
  std::int64_t queries = 1;
  double scale = 1.0;
  int splits = 0;             // key splits per (batch, head); 0: from the thread count
  const char* isa = nullptr;  // a kernel build by name (tests); null: the widest the CPU runs
};

// Queries per step up to which the fused kernel is used (decoding, short chunks).
constexpr std::int64_t kFusedDecodeMaxQueries = 8;

// Whether fusedDecodeAttention takes these tensors: CPU, fp32 or fp64, no
// autograd, at most kFusedDecodeMaxQueries queries, and the kernel switched on.
bool fusedDecodeApplies(const torch::Tensor& q, const torch::Tensor& k, std::int64_t queries);

// (B, H, R, dv). Throws latentlab::Error on inconsistent shapes.
torch::Tensor fusedDecodeAttention(const DecodeAttentionInputs& in);

// Process-wide switch, on by default: the benchmark turns it off to time
// LibTorch's operators on the same model, the tests to compare the two.
void setFusedDecodeEnabled(bool enabled);
bool fusedDecodeEnabled();

// The kernel build the CPU runs ("avx512", "avx2", "baseline").
std::string fusedDecodeIsa();

}  // namespace latentlab
