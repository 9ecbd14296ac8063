// Curve thinning to pixel columns; see thinning.h.
#include "charts/thinning.h"

#include <algorithm>
#include <cmath>

namespace latentlab::ui {

QList<QPointF> thinToColumns(const QList<QPointF>& points, double x0, double x1, int columns) {
  columns = std::max(1, columns);
  if (points.size() <= 2 * static_cast<qsizetype>(columns) + 2 || !(x1 > x0)) return points;
  const auto first =
      std::lower_bound(points.begin(), points.end(), x0, [](const QPointF& p, double x) { return p.x() < x; });
  const auto last =
      std::upper_bound(points.begin(), points.end(), x1, [](double x, const QPointF& p) { return x < p.x(); });
  QList<QPointF> out;
  out.reserve(2 * columns + 2);
  if (first != points.begin()) out.push_back(*(first - 1));
  if (last - first <= 2 * static_cast<qsizetype>(columns)) {
    for (auto it = first; it != last; ++it) out.push_back(*it);
  } else {
    const double scale = columns / (x1 - x0);
    auto it = first;
    while (it != last) {
      const int column = std::min(columns - 1, static_cast<int>((it->x() - x0) * scale));
      auto lo = it, hi = it;
      for (++it; it != last && std::min(columns - 1, static_cast<int>((it->x() - x0) * scale)) == column; ++it) {
        if (it->y() < lo->y()) lo = it;
        if (it->y() > hi->y()) hi = it;
      }
      if (lo == hi) {
        out.push_back(*lo);
      } else {
        out.push_back(*std::min(lo, hi));
        out.push_back(*std::max(lo, hi));
      }
    }
  }
  if (last != points.end()) out.push_back(*last);
  return out;
}

}  // namespace latentlab::ui
