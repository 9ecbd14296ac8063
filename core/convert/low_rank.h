// Low-rank factorisation of the NoPE key and value projections from the
// weights only (algorithms.md §2.2): SVD_joint and SVD_split.
#pragma once

#include <torch/torch.h>

#include "latentlab/kv_budget.h"

namespace latentlab {

// W (m, n) ~ up (m, rank) * down (rank, n) with down = V_r^T, up = U_r S_r.
struct LowRankFactors {
  torch::Tensor down;
  torch::Tensor up;
};

// Truncated SVD in fp32 (fp64 when w is fp64); factors come back in that dtype.
LowRankFactors svdFactor(const torch::Tensor& w, std::int64_t rank);

// ||W - up*down||_F / ||W||_F (0 for a zero W).
double relativeError(const torch::Tensor& w, const LowRankFactors& f);

struct KvFactors {
  // Joint: kvDown (rank, d), kvUp ([Wk_nope rows; Wv rows], rank).
  // Split: kDown/kUp and vDown/vUp, each of rank `rank`.
  torch::Tensor kvDown, kvUp, kDown, kUp, vDown, vUp;
  double relError = 0.0;  // relative Frobenius error of [Wk_nope; Wv] overall
};

// wkNope (n_kv*(d_h-2r), d) and wv (n_kv*d_h, d); rank = n_kv * d_kv.
KvFactors factoriseKv(const torch::Tensor& wkNope, const torch::Tensor& wv, SvdMethod method, std::int64_t rank);

}  // namespace latentlab
