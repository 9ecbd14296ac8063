// Chart navigation and crosshair; see chart_canvas.h.
#include "charts/chart_canvas.h"

#include <QChart>
#include <QGraphicsLineItem>
#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QRubberBand>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <limits>

namespace latentlab::ui {

ChartCanvas::ChartCanvas(QChart* chart, QWidget* parent) : QChartView(chart, parent) {
  setRubberBand(QChartView::NoRubberBand);  // our own band: a click must not zoom
  m_band = new QRubberBand(QRubberBand::Rectangle, viewport());
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  m_line = new QGraphicsLineItem(chart);
  QPen pen(QColor(90, 90, 90, 160));
  pen.setStyle(Qt::DashLine);
  pen.setCosmetic(true);
  m_line->setPen(pen);
  m_line->setZValue(20);
  m_box = new QGraphicsRectItem(chart);
  m_box->setBrush(QColor(255, 255, 255, 230));
  m_box->setPen(QPen(QColor(160, 160, 160)));
  m_box->setZValue(21);
  m_label = new QGraphicsSimpleTextItem(m_box);
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.9);
  m_label->setFont(f);
  m_span = new QGraphicsRectItem(chart);
  m_span->setBrush(QColor(0, 0, 0, 14));
  m_span->setPen(Qt::NoPen);
  m_span->setZValue(1);  // over the plot's background, under the curves
  m_span->hide();
  hideCrosshair();
}

void ChartCanvas::setFaintSpan(double x0, double x1) {
  const QRectF plot = chart()->plotArea();
  if (!(x1 > x0) || plot.isEmpty()) {
    m_span->hide();
    return;
  }
  const double left = std::clamp(chart()->mapToPosition(QPointF(x0, 0)).x(), plot.left(), plot.right());
  const double right = std::clamp(chart()->mapToPosition(QPointF(x1, 0)).x(), plot.left(), plot.right());
  m_span->setRect(QRectF(left, plot.top(), right - left, plot.height()));
  m_span->setVisible(right > left);
}

bool ChartCanvas::faintSpanVisible() const {
  return m_span->isVisible();
}

bool ChartCanvas::crosshairVisible() const {
  return m_line->isVisible();
}

void ChartCanvas::hideCrosshair() {
  m_line->hide();
  m_box->hide();
  m_lines.clear();
}

void ChartCanvas::showCrosshairAt(const QPointF& scenePos) {
  const bool shown = drawCrosshair(scenePos);
  Q_EMIT crosshairMoved(shown ? chart()->mapToValue(scenePos).x() : std::numeric_limits<double>::quiet_NaN());
}

void ChartCanvas::showCrosshairAtX(double x) {
  if (!std::isfinite(x)) {
    hideCrosshair();
    return;
  }
  const QRectF plot = chart()->plotArea();
  const QPointF at = chart()->mapToPosition(QPointF(x, 0));
  // A linked chart shows where the x is, and its values only in the chart
  // under the mouse: a box on every small plot would hide the curves.
  if (drawCrosshair(QPointF(at.x(), plot.center().y()))) m_box->hide();
}

bool ChartCanvas::drawCrosshair(const QPointF& scenePos) {
  const QRectF plot = chart()->plotArea();
  if (!plot.contains(scenePos) || chart()->series().isEmpty()) {
    hideCrosshair();
    return false;
  }
  const double x = chart()->mapToValue(scenePos).x();
  m_lines = m_text ? m_text(x) : QStringList{};
  m_line->setLine(scenePos.x(), plot.top(), scenePos.x(), plot.bottom());
  m_line->show();
  if (m_lines.isEmpty()) {
    m_box->hide();
    return true;
  }
  m_label->setText(m_lines.join(QLatin1Char('\n')));
  const QRectF text = m_label->boundingRect();
  QRectF box(0, 0, text.width() + 10, text.height() + 8);
  // Right of the line, or left of it near the right edge; inside the plot.
  double left = scenePos.x() + 12;
  if (left + box.width() > plot.right()) left = scenePos.x() - 12 - box.width();
  const double top =
      std::clamp(scenePos.y() - box.height() / 2, plot.top(), std::max(plot.top(), plot.bottom() - box.height()));
  m_box->setRect(box);
  m_box->setPos(left, top);
  m_label->setPos(5, 4);
  m_box->show();
  return true;
}

void ChartCanvas::zoomAbout(const QPointF& scenePos, double factorX, double factorY) {
  const QRectF plot = chart()->plotArea();
  if (plot.isEmpty()) return;
  const QPointF c = plot.contains(scenePos) ? scenePos : plot.center();
  // The rectangle that, zoomed into, keeps `c` where it is.
  const double w = plot.width() / factorX, h = plot.height() / factorY;
  const double fx = (c.x() - plot.left()) / plot.width(), fy = (c.y() - plot.top()) / plot.height();
  chart()->zoomIn(QRectF(c.x() - fx * w, c.y() - fy * h, w, h));
}

