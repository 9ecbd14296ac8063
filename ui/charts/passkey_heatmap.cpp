#include "charts/passkey_heatmap.h"

#include <QPainter>
#include <algorithm>
#include <cmath>

namespace latentlab::ui {

namespace {

QString lengthLabel(int n) {
  return n >= 1024 && n % 1024 == 0 ? QStringLiteral("%1k").arg(n / 1024) : QString::number(n);
}

QColor mix(const QColor& a, const QColor& b, double t) {
  return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * t),
                          static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * t),
                          static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * t));
}

}  // namespace

PasskeyHeatmap::PasskeyHeatmap(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void PasskeyHeatmap::setCells(QVector<PasskeyCellView> cells) {
  m_cells = std::move(cells);
  update();
}

QVector<int> PasskeyHeatmap::lengths() const {
  QVector<int> out;
  for (const auto& c : m_cells)
    if (!out.contains(c.length)) out.push_back(c.length);
  std::sort(out.begin(), out.end());
  return out;
}

QVector<double> PasskeyHeatmap::depths() const {
  QVector<double> out;
  for (const auto& c : m_cells)
    if (!out.contains(c.depth)) out.push_back(c.depth);
  std::sort(out.begin(), out.end());
  return out;
}

QColor PasskeyHeatmap::colorOf(double share) {
  const QColor red(0xd7, 0x30, 0x27), yellow(0xfe, 0xe0, 0x8b), green(0x1a, 0x98, 0x50);
  share = std::clamp(share, 0.0, 1.0);
  return share < 0.5 ? mix(red, yellow, share / 0.5) : mix(yellow, green, (share - 0.5) / 0.5);
}

QRect PasskeyHeatmap::gridArea() const {
  const QFontMetrics fm(font());
  const int left = fm.horizontalAdvance(QStringLiteral("depth 100%")) + 10;
  const int top = fm.height() + 8;
  const int bottom = 2 * fm.height() + 8;
  return QRect(left, top, std::max(10, width() - left - 8), std::max(10, height() - top - bottom));
}

QRect PasskeyHeatmap::cellRect(int length, double depth) const {
  const auto ls = lengths();
  const auto ds = depths();
  const int col = static_cast<int>(ls.indexOf(length));
  const int row = static_cast<int>(ds.indexOf(depth));
  if (col < 0 || row < 0) return {};
  const QRect g = gridArea();
  const double w = static_cast<double>(g.width()) / static_cast<double>(ls.size());
  const double h = static_cast<double>(g.height()) / static_cast<double>(ds.size());
  return QRect(g.left() + static_cast<int>(std::lround(col * w)), g.top() + static_cast<int>(std::lround(row * h)),
               static_cast<int>(std::lround((col + 1) * w)) - static_cast<int>(std::lround(col * w)),
               static_cast<int>(std::lround((row + 1) * h)) - static_cast<int>(std::lround(row * h)));
}

void PasskeyHeatmap::setCacheLabel(const QString& label) {
  m_cacheLabel = label;
  update();
}

QString PasskeyHeatmap::title() const {
  return m_cacheLabel.isEmpty() ? tr("Passkey retrieval: share of keys repeated exactly")
                                : tr("Passkey retrieval over the %1: share of keys repeated exactly").arg(m_cacheLabel);
}

void PasskeyHeatmap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing, false);
  const QFontMetrics fm(font());
  p.setPen(palette().color(QPalette::WindowText));
  p.drawText(QRect(0, 0, width(), fm.height() + 4), Qt::AlignCenter, title());
  if (m_cells.isEmpty()) {
    p.drawText(rect(), Qt::AlignCenter,
               m_cacheLabel.isEmpty() ? tr("No passkey results for this model yet")
                                      : tr("No passkey results over the %1 for this model yet").arg(m_cacheLabel));
    return;
  }
  for (const auto& c : m_cells) {
    const QRect r = cellRect(c.length, c.depth);
    const QColor fill = colorOf(c.share);
    p.fillRect(r.adjusted(1, 1, -1, -1), fill);
    p.setPen(fill.lightnessF() > 0.55 ? Qt::black : Qt::white);
    p.drawText(r, Qt::AlignCenter, QStringLiteral("%1%").arg(std::lround(c.share * 100)));
  }
  p.setPen(palette().color(QPalette::WindowText));
  const QRect g = gridArea();
  for (double d : depths()) {
    const QRect r = cellRect(lengths().front(), d);
    p.drawText(QRect(0, r.top(), g.left() - 6, r.height()), Qt::AlignRight | Qt::AlignVCenter,
               QStringLiteral("depth %1%").arg(std::lround(d * 100)));
  }
  for (int len : lengths()) {
    const QRect r = cellRect(len, depths().front());
    p.drawText(QRect(r.left(), g.bottom() + 4, r.width(), fm.height()), Qt::AlignCenter, lengthLabel(len));
  }
  p.drawText(QRect(g.left(), g.bottom() + 4 + fm.height(), g.width(), fm.height()), Qt::AlignCenter,
             tr("prompt length (tokens)"));
}

}  // namespace latentlab::ui
