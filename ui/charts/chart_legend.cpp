// The chart legend; see chart_legend.h.
#include "charts/chart_legend.h"

#include <QApplication>
#include <QContextMenuEvent>
#include <QDateTime>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

namespace latentlab::ui {

namespace {

constexpr int kPad = 6;        // around the legend
constexpr int kSwatch = 18;    // width of the colour line
constexpr int kGap = 14;       // between entries
constexpr int kMaxText = 260;  // px of name before eliding

}  // namespace

ChartLegend::ChartLegend(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
}

void ChartLegend::setEntries(const QVector<Entry>& entries) {
  m_entries = entries;
  m_placed = layoutFor(width(), &m_noteRect);
  updateGeometry();
  update();
}

void ChartLegend::setNote(const QString& note) {
  m_note = note;
  m_placed = layoutFor(width(), &m_noteRect);
  updateGeometry();
  update();
}

QVector<ChartLegend::Placed> ChartLegend::layoutFor(int width, QRect* noteRect) const {
  QVector<Placed> out;
  const QFontMetrics fm(font());
  const int rowH = fm.height() + 6;
  int x = kPad, y = kPad;
  const int right = std::max(width - kPad, kPad + 120);
  auto place = [&](int w) {
    if (x > kPad && x + w > right) {
      x = kPad;
      y += rowH;
    }
    const QRect r(x, y, w, rowH);
    x += w + kGap;
    return r;
  };
  for (const Entry& e : m_entries) {
    const int avail = std::min(kMaxText, right - kPad - kSwatch - 6);
    const QString text = fm.elidedText(e.label, Qt::ElideMiddle, std::max(40, avail));
    out.push_back({place(kSwatch + 6 + fm.horizontalAdvance(text)), text});
  }
  if (noteRect != nullptr) *noteRect = m_note.isEmpty() ? QRect() : place(fm.horizontalAdvance(m_note));
  return out;
}

int ChartLegend::heightForWidth(int width) const {
  QRect note;
  const QVector<Placed> placed = layoutFor(width, &note);
  int bottom = note.isValid() ? note.bottom() : 0;
  for (const Placed& p : placed) bottom = std::max(bottom, p.rect.bottom());
  return bottom > 0 ? bottom + 1 + kPad : 0;
}

QSize ChartLegend::sizeHint() const {
  return {400, heightForWidth(std::max(width(), 400))};
}
QSize ChartLegend::minimumSizeHint() const {
  return {120, heightForWidth(std::max(width(), 120))};
}

void ChartLegend::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  m_placed = layoutFor(width(), &m_noteRect);
  const int h = heightForWidth(width());
  if (h != height()) {
    setFixedHeight(h);
    updateGeometry();
  }
}

QRect ChartLegend::entryRect(qint64 runId) const {
  for (int i = 0; i < m_entries.size() && i < m_placed.size(); ++i) {
    if (m_entries[i].runId == runId) return m_placed[i].rect;
  }
  return {};
}

int ChartLegend::entryAt(const QPoint& pos) const {
  for (int i = 0; i < m_placed.size(); ++i) {
    if (m_placed[i].rect.contains(pos)) return i;
  }
  return -1;
}

void ChartLegend::paintInto(QPainter& p, const QVector<Placed>& placed, const QRect& noteRect) const {
  p.setRenderHint(QPainter::Antialiasing);
  for (int i = 0; i < m_entries.size() && i < placed.size(); ++i) {
    const Entry& e = m_entries[i];
    const QRect r = placed[i].rect;
    const bool dim = !e.visible || (m_hovered != 0 && m_hovered != e.runId);
    QColor line = e.color;
    if (dim) line.setAlpha(!e.visible ? 50 : 110);
    QPen pen(line, m_hovered == e.runId ? 4.0 : 3.0);
    pen.setCapStyle(Qt::RoundCap);
    p.setPen(pen);
    const int cy = r.center().y();
    p.drawLine(r.left() + 2, cy, r.left() + kSwatch - 2, cy);
    QColor text = palette().color(QPalette::WindowText);
    if (dim) text.setAlpha(!e.visible ? 90 : 150);
    p.setPen(text);
    QFont f = font();
    f.setStrikeOut(!e.visible);
    p.setFont(f);
    p.drawText(QRect(r.left() + kSwatch + 6, r.top(), r.width() - kSwatch - 6, r.height()),
               Qt::AlignVCenter | Qt::AlignLeft, placed[i].text);
    p.setFont(font());
  }
  if (noteRect.isValid()) {
    QColor c = palette().color(QPalette::WindowText);
    c.setAlpha(150);
    p.setPen(c);
    p.drawText(noteRect, Qt::AlignVCenter | Qt::AlignLeft, m_note);
  }
}

