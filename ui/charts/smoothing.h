// TensorBoard's curve smoothing: a debiased exponential moving average, so the
// first points are not pulled toward zero; non-finite values pass through.
#pragma once

#include <vector>

namespace latentlab::ui {

// The running state, so a live curve smooths only its new points.
class TensorBoardSmoother {
 public:
  explicit TensorBoardSmoother(double weight) : m_weight(weight) {}
  double next(double value);  // the smoothed value shown for `value`

 private:
  double m_weight;
  double m_last = 0.0;
  int m_count = 0;
};

// weight in [0, 1): 0 = raw, 0.99 = very smooth.
std::vector<double> smoothTensorBoard(const std::vector<double>& values, double weight);

}  // namespace latentlab::ui
