// The passkey grid as a heatmap: prompt lengths across, key depths down, each
// cell coloured by the share of keys repeated exactly (red 0%, yellow 50%,
// green 100%) and labelled with it.
#pragma once

#include <QColor>
#include <QRect>
#include <QVector>
#include <QWidget>

namespace latentlab::ui {

struct PasskeyCellView {
  int length = 0;
  double depth = 0;
  double share = 0;  // 0..1
  int trials = 0;
};

class PasskeyHeatmap : public QWidget {
  Q_OBJECT
 public:
  explicit PasskeyHeatmap(QWidget* parent = nullptr);
  void setCells(QVector<PasskeyCellView> cells);
  // What the grid was scored over, said in the title ("int4 cache"; empty: the plain cache).
  void setCacheLabel(const QString& label);
  QString title() const;
  const QVector<PasskeyCellView>& cells() const { return m_cells; }
  QVector<int> lengths() const;
  QVector<double> depths() const;
  // Where a cell is drawn (empty when the grid has no such cell).
  QRect cellRect(int length, double depth) const;
  static QColor colorOf(double share);
  QSize sizeHint() const override { return {360, 220}; }
  QSize minimumSizeHint() const override { return {240, 150}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QRect gridArea() const;
  QVector<PasskeyCellView> m_cells;
  QString m_cacheLabel;
};

}  // namespace latentlab::ui