void ChartLegend::paintEvent(QPaintEvent*) {
  QPainter p(this);
  paintInto(p, m_placed, m_noteRect);
}

void ChartLegend::renderAt(QPainter& painter, const QPoint& origin, int width) const {
  QRect note;
  const QVector<Placed> placed = layoutFor(width, &note);
  painter.save();
  painter.translate(origin);
  painter.setFont(font());
  paintInto(painter, placed, note);
  painter.restore();
}

void ChartLegend::mousePressEvent(QMouseEvent* event) {
  m_pressed = event->button() == Qt::LeftButton ? entryAt(event->position().toPoint()) : -1;
  event->accept();
}

void ChartLegend::mouseReleaseEvent(QMouseEvent* event) {
  const int i = entryAt(event->position().toPoint());
  if (event->button() == Qt::LeftButton && i >= 0 && i == m_pressed) {
    m_lastToggled = m_entries[i].runId;
    m_lastToggledAt = QDateTime::currentMSecsSinceEpoch();
    Q_EMIT toggled(m_lastToggled);
  }
  m_pressed = -1;
  event->accept();
}

void ChartLegend::mouseDoubleClickEvent(QMouseEvent* event) {
  const int i = entryAt(event->position().toPoint());
  // The press and release before this already toggled the entry once: that
  // toggle is undone first, so the solo sees the legend as it was before the
  // double click (and a second double click on the soloed entry restores all).
  if (event->button() == Qt::LeftButton && i >= 0) {
    const qint64 run = m_entries[i].runId;
    const qint64 since = QDateTime::currentMSecsSinceEpoch() - m_lastToggledAt;
    if (run == m_lastToggled && since <= 2 * QApplication::doubleClickInterval()) Q_EMIT toggled(run);
    m_lastToggled = 0;
    Q_EMIT soloed(run);
  }
  m_pressed = -1;
  event->accept();
}

void ChartLegend::mouseMoveEvent(QMouseEvent* event) {
  const int i = entryAt(event->position().toPoint());
  // A hidden run's entry highlights nothing (it would dim every visible curve).
  const qint64 run = i >= 0 && m_entries[i].visible ? m_entries[i].runId : 0;
  setCursor(i >= 0 ? Qt::PointingHandCursor : Qt::ArrowCursor);
  if (run != m_hovered) {
    m_hovered = run;
    update();
    Q_EMIT hovered(run);
  }
}

void ChartLegend::leaveEvent(QEvent* event) {
  if (m_hovered != 0) {
    m_hovered = 0;
    update();
    Q_EMIT hovered(0);
  }
  QWidget::leaveEvent(event);
}

void ChartLegend::contextMenuEvent(QContextMenuEvent* event) {
  const int i = entryAt(event->pos());
  if (i >= 0) Q_EMIT colorMenuRequested(m_entries[i].runId);
  event->accept();
}

bool ChartLegend::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const int i = entryAt(help->pos());
    if (i >= 0) {
      QToolTip::showText(
          help->globalPos(),
          tr("%1\nclick: hide or show · double click: only this run · right click: colour").arg(m_entries[i].fullName),
          this, m_placed[i].rect);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(event);
}

}  // namespace latentlab::ui
