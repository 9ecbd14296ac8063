// The run chart's legend: one entry per run (colour swatch and name, elided
// to fit with the full name as tooltip), laid out in wrapping rows under the
// plot. Click hides or shows the run, double click solos it (again: all
// back), hovering highlights its curves, the context menu offers the run's
// colour. The widget only reports; the chart decides what those mean.
#pragma once

#include <QColor>
#include <QString>
#include <QVector>
#include <QWidget>

namespace latentlab::ui {

class ChartLegend : public QWidget {
  Q_OBJECT
 public:
  struct Entry {
    qint64 runId = 0;
    QString label;     // as drawn (may be elided further to fit)
    QString fullName;  // tooltip
    QColor color;
    bool visible = true;
  };

  explicit ChartLegend(QWidget* parent = nullptr);

  void setEntries(const QVector<Entry>& entries);
  QVector<Entry> entries() const { return m_entries; }
  // A note after the entries ("dashed: validation").
  void setNote(const QString& note);
  // Where the entry of a run is drawn (empty when none): for tests and tools.
  QRect entryRect(qint64 runId) const;

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

  // Paints the legend into a painter at `width` (chart export).
  void renderAt(QPainter& painter, const QPoint& origin, int width) const;

 Q_SIGNALS:
  void toggled(qint64 runId);
  void soloed(qint64 runId);
  void hovered(qint64 runId);  // 0: none
  void colorMenuRequested(qint64 runId);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;
  void contextMenuEvent(QContextMenuEvent* event) override;
  bool event(QEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  struct Placed {
    QRect rect;
    QString text;  // elided
  };
  QVector<Placed> layoutFor(int width, QRect* noteRect = nullptr) const;
  void paintInto(QPainter& p, const QVector<Placed>& placed, const QRect& noteRect) const;
  int entryAt(const QPoint& pos) const;

  QVector<Entry> m_entries;
  QString m_note;
  QVector<Placed> m_placed;
  QRect m_noteRect;
  qint64 m_hovered = 0;
  int m_pressed = -1;
  // The entry the last click toggled and when (ms since epoch): the first
  // click of a double click, undone by the double click.
  qint64 m_lastToggled = 0;
  qint64 m_lastToggledAt = 0;
};

}  // namespace latentlab::ui
