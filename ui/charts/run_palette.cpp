// Run and status colours; see run_palette.h.
#include "charts/run_palette.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace latentlab::ui {

namespace {

struct Lab {
  double l = 0, a = 0, b = 0;
};

double linear(double c) {
  return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
}

Lab toLab(const QColor& c) {
  const double r = linear(c.redF()), g = linear(c.greenF()), b = linear(c.blueF());
  const double x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
  const double y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  const double z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
  auto f = [](double t) { return t > 216.0 / 24389 ? std::cbrt(t) : (24389.0 / 27 * t + 16) / 116; };
  return {116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))};
}

// sRGB of a CIELAB colour, or an invalid QColor outside the gamut.
QColor fromLab(double l, double a, double bb) {
  const double fy = (l + 16) / 116, fx = fy + a / 500, fz = fy - bb / 200;
  auto inv = [](double t) { return t * t * t > 216.0 / 24389 ? t * t * t : (116 * t - 16) * 27 / 24389; };
  const double x = inv(fx) * 0.95047, y = inv(fy), z = inv(fz) * 1.08883;
  const double rl = 3.2406 * x - 1.5372 * y - 0.4986 * z;
  const double gl = -0.9689 * x + 1.8758 * y + 0.0415 * z;
  const double bl = 0.0557 * x - 0.2040 * y + 1.0570 * z;
  auto gamma = [](double v) { return v <= 0.0031308 ? 12.92 * v : 1.055 * std::pow(v, 1 / 2.4) - 0.055; };
  const double r = gamma(rl), g = gamma(gl), b = gamma(bl);
  if (r < 0 || r > 1 || g < 0 || g > 1 || b < 0 || b > 1) return {};
  return QColor::fromRgbF(static_cast<float>(r), static_cast<float>(g), static_cast<float>(b));
}

const std::vector<QColor>& candidates() {
  static const std::vector<QColor> list = [] {
    std::vector<QColor> out;
    // Tableau 10 without its grey (grey reads as "disabled").
    for (QRgb rgb :
         {0x1f77b4u, 0xff7f0eu, 0x2ca02cu, 0xd62728u, 0x9467bdu, 0x8c564bu, 0xe377c2u, 0xbcbd22u, 0x17becfu}) {
      out.emplace_back(rgb);
    }
    // Then a grid in CIELAB polar coordinates, lightness readable on white.
    for (double l : {40.0, 50.0, 60.0, 70.0}) {
      for (double chroma : {35.0, 55.0, 75.0}) {
        for (int h = 0; h < 360; h += 15) {
          const double rad = h * M_PI / 180;
          const QColor c = fromLab(l, chroma * std::cos(rad), chroma * std::sin(rad));
          if (c.isValid()) out.push_back(c);
        }
      }
    }
    return out;
  }();
  return list;
}

QHash<qint64, QColor>& registry() {
  static QHash<qint64, QColor> colors;
  return colors;
}

}  // namespace

double labDistance(const QColor& a, const QColor& b) {
  const Lab x = toLab(a), y = toLab(b);
  return std::sqrt((x.l - y.l) * (x.l - y.l) + (x.a - y.a) * (x.a - y.a) + (x.b - y.b) * (x.b - y.b));
}

QColor distinctColor(const std::vector<QColor>& taken) {
  const auto& list = candidates();
  std::vector<double> nearest(list.size(), std::numeric_limits<double>::infinity());
  double best = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    for (const QColor& t : taken) nearest[i] = std::min(nearest[i], labDistance(list[i], t));
    best = std::max(best, nearest[i]);
  }
  if (!std::isfinite(best)) return list.front();
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (nearest[i] >= 0.9 * best) return list[i];
  }
  return list.front();
}

namespace {
constexpr std::array<QRgb, 9> kPalette = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                          0x8c564b, 0xe377c2, 0xbcbd22, 0x17becf};
}  // namespace

QColor runColor(qint64 runId) {
  const auto it = registry().constFind(runId);
  if (it != registry().constEnd()) return *it;
  const auto i = static_cast<std::size_t>((runId < 0 ? -runId : runId) % static_cast<qint64>(kPalette.size()));
  return QColor(kPalette[i]);
}

QColor paletteColor(int index) {
  const auto n = static_cast<int>(kPalette.size());
  return QColor(kPalette[static_cast<std::size_t>(((index % n) + n) % n)]);
}

void setRunColor(qint64 runId, const QColor& color) {
  if (color.isValid())
    registry().insert(runId, color);
  else
    registry().remove(runId);
}

void forgetRunColors() {
  registry().clear();
}

QColor statusColor(RunStatus status) {
  switch (status) {
    case RunStatus::Running:
      return QColor(0x1f77b4);
    case RunStatus::Completed:
      return QColor(0x2e7d32);
    case RunStatus::Failed:
    case RunStatus::Crashed:
      return QColor(0xc62828);
    case RunStatus::Cancelled:
      return QColor(0xef6c00);
    default:
      return QColor(0x757575);  // queued
  }
}

}  // namespace latentlab::ui
