// When to re-read a curve for the visible range (no Qt): a curve is read as a
// min/max-per-bucket downsample of a step window; zooming in re-reads the
// visible window (with a margin, so small pans need no read) once the loaded
// buckets are coarser than the view needs, and a pan past the window's edge
// re-reads too. A window read raw (fewer rows than the budget) never needs
// refining inside itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "latentlab/run_store.h"

namespace latentlab::ui {

inline constexpr std::int64_t kLastStep = std::numeric_limits<std::int64_t>::max();

struct LoadedWindow {
  std::int64_t stepMin = 0;
  std::int64_t stepMax = kLastStep;  // kLastStep: open-ended (live rows append)
  std::int64_t firstStep = 0;        // steps actually present in the window
  std::int64_t lastStep = -1;        // -1: no rows
  std::size_t maxPoints = 0;         // the budget it was read with
  std::size_t rows = 0;              // points returned
  bool raw() const { return rows < maxPoints; }
};

struct RefineDecision {
  bool read = false;
  std::int64_t stepMin = 0;
  std::int64_t stepMax = kLastStep;
};

// Visible steps [visMin, visMax] (inclusive, visMin <= visMax); `runLastStep`
// is the run's newest step (the window opens to kLastStep when it reaches it).
RefineDecision refineFor(const LoadedWindow& loaded, std::int64_t visMin, std::int64_t visMax, std::int64_t runLastStep,
                         std::size_t maxPoints);

// The step of the row whose x is nearest at or below `x` (above for the upper
// end), on rows in step order with x never decreasing; clamps to the ends.
std::int64_t stepAtOrBelow(const std::vector<MetricPoint>& rows, const std::vector<double>& xs, double x);
std::int64_t stepAtOrAbove(const std::vector<MetricPoint>& rows, const std::vector<double>& xs, double x);

}  // namespace latentlab::ui
