// The run chart (the one adapter over Qt Charts): curves of any runs read from
// the run store, the same path for live and saved runs (a downsampled
// series() of a step window, then rowsSince(last step) on every job progress
// and on a 2 s timer), with a coalesced single-shot 40 ms redraw: at most 25
// repaints a second however fast points arrive. Curves mode overlays the
// runs; difference mode plots run − baseline and paired mode minuend −
// subtrahend (a preset's no-scale − scaled), both aligned by tokens with
// linear interpolation. Zoom and pan re-read the visible step window when the
// loaded buckets are too coarse (range_refine.h). chart_view.cpp holds the
// widget, data reads and controls; chart_curves.cpp the curves, legend,
// crosshair and export; chart_axes.cpp the axes: nice 1-2-5 ticks with SI
// suffixes, labelled log ticks (y drawn as log10 on a linear axis), y fitted
// to the visible data (outliers ignored: the 5th-95th percentile band), x
// spanning the data or a running run's planned steps, a zero line for
// differences. The legend is a ChartLegend under the plot.
#pragma once

#include <QColor>
#include <QHash>
#include <QList>
#include <QPointF>
#include <QSet>
#include <QTimer>
#include <QVector>
#include <QWidget>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "charts/axis_ticks.h"
#include "charts/chart_series.h"
#include "charts/compare_math.h"
#include "charts/range_refine.h"
#include "charts/smoothing.h"
#include "latentlab/run_store.h"

class QChart;
class QAreaSeries;
class QLineSeries;
class QCategoryAxis;
class QComboBox;
class QCheckBox;
class QLabel;
class QSlider;
class QPainter;
class QStackedLayout;

namespace latentlab::ui {

class ChartCanvas;
class ChartLegend;
class FlowLayout;

// A small row: an optional label, then one or two widgets (a toolbar group).
QWidget* labelled(const QString& label, QWidget* a, QWidget* b = nullptr);

struct ChartRun {
  qint64 id = 0;
  QString name;
};

enum class CompareMode { Curves, Difference, Paired };

class ChartView : public QWidget {
  Q_OBJECT
 public:
  using XAxis = ChartXAxis;

  // cell: a chart of a small-multiples grid (no bar, legend or poll timer of
  // its own; the chart that owns it drives it).
  explicit ChartView(std::shared_ptr<RunStore> store, QWidget* parent = nullptr, bool cell = false);
  ~ChartView() override;

  void setRuns(const QVector<ChartRun>& runs);
  QVector<ChartRun> runs() const { return m_runs; }
  // "loss" draws train/loss and val/loss; any other name (val/loss, lr, ...)
  // draws that metric alone.
  void setMetric(const QString& metric);
  void setXAxis(XAxis axis);
  void setLogY(bool on);
  // TensorBoard-style smoothing of train curves (the raw curve stays faint behind).
  void setSmoothing(double weight);
  double smoothing() const { return m_smoothing; }
  // y fits the 5th-95th percentile of the visible values instead of all of
  // them (on by default for losses, off for other metrics).
  void setIgnoreOutliers(bool on);
  bool ignoresOutliers() const { return m_ignoreOutliers; }
  bool logY() const { return m_logY; }
  QString metric() const { return m_metric; }
  XAxis xAxis() const { return m_xAxis; }

  // Compare modes. The baseline is a run id among the runs (0: the first);
  // pairs are preset labels (minuend, subtrahend) matched to the runs' names.
  void setCompareMode(CompareMode mode);
  void setBaseline(qint64 runId);
  void setPairLabels(const std::vector<std::pair<std::string, std::string>>& labels);
  CompareMode compareMode() const { return m_mode; }
  qint64 baseline() const;
  std::vector<RunPair> pairs() const;  // resolved against the current runs
  std::vector<std::string> unmatchedPairLabels() const;

  // Legend toggles: a hidden run's curves are not drawn, scaled to or listed.
  void setRunVisible(qint64 runId, bool visible);
  bool runVisible(qint64 runId) const { return !m_hidden.contains(runId); }
  // Curves mode: one mean curve with a min-max band per value of a config
  // field (a flattened spec path, e.g. "conversion.rope_strategy"); empty:
  // one curve per run. groupFields() lists the fields that differ among the runs.
  void setGroupBy(const QString& field);
  QString groupBy() const { return m_groupBy; }
  QStringList groupFields() const { return m_groupFields; }

