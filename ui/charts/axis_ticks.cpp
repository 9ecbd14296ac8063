// Axis ticks and y fitting; see axis_ticks.h.
#include "charts/axis_ticks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

namespace latentlab::ui {

namespace {

int ticksBetween(double lo, double hi, double step) {
  const double first = std::ceil(lo / step - 1e-9), last = std::floor(hi / step + 1e-9);
  return last < first ? 0 : static_cast<int>(last - first) + 1;
}

// printf %.*e without a "+", leading exponent zeros or trailing mantissa zeros: 2e-4, 1.5e-5.
std::string compactScientific(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*e", decimals, value);
  std::string s = buf;
  const auto e = s.find('e');
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  if (mant.find('.') != std::string::npos) {
    while (!mant.empty() && mant.back() == '0') mant.pop_back();
    if (!mant.empty() && mant.back() == '.') mant.pop_back();
  }
  const bool negative = !exp.empty() && exp[0] == '-';
  std::size_t i = (exp[0] == '-' || exp[0] == '+') ? 1 : 0;
  while (i + 1 < exp.size() && exp[i] == '0') ++i;
  return mant + "e" + (negative ? "-" : "") + exp.substr(i);
}

std::string fixed(double value, int decimals, bool trimZeros) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  std::string s = buf;
  if (trimZeros && s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

int decimalsFor(double step) {
  return std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
}

}  // namespace

double niceStep(double lo, double hi, int maxTicks) {
  maxTicks = std::max(2, maxTicks);
  double span = hi - lo;
  if (!(span > 0) || !std::isfinite(span)) span = std::max(std::abs(lo) * 0.1, 1e-12);
  const double mag = std::pow(10.0, std::floor(std::log10(span / maxTicks)));
  for (int k = 0; k < 3; ++k) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = m * mag * std::pow(10.0, k);
      if (ticksBetween(lo, hi, step) <= maxTicks) return step;
    }
  }
  return 10 * 10 * 10 * mag;
}

std::string tickLabel(double value, double step, TickStyle style) {
  if (std::abs(value) < std::abs(step) * 1e-9 || value == 0) return "0";
  step = std::abs(step);
  if (style == TickStyle::Count && std::abs(value) >= 1000) {
    static const std::array<std::pair<double, const char*>, 4> kUnits = {
        {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}};
    for (const auto& [unit, suffix] : kUnits) {
      if (std::abs(value) < unit) continue;
      return fixed(value / unit, decimalsFor(step / unit), /*trimZeros=*/true) + suffix;
    }
  }
  if (step < 1e-3 || std::abs(value) >= 1e7) {
    // Digits the step needs beyond the value's own leading digit.
    const int lead = static_cast<int>(std::floor(std::log10(std::abs(value)) + 1e-9));
    const int last = static_cast<int>(std::floor(std::log10(step) + 1e-9));
    return compactScientific(value, std::clamp(lead - last, 0, 6));
  }
  return fixed(value, decimalsFor(step), /*trimZeros=*/style == TickStyle::Count);
}

AxisTicks niceTicks(double lo, double hi, int maxTicks, TickStyle style) {
  AxisTicks t;
  if (!std::isfinite(lo) || !std::isfinite(hi)) return t;
  if (hi < lo) std::swap(lo, hi);
  t.step = niceStep(lo, hi, maxTicks);
  const double first = std::ceil(lo / t.step - 1e-9), last = std::floor(hi / t.step + 1e-9);
  for (double k = first; k <= last; k += 1) {
    const double v = std::abs(k) < 0.5 ? 0.0 : k * t.step;
    t.values.push_back(v);
    t.labels.push_back(tickLabel(v, t.step, style));
  }
  return t;
}

AxisTicks logTicks(double lo, double hi, int maxTicks) {
  AxisTicks out;
  if (!std::isfinite(lo) || !std::isfinite(hi)) return out;
  if (hi < lo) std::swap(lo, hi);
  maxTicks = std::max(2, maxTicks);
  const double decades = hi - lo;
  if (decades < 1.0) {
    // Inside about a decade: linear nice ticks of the values, placed at their logs.
    const AxisTicks lin = niceTicks(std::pow(10.0, lo), std::pow(10.0, hi), maxTicks, TickStyle::Plain);
    for (std::size_t i = 0; i < lin.values.size(); ++i) {
      if (lin.values[i] <= 0) continue;
      out.values.push_back(std::log10(lin.values[i]));
      out.labels.push_back(lin.labels[i]);
    }
    return out;
  }
  const int d0 = static_cast<int>(std::floor(lo)), d1 = static_cast<int>(std::ceil(hi));
  auto within = [&](const std::vector<double>& mantissas, int stride, std::vector<std::pair<double, double>>* ticks) {
    ticks->clear();
    for (int d = d0; d <= d1; ++d) {
      if (((d % stride) + stride) % stride != 0) continue;
      for (double m : mantissas) {
        const double v = m * std::pow(10.0, d);
        const double pos = std::log10(v);
        if (pos >= lo - 1e-9 && pos <= hi + 1e-9) ticks->push_back({pos, v});
      }
    }
    return static_cast<int>(ticks->size()) <= maxTicks;
  };
  std::vector<std::pair<double, double>> ticks;
  bool ok = false;
  if (decades <= 3.0) ok = within({1, 2, 3, 5}, 1, &ticks) || within({1, 2, 5}, 1, &ticks) || within({1, 3}, 1, &ticks);
  for (int stride = 1; !ok; ++stride) ok = within({1}, stride, &ticks);
  for (const auto& [pos, v] : ticks) {
    out.values.push_back(pos);
    const double mag = std::pow(10.0, std::floor(pos + 1e-9));
    out.labels.push_back(tickLabel(v, mag, TickStyle::Plain));
  }
  return out;
}

double quantile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  // Two selections instead of a sort: linear in the values.
  const double at = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const auto i = static_cast<std::size_t>(std::floor(at));
  const double f = at - static_cast<double>(i);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(i), values.end());
  const double lo = values[i];
  if (i + 1 >= values.size() || f == 0) return lo;
  const double hi = *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(i) + 1, values.end());
  return lo + f * (hi - lo);
}

bool fitRange(std::vector<double> values, const std::vector<double>& keep, bool ignoreOutliers, double margin,
              double* lo, double* hi) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }), values.end());
  double a = std::numeric_limits<double>::infinity(), b = -a;
  if (ignoreOutliers && values.size() >= 20) {
    a = quantile(values, 0.05);
    b = quantile(values, 0.95);
  } else if (!values.empty()) {
    const auto [mn, mx] = std::minmax_element(values.begin(), values.end());
    a = *mn;
    b = *mx;
  }
  for (double v : keep) {
    if (!std::isfinite(v)) continue;
    a = std::min(a, v);
    b = std::max(b, v);
  }
  if (!std::isfinite(a)) return false;
  double span = b - a;
  if (!(span > 0)) {
    span = std::max(std::abs(a) * 0.02, 1e-9);
    a -= span / 2;
    b += span / 2;
  }
  *lo = a - margin * span;
  *hi = b + margin * span;
  return true;
}

}  // namespace latentlab::ui
