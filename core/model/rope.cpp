// RoPE tables and application (HF rotate_half layout).
#include "model/rope.h"

#include <cmath>

namespace latentlab {

RopeTables::RopeTables(int headDim, double theta) : m_headDim(headDim), m_theta(theta) {
  // HF: 1 / base^(arange(0, d, 2) / d), computed in fp32.
  auto exponents = torch::arange(0, headDim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<float>(headDim);
  m_invFreq = 1.0 / torch::pow(torch::tensor(static_cast<float>(theta), torch::kFloat32), exponents);
}

std::vector<double> RopeTables::frequencies() const {
  std::vector<double> out;
  auto f = m_invFreq.to(torch::kFloat64);
  for (int k = 0; k < m_headDim / 2; ++k) out.push_back(f[k].item<double>());
  return out;
}

void RopeTables::ensure(std::int64_t length, torch::ScalarType dtype, torch::Device device) {
  if (m_capacity >= length && m_cos.defined() && m_cos.scalar_type() == dtype && m_cos.device() == device) return;
  std::int64_t cap = std::max<std::int64_t>(length, std::max<std::int64_t>(m_capacity, 256));
  if (cap > m_capacity) cap = std::max(cap, 2 * m_capacity);
  auto pos = torch::arange(cap, torch::kInt64).to(torch::kFloat32);
  auto freqs = torch::outer(pos, m_invFreq);                       // (cap, d_h/2), fp32
  auto emb = torch::cat({freqs, freqs}, /*dim=*/-1);               // (cap, d_h)
  m_cos = emb.cos().to(device, dtype);
  m_sin = emb.sin().to(device, dtype);
  m_capacity = cap;
}

std::pair<torch::Tensor, torch::Tensor> RopeTables::range(std::int64_t start, std::int64_t len,
                                                          torch::ScalarType dtype, torch::Device device) {
  ensure(start + len, dtype, device);
  return {m_cos.narrow(0, start, len), m_sin.narrow(0, start, len)};
}

torch::Tensor applyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const auto half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  auto rotated = torch::cat({-x2, x1}, /*dim=*/-1);
  return x * cos + rotated * sin;
}

} // namespace latentlab
