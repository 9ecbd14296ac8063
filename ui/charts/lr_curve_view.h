// A small plot of the learning-rate schedule (learningRateAt over the run).
#pragma once

#include <QWidget>

#include <vector>

#include "latentlab/run_spec.h"

class QChart;
class QLineSeries;
class QValueAxis;

namespace latentlab::ui {

class LrCurveView : public QWidget {
  Q_OBJECT
 public:
  explicit LrCurveView(QWidget* parent = nullptr);
  void setSchedule(const OptimizerSpec& opt, const ScheduleSpec& sched, int steps);
  int pointCount() const;
  // The tick values the axes draw (nice 1-2-5 steps from 0, as the run chart's).
  std::vector<double> xTicks() const;
  std::vector<double> yTicks() const;

 private:
  QChart* m_chart = nullptr;
  QLineSeries* m_series = nullptr;
  QValueAxis* m_x = nullptr;
  QValueAxis* m_y = nullptr;
};

}  // namespace latentlab::ui
