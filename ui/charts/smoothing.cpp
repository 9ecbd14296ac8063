// Debiased EMA smoothing (the TensorBoard scalar dashboard's formula).
#include "charts/smoothing.h"

#include <cmath>

namespace latentlab::ui {

std::vector<double> smoothTensorBoard(const std::vector<double>& values, double weight) {
  std::vector<double> out;
  out.reserve(values.size());
  double last = 0.0;
  int count = 0;
  for (double y : values) {
    if (!std::isfinite(y)) {  // NaN/inf are shown as they are and do not enter the average
      out.push_back(y);
      continue;
    }
    last = last * weight + (1.0 - weight) * y;
    ++count;
    const double debias = weight == 1.0 ? 1.0 : 1.0 - std::pow(weight, count);
    out.push_back(last / debias);
  }
  return out;
}

} // namespace latentlab::ui
