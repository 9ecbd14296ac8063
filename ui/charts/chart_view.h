// The comparison chart: curves of the selected runs read from the run store
// (initial downsampled series(), then rowsSince(last step) on every job
// progress and on a 2 s timer, so live and saved runs share one path), with
// a coalesced single-shot 40 ms redraw: at most 25 repaints a second however
// fast points arrive.
#pragma once

#include <QHash>
#include <QPair>
#include <QPointF>
#include <QTimer>
#include <QVector>
#include <QWidget>
#include <memory>
#include <vector>

#include "charts/smoothing.h"
#include "latentlab/run_store.h"

class QChart;
class QChartView;
class QLineSeries;
class QAbstractAxis;
class QComboBox;
class QCheckBox;
class QLabel;
class QSlider;
class QStackedLayout;

namespace latentlab::ui {

struct ChartRun {
  qint64 id = 0;
  QString name;
};

class ChartView : public QWidget {
  Q_OBJECT
public:
  enum class XAxis { Step, Tokens };

  explicit ChartView(std::shared_ptr<RunStore> store, QWidget* parent = nullptr);
  ~ChartView() override;

  void setRuns(const QVector<ChartRun>& runs);
  // "loss" draws train/loss and val/loss; any other name draws that metric.
  void setMetric(const QString& metric);
  void setXAxis(XAxis axis);
  void setLogY(bool on);
  // TensorBoard-style smoothing of train curves (the raw curve stays faint behind).
  void setSmoothing(double weight);
  double smoothing() const { return m_smoothing; }
  QString metric() const { return m_metric; }

  // The chart as drawn, and its data (run_id,run,metric,step,tokens,value).
  bool exportPng(const QString& path) const;
  bool exportSvg(const QString& path) const;
  bool exportCsv(const QString& path) const;

  // Asks the store for rows newer than what each curve holds (one run or all).
  void pollStore(qint64 runId = 0);
  // Queues points for a curve; the next coalesced redraw draws them.
  void appendPoints(qint64 runId, const QString& metricName, const std::vector<MetricPoint>& points);

  int redrawCount() const { return m_redrawCount; }
  int pointCount(qint64 runId, const QString& metricName) const;
  int seriesCount() const;
  static constexpr int kRedrawDelayMs = 40;

private:
  struct Track {
    qint64 runId = 0;
    QString metricName;
    QLineSeries* series = nullptr;
    QLineSeries* smoothed = nullptr;   // train curves only
    QString runName;
    std::vector<MetricPoint> points;   // drawn
    std::vector<MetricPoint> pending;  // arrived, not yet drawn
    std::int64_t lastStep = -1;
    TensorBoardSmoother smoother{0.0};  // state after smoothedCount points
    std::size_t smoothedCount = 0;
  };

  void rebuild();
  // Smooths the points not smoothed yet (all of them when `restart`).
  void updateSmoothed(Track& t, bool restart);
  void scheduleRedraw();
  void redraw();
  void rescale();
  void applyAxes();
  QPointF toPoint(const MetricPoint& p) const;
  QStringList metricNames() const;
  Track* track(qint64 runId, const QString& metricName);

  std::shared_ptr<RunStore> m_store;
  QVector<ChartRun> m_runs;
  QString m_metric = QStringLiteral("loss");
  XAxis m_xAxis = XAxis::Step;
  bool m_logY = false;
  double m_smoothing = 0.6;
  std::vector<std::unique_ptr<Track>> m_tracks;
  QTimer m_redrawTimer;
  QTimer m_pollTimer;
  int m_redrawCount = 0;

  QChart* m_chart = nullptr;
  QChartView* m_view = nullptr;
  QAbstractAxis* m_axisX = nullptr;
  QAbstractAxis* m_axisY = nullptr;
  QComboBox* m_metricBox = nullptr;
  QComboBox* m_xBox = nullptr;
  QCheckBox* m_logBox = nullptr;
  QSlider* m_smoothSlider = nullptr;
  QLabel* m_smoothLabel = nullptr;
  QLabel* m_placeholder = nullptr;
  QStackedLayout* m_stack = nullptr;
};

} // namespace latentlab::ui
