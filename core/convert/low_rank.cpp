// Truncated-SVD factorisation of [Wk_nope; Wv] (joint) or of each (split).
#include "convert/low_rank.h"

#include <cmath>
#include <optional>

#include "latentlab/error.h"
#include "model/intra_op_threads.h"

namespace latentlab {

namespace {
torch::ScalarType computeType(const torch::Tensor& w) {
  return w.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}
double squaredNorm(const torch::Tensor& t) {
  return t.numel() == 0 ? 0.0 : t.to(torch::kFloat64).square().sum().item<double>();
}
constexpr std::int64_t kThreadedSvdMinDim = 1024;
void checkRank(const torch::Tensor& w, std::int64_t rank) {
  const auto m = w.size(0), n = w.size(1);
  if (rank < 1 || rank > std::min(m, n)) {
    throw Error(ErrorCode::BadInput, "a rank-" + std::to_string(rank) + " factorisation of a " + std::to_string(m) +
                                         " x " + std::to_string(n) + " matrix is impossible (rank at most " +
                                         std::to_string(std::min(m, n)) + ")");
  }
}
}  // namespace

LowRankFactors svdFactor(const torch::Tensor& w, std::int64_t rank) {
  const auto m = w.size(0), n = w.size(1);
  checkRank(w, rank);
  auto a = w.detach().to(computeType(w));
  const bool small = a.device().is_cpu() && std::min(m, n) < kThreadedSvdMinDim;
  std::optional<IntraOpThreads> oneThread;
  if (small) oneThread.emplace(1);
  auto [u, s, vh] = at::linalg_svd(a, /*full_matrices=*/false);  // u (m, k), s (k), vh (k, n)
  LowRankFactors f;
  f.down = vh.narrow(0, 0, rank).contiguous();                                     // V_r^T (rank, n)
  f.up = (u.narrow(1, 0, rank) * s.narrow(0, 0, rank).unsqueeze(0)).contiguous();  // U_r S_r (m, rank)
  return f;
}

namespace {
// W L with cov = L L^T, in fp64: its left singular vectors are those of W X,
// its singular values the square roots of W cov W^T's eigenvalues (better
// conditioned than that eigenproblem).
torch::Tensor whitened(const torch::Tensor& w64, const torch::Tensor& cov) {
  auto c64 = cov.to(w64.device(), torch::kFloat64);
  // A ridge of 1e-9 of the mean variance: directions calibration never
  // reached (a short calibration text spans fewer than d directions in the
  // first layer) are ordered by the weights instead of by rounding noise.
  const double ridge = 1e-9 * c64.trace().item<double>() / static_cast<double>(c64.size(0));
  c64 = c64 + torch::eye(c64.size(0), c64.options()) * ridge;
  return torch::matmul(w64, at::linalg_cholesky(c64));
}
}  // namespace

torch::Tensor singularValues(const torch::Tensor& w, const torch::Tensor& cov) {
  auto w64 = w.detach().to(torch::kFloat64);
  std::optional<IntraOpThreads> oneThread;
  if (w64.device().is_cpu() && std::min(w.size(0), w.size(1)) < kThreadedSvdMinDim) oneThread.emplace(1);
  return at::linalg_svdvals(cov.defined() ? whitened(w64, cov) : w64).to(torch::kCPU);
}

LowRankFactors activationFactor(const torch::Tensor& w, const torch::Tensor& cov, std::int64_t rank) {
  checkRank(w, rank);
  auto w64 = w.detach().to(torch::kFloat64);
  auto [u, s, vh] = at::linalg_svd(whitened(w64, cov), /*full_matrices=*/false);
  auto e = u.narrow(1, 0, rank).contiguous();
  LowRankFactors f;
  f.down = torch::matmul(e.t(), w64).to(computeType(w)).contiguous();
  f.up = e.to(computeType(w)).contiguous();
  return f;
}

LowRankFactors orthonormalSvdFactor(const torch::Tensor& w, std::int64_t rank) {
  checkRank(w, rank);
  auto a = w.detach().to(computeType(w));
  std::optional<IntraOpThreads> oneThread;
  if (a.device().is_cpu() && std::min(w.size(0), w.size(1)) < kThreadedSvdMinDim) oneThread.emplace(1);
  auto [u, s, vh] = at::linalg_svd(a, /*full_matrices=*/false);
  LowRankFactors f;
  f.up = u.narrow(1, 0, rank).contiguous();
  f.down = torch::matmul(f.up.t(), a).contiguous();
  return f;
}

double activationError(const torch::Tensor& w, const torch::Tensor& cov, const LowRankFactors& f) {
  auto w64 = w.detach().to(torch::kFloat64);
  auto c64 = cov.to(w64.device(), torch::kFloat64);
  auto d = w64 - torch::matmul(f.up.to(torch::kFloat64), f.down.to(torch::kFloat64));
  const double total = (torch::matmul(w64, c64) * w64).sum().item<double>();
  if (total <= 0.0) return 0.0;
  const double err = (torch::matmul(d, c64) * d).sum().item<double>();
  return std::sqrt(std::max(0.0, err) / total);
}

double relativeError(const torch::Tensor& w, const LowRankFactors& f) {
  const double total = squaredNorm(w);
  if (total == 0.0) return 0.0;
  auto a = w.detach().to(f.up.scalar_type());
  return std::sqrt(squaredNorm(a - torch::matmul(f.up, f.down)) / total);
}

KvFactors factoriseKv(const torch::Tensor& wkNope, const torch::Tensor& wv, SvdMethod method, std::int64_t rank,
                      const torch::Tensor& cov, bool activations) {
  if (activations && !cov.defined()) {
    throw Error(ErrorCode::Internal, "activation-aware factorisation without calibration statistics");
  }
  auto factor = [&](const torch::Tensor& w) {
    return activations ? activationFactor(w, cov, rank) : svdFactor(w, rank);
  };
  KvFactors out;
  if (method == SvdMethod::Joint) {
    auto w = torch::cat({wkNope, wv}, /*dim=*/0);  // (nkv*(nope+dh), d)
    auto f = factor(w);
    out.kvDown = f.down;
    out.kvUp = f.up;
    out.relError = relativeError(w, f);
    if (cov.defined()) out.actError = activationError(w, cov, f);
    return out;
  }
  auto fk = factor(wkNope);
  auto fv = factor(wv);
  out.kDown = fk.down;
  out.kUp = fk.up;
  out.vDown = fv.down;
  out.vUp = fv.up;
  const double ek = relativeError(wkNope, fk), ev = relativeError(wv, fv);
  const double nk = squaredNorm(wkNope), nv = squaredNorm(wv);
  out.relError = nk + nv > 0.0 ? std::sqrt((ek * ek * nk + ev * ev * nv) / (nk + nv)) : 0.0;
  if (cov.defined()) {
    // Both halves together: the error of the stacked [Wk_nope; Wv] with block factors.
    auto w = torch::cat({wkNope, wv}, 0);
    auto up = torch::block_diag({fk.up, fv.up});
    auto down = torch::cat({fk.down, fv.down}, 0);
    out.actError = activationError(w, cov, LowRankFactors{down, up});
  }
  return out;
}

}  // namespace latentlab
