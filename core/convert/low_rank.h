// Low-rank factorisation of the NoPE key and value projections (algorithms.md
// §2.2): SVD_joint and SVD_split, from the weights only or from calibration
// activations (docs/conversion.md).
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

// The factors minimising the error on calibration activations instead of the
// weights: with cov = sum_t x_t x_t^T (n, n) over the layer's inputs, the top
// `rank` eigenvectors E of W cov W^T give down = E^T W, up = E (a PCA of the
// outputs W x), computed as the whitened SVD of W L with cov = L L^T. A ridge
// of 1e-9 of the mean variance orders the directions calibration never reached.
LowRankFactors activationFactor(const torch::Tensor& w, const torch::Tensor& cov, std::int64_t rank);

// The singular values of W (fp64, largest first), or with `cov` defined those
// of W L with cov = L L^T (the whitening activationFactor uses): the square
// roots of the energies the latent's directions keep.
torch::Tensor singularValues(const torch::Tensor& w, const torch::Tensor& cov = {});

// Orthonormal weight SVD: down = U_r^T W, up = U_r (the product equals svdFactor's).
LowRankFactors orthonormalSvdFactor(const torch::Tensor& w, std::int64_t rank);

// ||(W - up*down) X||_F / ||W X||_F over the activations whose second moment is
// cov, computed from cov alone (0 for W X = 0).
double activationError(const torch::Tensor& w, const torch::Tensor& cov, const LowRankFactors& f);

struct KvFactors {
  // Joint: kvDown (rank, d), kvUp ([Wk_nope rows; Wv rows], rank).
  // Split: kDown/kUp and vDown/vUp, each of rank `rank`.
  torch::Tensor kvDown, kvUp, kDown, kUp, vDown, vUp;
  double relError = 0.0;   // relative Frobenius error of [Wk_nope; Wv] overall
  double actError = -1.0;  // relative error on the calibration activations (-1 without them)
};

// wkNope (n_kv*(d_h-2r), d) and wv (n_kv*d_h, d); rank = n_kv * d_kv. With
// `cov` defined (the layer's input second moment, fp64) the error on the
// activations is reported, and with `activations` the factors minimise it.
KvFactors factoriseKv(const torch::Tensor& wkNope, const torch::Tensor& wv, SvdMethod method, std::int64_t rank,
                      const torch::Tensor& cov = {}, bool activations = false);

}  // namespace latentlab
