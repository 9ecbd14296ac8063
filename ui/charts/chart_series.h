// What the run chart draws from, outside the widget: a track is one stored
// metric of one run as read (a MetricSeries of the loaded window plus live
// rows, and the full-range read that maps visible x to steps and restores
// the view on reset); a curve is what is drawn from tracks (a track as it
// is, a difference of two, or a group's mean and band) with the Qt Charts
// series that hold it. ChartView owns both; see chart_view.h.
#pragma once

#include <QColor>
#include <QList>
#include <QPointF>
#include <QString>
#include <cstdint>
#include <vector>

#include "charts/compare_math.h"
#include "charts/metric_series.h"
#include "charts/range_refine.h"
#include "charts/smoothing.h"

class QAreaSeries;
class QLineSeries;

namespace latentlab::ui {

struct ChartTrack {
  qint64 runId = 0;
  QString metricName;
  QString runName;
  MetricSeries points;               // drawn: the loaded window + live rows
  std::vector<MetricPoint> pending;  // arrived, not yet drawn
  MetricSeries overview;             // full range
  LoadedWindow window;
  LoadedWindow overviewWindow;
  std::int64_t lastStep = -1;
  std::size_t appendedFrom = 0;  // points[appendedFrom..] arrived since the last redraw
  bool replaced = true;          // points were replaced since the last redraw
};

struct ChartCurve {
  QString label;
  QString legendLabel;  // the run (or pair) without the metric
  QString metricName;
  qint64 runId = 0;  // colour and legend toggle
  bool legendEntry = true;
  ChartTrack* source = nullptr;
  ChartTrack* minus = nullptr;       // set: difference source − minus
  std::vector<ChartTrack*> members;  // set: a group's mean (source is the first member)
  MetricSeries derived;
  std::vector<GroupPoint> group;  // a group's mean and min-max per x
  QColor colour;                  // set: drawn in it (a group), else its run's colour
  QLineSeries* raw = nullptr;
  QLineSeries* smoothed = nullptr;  // train curves only
  QAreaSeries* band = nullptr;      // a group's min-max band
  QList<QPointF> rawPoints;         // what the series hold
  QList<QPointF> smoothedPoints;
  ValueRange smoothedRange;  // of smoothedPoints' y, kept as they are added
  QList<QPointF> bandLo, bandHi;
  std::vector<CurvePoint> shown;  // what the bold line shows (crosshair)
  TensorBoardSmoother smoother{0.0};
  std::size_t drawnCount = 0;  // rows of data() already drawn
  bool isDerived() const { return minus != nullptr || !members.empty(); }
  const MetricSeries& data() const { return isDerived() ? derived : source->points; }
  // The stored tracks it is drawn from.
  std::vector<ChartTrack*> inputs() const {
    if (!members.empty()) return members;
    return minus != nullptr ? std::vector<ChartTrack*>{source, minus} : std::vector<ChartTrack*>{source};
  }
};

}  // namespace latentlab::ui
