// TensorBoard's curve smoothing: a debiased exponential moving average, so the
// first points are not pulled toward zero; non-finite values pass through.
#pragma once

#include <vector>

namespace latentlab::ui {

// weight in [0, 1): 0 = raw, 0.99 = very smooth.
std::vector<double> smoothTensorBoard(const std::vector<double>& values, double weight);

} // namespace latentlab::ui
