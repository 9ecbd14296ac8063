// LR schedule preview.
#include "charts/lr_curve_view.h"

#include <QChart>
#include <QLineSeries>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "charts/axis_ticks.h"
#include "charts/small_chart.h"

namespace latentlab::ui {

LrCurveView::LrCurveView(QWidget* parent) : QWidget(parent) {
  m_chart = new QChart;
  m_chart->legend()->hide();
  m_chart->setMargins(QMargins(0, 0, 0, 0));
  m_chart->setBackgroundRoundness(0);
  m_series = new QLineSeries;
  m_series->setPen(QPen(QColor(0x1f77b4), 1.8));
  m_chart->addSeries(m_series);
  m_x = new QValueAxis;
  m_y = new QValueAxis;
  // Ticks at the run chart's nice steps from 0 (not the range cut in equal parts).
  m_x->setLabelFormat(QStringLiteral("%d"));
  m_y->setLabelFormat(QStringLiteral("%g"));
  for (QValueAxis* a : {m_x, m_y}) {
    a->setTickType(QValueAxis::TicksDynamic);
    a->setTickAnchor(0);
  }
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.8);
  m_x->setLabelsFont(small);
  m_y->setLabelsFont(small);
  embedChart(this, m_chart, m_series, m_x, m_y, 130);
}

void LrCurveView::setSchedule(const OptimizerSpec& opt, const ScheduleSpec& sched, int steps) {
  const int total = std::max(1, steps);
  const int samples = std::min(total, 200);
  QList<QPointF> pts;
  double top = 0;
  for (int i = 0; i <= samples; ++i) {
    const int step =
        std::min(total - 1, static_cast<int>(static_cast<long long>(i) * (total - 1) / std::max(1, samples)));
    const double lr = learningRateAt(opt, sched, step, total);
    top = std::max(top, lr);
    pts.push_back(QPointF(step, lr));
  }
  m_series->replace(pts);
  m_x->setRange(0, std::max(1, total - 1));
  m_y->setRange(0, top > 0 ? top * 1.08 : 1e-3);
  m_x->setTickInterval(std::max(1.0, niceStep(m_x->min(), m_x->max(), 5)));
  m_y->setTickInterval(niceStep(m_y->min(), m_y->max(), 4));
}

namespace {
std::vector<double> ticksOf(const QValueAxis* a) {
  std::vector<double> out;
  const double step = a->tickInterval();
  if (!(step > 0)) return out;
  for (double v = std::ceil((a->min() - a->tickAnchor()) / step) * step + a->tickAnchor(); v <= a->max() + 1e-12 * step;
       v += step)
    out.push_back(v);
  return out;
}
}  // namespace

std::vector<double> LrCurveView::xTicks() const {
  return ticksOf(m_x);
}
std::vector<double> LrCurveView::yTicks() const {
  return ticksOf(m_y);
}

int LrCurveView::pointCount() const {
  return static_cast<int>(m_series->count());
}

}  // namespace latentlab::ui
