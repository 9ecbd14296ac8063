// Compare-view arithmetic; see compare_math.h.
#include "charts/compare_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace latentlab::ui {

double xOf(const MetricPoint& p, ChartXAxis axis) {
  switch (axis) {
    case ChartXAxis::Tokens:
      return static_cast<double>(p.tokens);
    case ChartXAxis::WallTime:
      return p.wallTime;
    case ChartXAxis::Step:
      break;
  }
  return static_cast<double>(p.step);
}

std::optional<double> interpolateAt(const std::vector<CurvePoint>& curve, double x) {
  if (curve.empty() || !std::isfinite(x) || x < curve.front().x || x > curve.back().x) return std::nullopt;
  // First point with x' > x; the one before it has x' <= x.
  const auto hi =
      std::upper_bound(curve.begin(), curve.end(), x, [](double v, const CurvePoint& p) { return v < p.x; });
  const CurvePoint& a = *(hi - 1);
  if (a.x == x || hi == curve.end()) {
    if (!std::isfinite(a.y)) return std::nullopt;
    return a.y;
  }
  const CurvePoint& b = *hi;
  if (!std::isfinite(a.y) || !std::isfinite(b.y)) return std::nullopt;
  const double t = (x - a.x) / (b.x - a.x);
  return a.y + t * (b.y - a.y);
}

std::vector<GroupPoint> groupStats(const std::vector<const std::vector<MetricPoint>*>& members, ChartXAxis axis) {
  std::vector<std::vector<CurvePoint>> curves;
  double x0 = -std::numeric_limits<double>::infinity(), x1 = -x0;
  for (const auto* rows : members) {
    std::vector<CurvePoint> c;
    for (const MetricPoint& p : *rows) {
      if (std::isfinite(p.value)) c.push_back({xOf(p, axis), p.value});
    }
    if (c.empty()) continue;
    x0 = std::max(x0, c.front().x);  // the range every member covers
    x1 = std::min(x1, c.back().x);
    curves.push_back(std::move(c));
  }
  std::vector<GroupPoint> out;
  if (curves.empty() || x1 < x0) return out;
  // The grid: the member with the most rows inside the common range.
  const std::vector<MetricPoint>* grid = nullptr;
  std::size_t most = 0;
  for (const auto* rows : members) {
    std::size_t n = 0;
    for (const MetricPoint& p : *rows) n += std::isfinite(p.value) && xOf(p, axis) >= x0 && xOf(p, axis) <= x1 ? 1 : 0;
    if (n > most || grid == nullptr) {
      most = n;
      grid = rows;
    }
  }
  for (const MetricPoint& p : *grid) {
    const double x = xOf(p, axis);
    if (x < x0 || x > x1 || !std::isfinite(p.value)) continue;
    GroupPoint g;
    g.at = p;
    double sum = 0;
    g.lo = std::numeric_limits<double>::infinity();
    g.hi = -g.lo;
    for (const auto& c : curves) {
      const auto y = interpolateAt(c, x);
      if (!y) continue;
      sum += *y;
      g.lo = std::min(g.lo, *y);
      g.hi = std::max(g.hi, *y);
      ++g.members;
    }
    if (g.members == 0) continue;
    g.at.value = sum / g.members;
    out.push_back(g);
  }
  return out;
}

std::vector<MetricPoint> differenceByTokens(const std::vector<MetricPoint>& run,
                                            const std::vector<MetricPoint>& baseline) {
  std::vector<CurvePoint> base;
  base.reserve(baseline.size());
  for (const MetricPoint& p : baseline) {
    if (std::isfinite(p.value)) base.push_back({static_cast<double>(p.tokens), p.value});
  }
  std::vector<MetricPoint> out;
  out.reserve(run.size());
  for (const MetricPoint& p : run) {
    if (!std::isfinite(p.value)) continue;
    const auto b = interpolateAt(base, static_cast<double>(p.tokens));
    if (!b) continue;
    MetricPoint d = p;
    d.value = p.value - *b;
    out.push_back(d);
  }
  return out;
}

std::vector<std::string> withoutCommonWords(const std::vector<std::string>& names) {
  if (names.size() < 2) return names;
  // Length of the common prefix that ends just after a space.
  std::size_t common = names.front().size();
  for (const std::string& n : names) {
    std::size_t i = 0;
    while (i < common && i < n.size() && n[i] == names.front()[i]) ++i;
    common = i;
  }
  const std::size_t cut = names.front().rfind(' ', common == 0 ? 0 : common - 1);
  if (common == 0 || cut == std::string::npos) return names;
  for (const std::string& n : names) {
    if (n.size() <= cut + 1) return names;
  }
  std::vector<std::string> out;
  for (const std::string& n : names) out.push_back(n.substr(cut + 1));
  return out;
}

bool runMatchesLabel(const std::string& runName, const std::string& label) {
  if (label.empty()) return false;
  if (runName == label) return true;
  return runName.size() > label.size() && runName.compare(runName.size() - label.size(), label.size(), label) == 0 &&
         runName[runName.size() - label.size() - 1] == ' ';
}

std::vector<RunPair> matchPairs(const std::vector<NamedRun>& runs,
                                const std::vector<std::pair<std::string, std::string>>& labels,
                                std::vector<std::string>* unmatched) {
  auto find = [&](const std::string& label) -> std::optional<std::int64_t> {
    std::optional<std::int64_t> found;
    for (const NamedRun& r : runs) {
      if (!runMatchesLabel(r.name, label)) continue;
      if (found) return std::nullopt;  // ambiguous
      found = r.id;
    }
    return found;
  };
  std::vector<RunPair> out;
  for (const auto& [minuend, subtrahend] : labels) {
    const auto a = find(minuend), b = find(subtrahend);
    if (a && b) {
      out.push_back({*a, *b, minuend + " \u2212 " + subtrahend});
    } else if (unmatched != nullptr) {
      if (!a) unmatched->push_back(minuend);
      if (!b) unmatched->push_back(subtrahend);
    }
  }
  return out;
}

}  // namespace latentlab::ui
