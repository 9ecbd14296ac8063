// Visible-range refinement decisions; see range_refine.h.
#include "charts/range_refine.h"

#include <algorithm>

namespace latentlab::ui {

namespace {

// Bucket width of a downsample of `span` steps into maxPoints / 2 buckets.
std::int64_t bucketWidth(std::int64_t span, std::size_t maxPoints) {
  const auto buckets = static_cast<std::int64_t>(std::max<std::size_t>(1, maxPoints / 2));
  return std::max<std::int64_t>(1, (span + buckets - 1) / buckets);
}

}  // namespace

RefineDecision refineFor(const LoadedWindow& loaded, std::int64_t visMin, std::int64_t visMax, std::int64_t runLastStep,
                         std::size_t maxPoints) {
  RefineDecision d;
  if (runLastStep < 0) return d;  // nothing stored yet
  visMin = std::max<std::int64_t>(0, visMin);
  visMax = std::min(std::max(visMin, visMax), runLastStep);
  if (visMin > runLastStep) return d;
  const bool covers = loaded.stepMin <= visMin && (loaded.stepMax == kLastStep || loaded.stepMax >= visMax);
  if (covers) {
    if (loaded.raw() || loaded.lastStep < 0) return d;
    const std::int64_t loadedSpan = loaded.lastStep - loaded.firstStep + 1;
    const std::int64_t visSpan = visMax - visMin + 1;
    // Refine once the loaded buckets are more than twice as wide as a fresh
    // read of the visible window would give.
    if (bucketWidth(loadedSpan, loaded.maxPoints) <= 2 * bucketWidth(visSpan, maxPoints)) return d;
  }
  const std::int64_t span = visMax - visMin + 1;
  d.read = true;
  d.stepMin = std::max<std::int64_t>(0, visMin - span / 2);
  const std::int64_t hi = visMax + span / 2;
  d.stepMax = hi >= runLastStep ? kLastStep : hi;
  return d;
}

std::int64_t stepAtOrBelow(const std::vector<MetricPoint>& rows, const std::vector<double>& xs, double x) {
  if (rows.empty()) return 0;
  const auto it = std::upper_bound(xs.begin(), xs.end(), x);
  if (it == xs.begin()) return rows.front().step;
  return rows[static_cast<std::size_t>(it - xs.begin()) - 1].step;
}

std::int64_t stepAtOrAbove(const std::vector<MetricPoint>& rows, const std::vector<double>& xs, double x) {
  if (rows.empty()) return 0;
  const auto it = std::lower_bound(xs.begin(), xs.end(), x);
  if (it == xs.end()) return rows.back().step;
  return rows[static_cast<std::size_t>(it - xs.begin())].step;
}

}  // namespace latentlab::ui
