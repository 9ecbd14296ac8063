// Debiased EMA smoothing (the TensorBoard scalar dashboard's formula).
#include "charts/smoothing.h"

#include <cmath>

namespace latentlab::ui {

double TensorBoardSmoother::next(double y) {
  if (!std::isfinite(y)) return y;  // NaN/inf are shown as they are and do not enter the average
  m_last = m_last * m_weight + (1.0 - m_weight) * y;
  ++m_count;
  const double debias = m_weight == 1.0 ? 1.0 : 1.0 - std::pow(m_weight, m_count);
  return m_last / debias;
}

std::vector<double> smoothTensorBoard(const std::vector<double>& values, double weight) {
  TensorBoardSmoother s(weight);
  std::vector<double> out;
  out.reserve(values.size());
  for (double y : values) out.push_back(s.next(y));
  return out;
}

}  // namespace latentlab::ui