  // Small multiples: a grid of linked charts, one per metric the runs have
  // (loss, validation loss, learning rate, gradient norm, tokens/s, then any
  // other the engine wrote), sharing the runs, x axis, smoothing, compare
  // mode, grouping and hidden runs with this chart, zoom and crosshair
  // linked, each fitting its own y. The bar and legend stay this chart's.
  void setGrid(bool on);
  bool grid() const { return m_grid; }
  std::vector<ChartView*> cells() const { return m_cells; }
  QStringList gridMetrics() const;

  // Only this run visible; when it already is the only one, all again.
  void soloRun(qint64 runId);
  // Draws a run's curves bold and dims the others (0: none).
  void highlightRun(qint64 runId);
  qint64 highlightedRun() const { return m_highlighted; }
  // Pens again from runColor (a run's colour changed).
  void updateColors();
  ChartLegend* legend() const { return m_legend; }
  // Puts an owner's control into the chart's (wrapping) bar of controls.
  void insertBarWidget(int index, QWidget* widget);
  // A line of text between the bar and the plot (a preset's caption).
  void insertCaption(QWidget* caption);

  // The axes as drawn: y in data units (log axis: the values, not their logs).
  std::pair<double, double> visibleY() const;
  QStringList xTickLabels() const;
  QStringList yTickLabels() const;
  std::vector<double> yTickValues() const;  // data units
  bool hasZeroLine() const;

  // The visible x range; setting it is what a zoom does (refines the data).
  std::pair<double, double> visibleX() const;
  void zoomToX(double x0, double x1);
  void resetView();  // the whole of every curve, following new points again
  bool followsData() const { return !m_userRange; }

  // Crosshair lines at x: the x, then "curve: value" of every visible curve.
  QStringList crosshairLines(double x) const;
  ChartCanvas* canvas() const { return m_view; }

  // The chart as drawn (plot and legend; PNG at `scale` times the widget's
  // pixels), and its data (run_id,run,metric,step,tokens,wall_time,value).
  bool exportPng(const QString& path, double scale = 2.0) const;
  QString defaultExportName() const;  // "<common run name words>-<metric>"
  // Where Export… first offers to save (the workspace); after a save, the
  // folder saved in is offered next (remembered across sessions).
  void setExportFolder(const QString& dir) { m_exportFolder = dir; }
  QString exportFolder() const;
  QString exportMessage() const;  // what the last export from the button said
  bool exportSvg(const QString& path) const;
  bool exportCsv(const QString& path) const;

  // Asks the store for rows newer than what each curve holds (one run or all).
  void pollStore(qint64 runId = 0);
  // Queues points for a curve; the next coalesced redraw draws them.
  void appendPoints(qint64 runId, const QString& metricName, const std::vector<MetricPoint>& points);

  // Draws what is queued now instead of at the next coalesced redraw.
  void redrawNow();
  int redrawCount() const { return m_redrawCount; }
  int windowReadCount() const { return m_windowReads; }  // reads made by zoom/pan
  // Points of a run's metric curve in curves mode (-1: no such curve), and
  // how many of them Qt Charts draws after thinning to the plot's columns.
  int pointCount(qint64 runId, const QString& metricName) const;
  int drawnPointCount(qint64 runId, const QString& metricName) const;
  int loadedRows(qint64 runId, const QString& metricName) const;  // rows held for it
  int seriesCount() const;                                        // curves drawn
  QStringList curveLabels() const;
  std::vector<MetricPoint> curveData(const QString& label) const;
  std::vector<GroupPoint> curveGroup(const QString& label) const;  // a group curve's mean and band

  static constexpr int kRedrawDelayMs = 40;
  static constexpr std::size_t kMaxPoints = 4000;  // per read of a curve's window

 Q_SIGNALS:
  void viewChanged();                       // zoom, pan, reset
  void colorChangeRequested(qint64 runId);  // the legend's context menu

 private:
  using Track = ChartTrack;
  using Curve = ChartCurve;

