// Rotary position embedding in the HF "rotate_half" layout: dimension i pairs
// with i + d_h/2; frequency pair k has theta_k = base^(-2k/d_h) (k = 0 is the
// highest frequency), rescaled by the config's RoPE scaling (linear, dynamic
// NTK, yarn, llama3: docs/rope_scaling.md) with transformers' fp32 operations.
// Scaling keeps the order of the frequencies, so pair k stays the k-th
// highest. yarn's attention factor is not in the tables: ModelConfig::
// softmaxScale folds it into the query-key products. Tables are grown on
// demand; dynamic NTK recomputes the frequencies for sequences longer than
// the model's context, and longrope switches to its long factors past the
// original context, as transformers does. A partially rotating head (Phi-3)
// builds its tables over its rotating dims only (ModelConfig::ropeDim).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "latentlab/model_config.h"

namespace latentlab {

class RopeTables {
 public:
  RopeTables(int headDim, double theta);  // unscaled
  // `tableScale` multiplies cos and sin (ModelConfig::ropeTableScale).
  RopeTables(int headDim, double theta, const RopeScaling& scaling, int maxPositionEmbeddings, double tableScale = 1.0);

  // cos/sin for positions [start, start + len) as (len, d_h) in `dtype` on `device`.
  std::pair<torch::Tensor, torch::Tensor> range(std::int64_t start, std::int64_t len, torch::ScalarType dtype,
                                                torch::Device device);
  int headDim() const { return m_headDim; }
  // theta_k for k = 0 .. d_h/2 - 1, as doubles (for reports and tests).
  std::vector<double> frequencies() const;

 private:
  void ensure(std::int64_t length, torch::ScalarType dtype, torch::Device device);
  torch::Tensor inverseFrequencies(std::int64_t seqLen) const;
  // The sequence length whose frequencies positions [0, length) use (dynamic, longrope).
  std::int64_t regimeLength(std::int64_t length) const;
  int m_headDim;
  double m_theta;
  RopeScaling m_scaling;
  int m_maxPositions = 0;
  double m_tableScale = 1.0;
  std::int64_t m_dynamicLength = 0;  // dynamic NTK: the length m_invFreq was computed for
  torch::Tensor m_invFreq;           // (d_h/2,) fp32 on CPU
  torch::Tensor m_cos, m_sin;        // (capacity, d_h) cached in the last dtype/device
  std::int64_t m_capacity = 0;
};

// x * cos + rotate_half(x) * sin for x (B, H, T, d_h) and cos/sin (T, d_h);
// cos/sin narrower than x (T, d_rot) rotate x's leading d_rot dims only.
torch::Tensor applyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace latentlab
