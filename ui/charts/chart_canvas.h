// The drawing surface of the run chart: a QChartView with the navigation
// users know from TensorBoard and W&B. Left drag across the plot zooms x to
// the dragged span; the wheel zooms x about the cursor (Ctrl: y instead);
// middle drag or Shift+left drag pans x; left/right keys pan x, up/down pan
// y, +/- zoom x; double click or right click resets. Every change the user
// makes is reported once by viewChangedByUser (yChosen: the user set y, so
// the owner stops fitting it); a crosshair follows the mouse with a label
// whose text the owner supplies for the x under it. Presses outside the plot
// are left to the chart.
#pragma once

#include <QChartView>
#include <functional>

class QGraphicsLineItem;
class QGraphicsRectItem;
class QGraphicsSimpleTextItem;
class QRubberBand;

namespace latentlab::ui {

class ChartCanvas : public QChartView {
  Q_OBJECT
 public:
  explicit ChartCanvas(QChart* chart, QWidget* parent = nullptr);

  // Lines of the crosshair label for a chart x (empty: no label).
  void setCrosshairText(std::function<QStringList(double x)> text) { m_text = std::move(text); }
  // Shows the crosshair at a scene position (what a mouse move does) and
  // reports its x by crosshairMoved.
  void showCrosshairAt(const QPointF& scenePos);
  // Shows its line at a chart x without reporting it (a linked chart's crosshair).
  void showCrosshairAtX(double x);
  void hideCrosshair();
  bool crosshairVisible() const;
  QStringList crosshairLines() const { return m_lines; }

  // Shades the x span [x0, x1] of the plot faintly (a running run's steps
  // still to come); an empty span (x1 <= x0) shows nothing.
  void setFaintSpan(double x0, double x1);
  bool faintSpanVisible() const;

  // Zooms about a point of the plot (scene coordinates) by `factor` (> 1 in).
  void zoomAbout(const QPointF& scenePos, double factorX, double factorY);

 Q_SIGNALS:
  void viewChangedByUser(bool yChosen);
  void crosshairMoved(double x);  // NaN: the mouse left the plot
  void resetRequested();

 protected:
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  bool drawCrosshair(const QPointF& scenePos);  // false: outside the plot (hidden)

  std::function<QStringList(double)> m_text;
  QStringList m_lines;
  QGraphicsLineItem* m_line = nullptr;
  QGraphicsRectItem* m_box = nullptr;
  QGraphicsSimpleTextItem* m_label = nullptr;
  QGraphicsRectItem* m_span = nullptr;
  bool m_panning = false;
  QRubberBand* m_band = nullptr;
  QPoint m_bandFrom;
  QPointF m_panFrom;
};

}  // namespace latentlab::ui
