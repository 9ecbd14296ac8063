// RoPE tables and application (HF rotate_half layout).
#include "model/rope.h"

#include <cmath>

#include "model/fused_ops.h"

namespace latentlab {

namespace {

// HF: 1 / base^(arange(0, d, 2) / d), computed in fp32.
torch::Tensor plainInverseFrequencies(int headDim, double base) {
  auto exponents = torch::arange(0, headDim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<float>(headDim);
  return 1.0 / torch::pow(torch::tensor(static_cast<float>(base), torch::kFloat32), exponents);
}

// yarn's dimension at which a frequency turns `rotations` times over the context.
double yarnCorrectionDim(double rotations, int dim, double base, int context) {
  return (dim * std::log(context / (rotations * 2 * M_PI))) / (2 * std::log(base));
}

}  // namespace

RopeTables::RopeTables(int headDim, double theta) : m_headDim(headDim), m_theta(theta) {
  m_invFreq = plainInverseFrequencies(headDim, theta);
}

RopeTables::RopeTables(int headDim, double theta, const RopeScaling& scaling, int maxPositionEmbeddings,
                       double tableScale)
    : m_headDim(headDim),
      m_theta(theta),
      m_scaling(scaling),
      m_maxPositions(maxPositionEmbeddings),
      m_tableScale(tableScale) {
  m_dynamicLength = regimeLength(0);
  m_invFreq = inverseFrequencies(m_dynamicLength);
}

std::int64_t RopeTables::regimeLength(std::int64_t length) const {
  // dynamic NTK: the longest sequence seen past the context (the context itself within it);
  // longrope: one length in each regime (within the original context, past it).
  if (m_scaling.type == "dynamic") return std::max<std::int64_t>(length, m_maxPositions);
  if (m_scaling.type == "longrope") {
    const std::int64_t original = m_scaling.originalMaxPositionEmbeddings;
    return length > original ? original + 1 : original;
  }
  return m_maxPositions;
}

torch::Tensor RopeTables::inverseFrequencies(std::int64_t seqLen) const {
  const int dim = m_headDim;
  const RopeScaling& s = m_scaling;
  if (s.type == "linear") return plainInverseFrequencies(dim, m_theta) / s.factor;
  if (s.type == "longrope") {
    // 1 / (factor_k * base^(2k/d)): the short factors within the original context, the long ones past it.
    const auto& factors = seqLen > s.originalMaxPositionEmbeddings ? s.longFactor : s.shortFactor;
    auto ext = torch::tensor(std::vector<float>(factors.begin(), factors.end()), torch::kFloat32);
    auto exponents = torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<float>(dim);
    return 1.0 / (ext * torch::pow(torch::tensor(static_cast<float>(m_theta), torch::kFloat32), exponents));
  }
  if (s.type == "dynamic") {
    // NTK: a larger base once the sequence outgrows the context.
    const double len = static_cast<double>(std::max<std::int64_t>(seqLen, m_maxPositions));
    const double base = m_theta * std::pow(s.factor * len / m_maxPositions - (s.factor - 1), dim / (dim - 2.0));
    return plainInverseFrequencies(dim, base);
  }
  if (s.type == "llama3") {
    auto invFreq = plainInverseFrequencies(dim, m_theta);
    const double context = s.originalMaxPositionEmbeddings;
    const double lowWavelen = context / s.lowFreqFactor, highWavelen = context / s.highFreqFactor;
    auto wavelen = 2 * M_PI / invFreq;
    auto scaled = torch::where(wavelen > lowWavelen, invFreq / s.factor, invFreq);  // long waves: / factor
    auto smooth = (context / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
    auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
    auto medium = (wavelen >= highWavelen).logical_and(wavelen <= lowWavelen);
    return torch::where(medium, smoothed, scaled);
  }
  if (s.type == "yarn") {
    auto exponents = torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / static_cast<float>(dim);
    auto posFreqs = torch::pow(torch::tensor(static_cast<float>(m_theta), torch::kFloat32), exponents);
    auto extrapolation = 1.0 / posFreqs;
    auto interpolation = 1.0 / (s.factor * posFreqs);
    double low = yarnCorrectionDim(s.betaFast, dim, m_theta, s.originalMaxPositionEmbeddings);
    double high = yarnCorrectionDim(s.betaSlow, dim, m_theta, s.originalMaxPositionEmbeddings);
    if (s.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;  // no division by zero
    auto ramp = ((torch::arange(dim / 2, torch::kFloat32) - low) / (high - low)).clamp(0, 1);
    auto extrapolationShare = 1 - ramp;
    return interpolation * (1 - extrapolationShare) + extrapolation * extrapolationShare;
  }
  return plainInverseFrequencies(dim, m_theta);
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
  auto freqs = torch::outer(pos, m_invFreq);          // (cap, d_h/2), fp32
  auto emb = torch::cat({freqs, freqs}, /*dim=*/-1);  // (cap, d_h)
  // transformers: cos() * scale in fp32, then the model's dtype.
  m_cos = (m_tableScale == 1.0 ? emb.cos() : emb.cos() * m_tableScale).to(device, dtype);
  m_sin = (m_tableScale == 1.0 ? emb.sin() : emb.sin() * m_tableScale).to(device, dtype);
  m_capacity = cap;
}

std::pair<torch::Tensor, torch::Tensor> RopeTables::range(std::int64_t start, std::int64_t len, torch::ScalarType dtype,
                                                          torch::Device device) {
  if (m_scaling.type == "dynamic" || m_scaling.type == "longrope") {
    // transformers recomputes the frequencies for the positions of each
    // forward: dynamic NTK for the longest sequence seen past the context
    // (the original ones within it), longrope the long factors past the
    // original context (the short ones within it).
    const std::int64_t length = regimeLength(start + len);
    if (length != m_dynamicLength) {
      m_invFreq = inverseFrequencies(length);
      m_dynamicLength = length;
      m_capacity = 0;  // rebuild the tables
    }
  }
  ensure(start + len, dtype, device);
  return {m_cos.narrow(0, start, len), m_sin.narrow(0, start, len)};
}

torch::Tensor applyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (auto fused = fusedRope(x, cos, sin); fused.defined()) return fused;  // inference on the CPU: one pass
  const auto dims = cos.size(-1);
  if (dims < x.size(-1)) {  // a partially rotating head: the trailing dims pass through
    return torch::cat({applyRope(x.narrow(-1, 0, dims), cos, sin), x.narrow(-1, dims, x.size(-1) - dims)}, -1);
  }
  const auto half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  auto rotated = torch::cat({-x2, x1}, /*dim=*/-1);
  return x * cos + rotated * sin;
}

}  // namespace latentlab
