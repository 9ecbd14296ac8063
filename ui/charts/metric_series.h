// A stored metric as the chart holds it (PlotJuggler's data model): rows in
// step order whose value extents are kept up to date as rows arrive, so a
// rescale reads a range instead of rescanning every row, and whose rows
// inside an x window are found by binary search on an axis the rows never go
// back on (always the step; tokens and wall time unless a run restarted
// them, which the series notices as rows arrive). No Qt.
#pragma once

#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "charts/compare_math.h"
#include "latentlab/run_store.h"

namespace latentlab::ui {

// [lo, hi] of the values added; empty until one is.
struct ValueRange {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  bool empty() const { return !(lo <= hi); }
  void add(double v);
};

class MetricSeries {
 public:
  MetricSeries() = default;
  explicit MetricSeries(std::vector<MetricPoint> rows) { assign(std::move(rows)); }

  void assign(std::vector<MetricPoint> rows);
  void push_back(const MetricPoint& p);  // O(1): extends the ranges
  void clear() { assign({}); }

  const std::vector<MetricPoint>& rows() const { return m_rows; }
  std::size_t size() const { return m_rows.size(); }
  bool empty() const { return m_rows.empty(); }
  const MetricPoint& front() const { return m_rows.front(); }
  const MetricPoint& back() const { return m_rows.back(); }
  const MetricPoint& operator[](std::size_t i) const { return m_rows[i]; }
  auto begin() const { return m_rows.begin(); }
  auto end() const { return m_rows.end(); }

  // The finite values, and the positive ones (what a log axis can draw).
  const ValueRange& values() const { return m_values; }
  const ValueRange& positiveValues() const { return m_positive; }
  // Whether x on `axis` never decreases along the rows.
  bool ordered(ChartXAxis axis) const { return !m_unordered[static_cast<int>(axis)]; }
  // [first, last) of the rows whose x on `axis` lies in [x0, x1] when the
  // rows are ordered on it; otherwise every row (the caller tests each x).
  std::pair<std::size_t, std::size_t> within(ChartXAxis axis, double x0, double x1) const;

 private:
  void extend(const MetricPoint& p, const MetricPoint* previous);

  std::vector<MetricPoint> m_rows;
  ValueRange m_values, m_positive;
  bool m_unordered[3] = {false, false, false};  // per ChartXAxis
};

}  // namespace latentlab::ui
