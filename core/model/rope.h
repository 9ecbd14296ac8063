// Rotary position embedding in the HF "rotate_half" layout: dimension i pairs
// with i + d_h/2; frequency pair k has theta_k = base^(-2k/d_h) (k = 0 is the
// highest frequency). Tables are computed in fp32 like HF and grown on demand.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace latentlab {

class RopeTables {
public:
  RopeTables(int headDim, double theta);

  // cos/sin for positions [start, start + len) as (len, d_h) in `dtype` on `device`.
  std::pair<torch::Tensor, torch::Tensor> range(std::int64_t start, std::int64_t len,
                                                torch::ScalarType dtype, torch::Device device);
  int headDim() const { return m_headDim; }
  // theta_k for k = 0 .. d_h/2 - 1, as doubles (for reports and tests).
  std::vector<double> frequencies() const;

private:
  void ensure(std::int64_t length, torch::ScalarType dtype, torch::Device device);
  int m_headDim;
  double m_theta;
  torch::Tensor m_invFreq;                 // (d_h/2,) fp32 on CPU
  torch::Tensor m_cos, m_sin;              // (capacity, d_h) cached in the last dtype/device
  std::int64_t m_capacity = 0;
};

// x * cos + rotate_half(x) * sin for x (B, H, T, d_h) and cos/sin (T, d_h).
torch::Tensor applyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

} // namespace latentlab
