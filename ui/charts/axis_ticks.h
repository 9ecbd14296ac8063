// Axis arithmetic of the run chart (no Qt): "nice" ticks at 1-2-5 multiples
// of a power of ten, their labels (SI suffixes for counts: 20k, 1.5M), ticks
// of a log axis (whole decades, or 1-2-5 / 1-2-3-5 mantissas inside few
// decades), and the y range a chart fits to the visible values (optionally
// ignoring outliers: the 5th-95th percentile band, as TensorBoard does) with
// a padding margin.
#pragma once

#include <string>
#include <vector>

namespace latentlab::ui {

// How tick values read: plain decimals (loss 4.95; 2e-4 for small steps), or
// counts with SI suffixes (tokens, steps, tokens/s: 500, 20k, 1.5M, 2G).
enum class TickStyle { Plain, Count };

// The tick step for [lo, hi]: a 1, 2 or 5 times a power of ten, the smallest
// such step that gives at most `maxTicks` ticks inside the range.
double niceStep(double lo, double hi, int maxTicks);

struct AxisTicks {
  double step = 0;             // 0 on a log axis that uses mantissas
  std::vector<double> values;  // inside [lo, hi], ascending
  std::vector<std::string> labels;
};

// Ticks at multiples of niceStep inside [lo, hi] (a multiple within 1e-9 of a
// step of zero is exactly 0), labelled in `style`.
AxisTicks niceTicks(double lo, double hi, int maxTicks, TickStyle style);

// Ticks of a log10 axis whose ends are log10(lo)..log10(hi) of positive
// values: positions are log10 of the tick values. Under about one decade the
// values are linear nice ticks; up to three decades 1, 2, 5 (and 3 when room)
// times powers of ten; beyond, whole decades (every k-th when many).
AxisTicks logTicks(double lo, double hi, int maxTicks);

// A label for `value` on an axis whose ticks are `step` apart: just enough
// decimals for the step, no "-0", scientific notation for small steps
// (2e-4), SI suffixes in Count style.
std::string tickLabel(double value, double step, TickStyle style);

// The y range for visible values: their min..max, or the 5th..95th
// percentile when `ignoreOutliers` (and there are at least 20 values),
// widened to hold every value of `keep` (sparse points such as validation
// losses, never treated as outliers), padded by `margin` of the span on each
// side (a flat curve gets a small span around it). Non-finite values are
// skipped. Returns false when there is no value to fit.
bool fitRange(std::vector<double> values, const std::vector<double>& keep, bool ignoreOutliers, double margin,
              double* lo, double* hi);

// The q-quantile (0..1) of values, linear between order statistics; values
// are reordered.
double quantile(std::vector<double>& values, double q);

}  // namespace latentlab::ui
