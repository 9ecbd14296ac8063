// Pure arithmetic of the compare view (no Qt): x of a metric row on the chosen
// axis, linear interpolation on a curve, run − baseline aligned by tokens,
// and matching a preset's run pairs (no-scale, scaled) to stored runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "latentlab/run_store.h"

namespace latentlab::ui {

enum class ChartXAxis { Step, Tokens, WallTime };

// The x of a row: its step, its tokens, or its wall time (seconds since the
// run started, as the trainer writes it).
double xOf(const MetricPoint& p, ChartXAxis axis);

struct CurvePoint {
  double x = 0;
  double y = 0;
};

// y at x on a curve whose x never decreases, by linear interpolation between
// the neighbouring points (an exact hit returns that point; on repeated x the
// last one). nullopt outside [first x, last x], on an empty curve, or when a
// neighbour is not finite.
std::optional<double> interpolateAt(const std::vector<CurvePoint>& curve, double x);

// run − baseline at every row of `run` whose tokens lie inside the baseline's
// token range, the baseline interpolated linearly in tokens (the two runs may
// log at different steps). Rows whose value or interpolated baseline is not
// finite are skipped. The result keeps the run's step, tokens and wall time.
// Both inputs in step order (tokens non-decreasing).
std::vector<MetricPoint> differenceByTokens(const std::vector<MetricPoint>& run,
                                            const std::vector<MetricPoint>& baseline);

// One x of a group of runs' curves: the mean of the members' values there
// (each member interpolated linearly on the chosen x axis), their min and max.
struct GroupPoint {
  MetricPoint at;  // step, tokens and wall time of the grid row; value = mean
  double lo = 0;
  double hi = 0;
  int members = 0;
};

// Mean and min-max band of several runs' rows (each in step order, x never
// decreasing on `axis`), over the x range every member covers, at the x of
// the member with the most rows there. Non-finite values are skipped; one
// member gives its own rows with a zero-width band.
std::vector<GroupPoint> groupStats(const std::vector<const std::vector<MetricPoint>*>& members, ChartXAxis axis);

// Run names without the words all of them start with ("demo-gqa d_kv 8",
// "demo-gqa base" -> "d_kv 8", "base"), for legends; unchanged for fewer than
// two names or when a name would be left empty.
std::vector<std::string> withoutCommonWords(const std::vector<std::string>& names);

// A preset pair resolved to runs: minuend − subtrahend (no-scale − scaled).
struct RunPair {
  std::int64_t minuend = 0;
  std::int64_t subtrahend = 0;
  std::string label;  // "mla-noscale − mla"
};

struct NamedRun {
  std::int64_t id = 0;
  std::string name;
};

// True when a run called `runName` is the preset run `label`: the same name, or
// the name ending in " <label>" (presets prefix their scale: "demo mla").
bool runMatchesLabel(const std::string& runName, const std::string& label);

// Each (minuend label, subtrahend label) with exactly one matching run on
// each side becomes a pair; the others are listed in `unmatched` (by label).
std::vector<RunPair> matchPairs(const std::vector<NamedRun>& runs,
                                const std::vector<std::pair<std::string, std::string>>& labels,
                                std::vector<std::string>* unmatched = nullptr);

}  // namespace latentlab::ui
