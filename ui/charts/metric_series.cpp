// The chart's series type: ranges kept as rows arrive, windows by binary
// search; see metric_series.h.
#include "charts/metric_series.h"

#include <algorithm>
#include <cmath>

namespace latentlab::ui {

void ValueRange::add(double v) {
  lo = std::min(lo, v);
  hi = std::max(hi, v);
}

void MetricSeries::assign(std::vector<MetricPoint> rows) {
  m_rows = std::move(rows);
  m_values = {};
  m_positive = {};
  std::fill(std::begin(m_unordered), std::end(m_unordered), false);
  for (std::size_t i = 0; i < m_rows.size(); ++i) extend(m_rows[i], i > 0 ? &m_rows[i - 1] : nullptr);
}

void MetricSeries::push_back(const MetricPoint& p) {
  const MetricPoint previous = m_rows.empty() ? MetricPoint{} : m_rows.back();
  m_rows.push_back(p);
  extend(p, m_rows.size() > 1 ? &previous : nullptr);
}

void MetricSeries::extend(const MetricPoint& p, const MetricPoint* previous) {
  if (std::isfinite(p.value)) {
    m_values.add(p.value);
    if (p.value > 0) m_positive.add(p.value);
  }
  if (previous == nullptr) return;
  for (const ChartXAxis axis : {ChartXAxis::Step, ChartXAxis::Tokens, ChartXAxis::WallTime}) {
    // NaN x (never written, but a store could hold one) orders nothing.
    const double a = xOf(*previous, axis), b = xOf(p, axis);
    if (!(b >= a)) m_unordered[static_cast<int>(axis)] = true;
  }
}

std::pair<std::size_t, std::size_t> MetricSeries::within(ChartXAxis axis, double x0, double x1) const {
  if (!ordered(axis)) return {0, m_rows.size()};
  const auto lo = std::lower_bound(m_rows.begin(), m_rows.end(), x0,
                                   [axis](const MetricPoint& p, double x) { return xOf(p, axis) < x; });
  const auto hi =
      std::upper_bound(lo, m_rows.end(), x1, [axis](double x, const MetricPoint& p) { return x < xOf(p, axis); });
  return {static_cast<std::size_t>(lo - m_rows.begin()), static_cast<std::size_t>(hi - m_rows.begin())};
}

}  // namespace latentlab::ui