  // The constructor's steps: the plot and its navigation, the bar of
  // controls (chart_bar.cpp), the plot / placeholder / grid stack, the legend
  // and the redraw, poll and refine timers.
  void createCanvas();
  QWidget* buildBar();
  QWidget* buildPlotStack();
  void createLegend();
  void startTimers();
  void exportFromDialog();  // the Export… button: PNG, SVG or CSV, and the message beside it
  void rebuild();           // tracks (store reads) and curves
  void buildCurves();       // curves over the tracks for the mode
  void loadTrack(Track& t, std::int64_t stepMin, std::int64_t stepMax);
  void drawCurve(Curve& c, bool restart);
  void pushSeries(Curve& c);
  void scheduleRedraw();
  void redraw();
  // fit: the axes fit the visible curves exactly; else they only grow (x
  // with a quarter of headroom), so a live append lays out only its own
  // series instead of every series again.
  void rescale(bool fit = true);
  void applyAxes();
  void updateTicks();
  void updateZeroLine();
  void updateFaintSpan();
  // The x extent of the visible curves (a running run: out to its planned steps).
  bool dataXRange(double* x0, double* x1, bool* live) const;
  bool fitY(double x0, double x1, double* y0, double* y1) const;
  QSize exportSize() const;  // plot and legend
  void renderExport(QPainter& painter) const;
  bool logAxis() const { return m_logY && m_mode == CompareMode::Curves; }
  void applyPens();
  void refineVisible();
  void updateLegend();
  // Re-reads a run's status and planned steps; true when it just stopped running.
  bool readRunInfo(qint64 runId);
  QPointF toPoint(const MetricPoint& p) const;  // y as drawn: log10 on a log axis
  QStringList metricNames() const;
  Track* track(qint64 runId, const QString& metricName);
  const Curve* curve(const QString& label) const;

  std::shared_ptr<RunStore> m_store;
  QVector<ChartRun> m_runs;
  QString m_metric = QStringLiteral("loss");
  XAxis m_xAxis = XAxis::Step;
  bool m_logY = false;
  double m_smoothing = 0.6;
  CompareMode m_mode = CompareMode::Curves;
  qint64 m_baseline = 0;
  std::vector<std::pair<std::string, std::string>> m_pairLabels;
  QSet<qint64> m_hidden;
  bool m_userRange = false;
  std::optional<std::pair<double, double>> m_sharedX;  // a grid cell: the x span of the whole grid
  QString m_exportFolder;
  bool m_userY = false;  // the user chose y (Ctrl+wheel, up/down keys): no refit
  bool m_ignoreOutliers = true;
  bool m_ticking = false;
  qint64 m_highlighted = 0;
  QString m_exportMessage;
  bool m_fitNext = true;  // the next redraw fits the axes to the curves
  std::vector<std::unique_ptr<Track>> m_tracks;
  struct RunInfo {
    bool running = false;           // as of the last poll
    std::int64_t plannedSteps = 0;  // the spec's steps (0: unknown)
    QMap<QString, QString> spec;    // flattened (read once)
  };
  bool m_cell = false;
  bool m_grid = false;
  bool m_linking = false;  // a linked zoom in progress
  std::vector<ChartView*> m_cells;
  QWidget* m_gridHost = nullptr;
  QCheckBox* m_gridBox = nullptr;
  void rebuildCells();
  void syncCells();
  QWidget* plotWidget() const;  // what is drawn: the plot, or the grid
  QString m_groupBy;
  QStringList m_groupFields;
  QComboBox* m_groupBox = nullptr;
  void updateGroupFields();
  void updateMetricChoices();
  static constexpr int kFixedMetricChoices = 5;  // loss, validation loss, lr, grad norm, tokens/s
  QHash<qint64, RunInfo> m_runInfo;
  std::vector<std::unique_ptr<Curve>> m_curves;
  QTimer m_redrawTimer;
  QTimer m_pollTimer;
  QTimer m_refineTimer;
  QTimer m_thinTimer;
  double m_thinColumns = 0;  // the plot width curves were last thinned to
  int m_redrawCount = 0;
  int m_windowReads = 0;

  QChart* m_chart = nullptr;
  ChartCanvas* m_view = nullptr;
  QCategoryAxis* m_axisX = nullptr;
  QCategoryAxis* m_axisY = nullptr;
  QLineSeries* m_zero = nullptr;
  AxisTicks m_xTicks, m_yTicks;
  ChartLegend* m_legend = nullptr;
  QCheckBox* m_outlierBox = nullptr;
  QLabel* m_exportLabel = nullptr;
  QComboBox* m_metricBox = nullptr;
  QComboBox* m_xBox = nullptr;
  QCheckBox* m_logBox = nullptr;
  QSlider* m_smoothSlider = nullptr;
  QLabel* m_smoothLabel = nullptr;
  FlowLayout* m_bar = nullptr;
  QLabel* m_placeholder = nullptr;
  QStackedLayout* m_stack = nullptr;
};

}  // namespace latentlab::ui