void ChartCanvas::wheelEvent(QWheelEvent* event) {
  const double steps = event->angleDelta().y() / 120.0;
  if (steps == 0) return;
  const double f = std::pow(1.25, steps);
  const bool yOnly = event->modifiers() & Qt::ControlModifier;
  zoomAbout(event->position(), yOnly ? 1.0 : f, yOnly ? f : 1.0);
  event->accept();
  Q_EMIT viewChangedByUser(yOnly);
}

void ChartCanvas::mousePressEvent(QMouseEvent* event) {
  const bool pan = event->button() == Qt::MiddleButton ||
                   (event->button() == Qt::LeftButton && (event->modifiers() & Qt::ShiftModifier));
  if (pan) {
    m_panning = true;
    m_panFrom = event->position();
    setCursor(Qt::ClosedHandCursor);
    event->accept();
    return;
  }
  if (event->button() == Qt::RightButton) {
    event->accept();  // reset on release, not Qt's zoom-out
    return;
  }
  if (event->button() == Qt::LeftButton && chart()->plotArea().contains(event->position())) {
    m_bandFrom = event->position().toPoint();
    m_band->setGeometry(QRect(m_bandFrom, QSize()));
    m_band->show();
    event->accept();
    return;
  }
  QChartView::mousePressEvent(event);
}

void ChartCanvas::mouseMoveEvent(QMouseEvent* event) {
  if (m_panning) {
    const QPointF d = event->position() - m_panFrom;
    m_panFrom = event->position();
    chart()->scroll(-d.x(), 0);
    event->accept();
    Q_EMIT viewChangedByUser(false);
  } else if (m_band->isVisible()) {
    // The span dragged across, over the plot's full height: x zoom.
    const QRectF plot = chart()->plotArea();
    const int x0 = std::min(m_bandFrom.x(), event->position().toPoint().x());
    const int x1 = std::max(m_bandFrom.x(), event->position().toPoint().x());
    m_band->setGeometry(QRect(QPoint(x0, static_cast<int>(plot.top())), QPoint(x1, static_cast<int>(plot.bottom()))));
  } else {
    QChartView::mouseMoveEvent(event);
  }
  showCrosshairAt(event->position());
}

void ChartCanvas::mouseReleaseEvent(QMouseEvent* event) {
  if (m_panning && (event->button() == Qt::MiddleButton || event->button() == Qt::LeftButton)) {
    m_panning = false;
    unsetCursor();
    event->accept();
    return;
  }
  if (event->button() == Qt::RightButton) {
    event->accept();
    Q_EMIT resetRequested();
    return;
  }
  if (m_band->isVisible() && event->button() == Qt::LeftButton) {
    m_band->hide();
    const QRectF band = QRectF(m_band->geometry()).intersected(chart()->plotArea());
    event->accept();
    if (band.width() < 4) return;  // a click, not a drag
    const QRectF plot = chart()->plotArea();
    chart()->zoomIn(QRectF(band.left(), plot.top(), band.width(), plot.height()));
    Q_EMIT viewChangedByUser(false);
    return;
  }
  QChartView::mouseReleaseEvent(event);
}

void ChartCanvas::mouseDoubleClickEvent(QMouseEvent* event) {
  event->accept();
  Q_EMIT resetRequested();
}

void ChartCanvas::keyPressEvent(QKeyEvent* event) {
  const QRectF plot = chart()->plotArea();
  const double dx = plot.width() * 0.1, dy = plot.height() * 0.1;
  bool yChosen = false;
  switch (event->key()) {
    case Qt::Key_Left:
      chart()->scroll(-dx, 0);
      break;
    case Qt::Key_Right:
      chart()->scroll(dx, 0);
      break;
    case Qt::Key_Up:
      chart()->scroll(0, dy);
      yChosen = true;
      break;
    case Qt::Key_Down:
      chart()->scroll(0, -dy);
      yChosen = true;
      break;
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      zoomAbout(plot.center(), 1.25, 1.0);
      break;
    case Qt::Key_Minus:
      zoomAbout(plot.center(), 0.8, 1.0);
      break;
    case Qt::Key_0:
    case Qt::Key_Home:
      Q_EMIT resetRequested();
      return;
    default:
      QChartView::keyPressEvent(event);
      return;
  }
  event->accept();
  Q_EMIT viewChangedByUser(yChosen);
}

void ChartCanvas::leaveEvent(QEvent* event) {
  hideCrosshair();
  Q_EMIT crosshairMoved(std::numeric_limits<double>::quiet_NaN());
  QChartView::leaveEvent(event);
}

}  // namespace latentlab::ui
