// Truncated-SVD factorisation of [Wk_nope; Wv] (joint) or of each (split).
#include "convert/low_rank.h"

#include <cmath>
#include <optional>

#include "latentlab/error.h"

namespace latentlab {

namespace {
torch::ScalarType computeType(const torch::Tensor& w) {
  return w.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}
double squaredNorm(const torch::Tensor& t) {
  return t.numel() == 0 ? 0.0 : t.to(torch::kFloat64).square().sum().item<double>();
}
// Runs a scope with at most `n` intra-op threads (CPU), restoring the count
// after. SVDs of attention-sized matrices gain nothing from threads, and on a
// busy machine the thread hand-offs made them ~20x slower.
class IntraOpThreads {
 public:
  explicit IntraOpThreads(int n) : m_saved(at::get_num_threads()) {
    if (n < m_saved) at::set_num_threads(n);
  }
  ~IntraOpThreads() {
    if (at::get_num_threads() != m_saved) at::set_num_threads(m_saved);
  }
  IntraOpThreads(const IntraOpThreads&) = delete;
  IntraOpThreads& operator=(const IntraOpThreads&) = delete;

 private:
  int m_saved;
};
constexpr std::int64_t kThreadedSvdMinDim = 1024;
}  // namespace

LowRankFactors svdFactor(const torch::Tensor& w, std::int64_t rank) {
  const auto m = w.size(0), n = w.size(1);
  if (rank < 1 || rank > std::min(m, n)) {
    throw Error(ErrorCode::BadInput, "a rank-" + std::to_string(rank) + " factorisation of a " + std::to_string(m) +
                                         " x " + std::to_string(n) + " matrix is impossible (rank at most " +
                                         std::to_string(std::min(m, n)) + ")");
  }
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

double relativeError(const torch::Tensor& w, const LowRankFactors& f) {
  const double total = squaredNorm(w);
  if (total == 0.0) return 0.0;
  auto a = w.detach().to(f.up.scalar_type());
  return std::sqrt(squaredNorm(a - torch::matmul(f.up, f.down)) / total);
}

KvFactors factoriseKv(const torch::Tensor& wkNope, const torch::Tensor& wv, SvdMethod method, std::int64_t rank) {
  KvFactors out;
  if (method == SvdMethod::Joint) {
    auto w = torch::cat({wkNope, wv}, /*dim=*/0);  // (nkv*(nope+dh), d)
    auto f = svdFactor(w, rank);
    out.kvDown = f.down;
    out.kvUp = f.up;
    out.relError = relativeError(w, f);
    return out;
  }
  auto fk = svdFactor(wkNope, rank);
  auto fv = svdFactor(wv, rank);
  out.kDown = fk.down;
  out.kUp = fk.up;
  out.vDown = fv.down;
  out.vUp = fv.up;
  const double ek = relativeError(wkNope, fk), ev = relativeError(wv, fv);
  const double nk = squaredNorm(wkNope), nv = squaredNorm(wv);
  out.relError = nk + nv > 0.0 ? std::sqrt((ek * ek * nk + ev * ev * nv) / (nk + nv)) : 0.0;
  return out;
}

}  // namespace latentlab
