// The run chart's widget, controls and store reads; see chart_view.h.
#include "charts/chart_view.h"

#include <QCategoryAxis>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalBlocker>
#include <QSlider>
#include <QStackedLayout>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <limits>

#include "charts/chart_canvas.h"
#include "charts/chart_legend.h"
#include "charts/flow_layout.h"
#include "latentlab/error.h"
#include "models/spec_diff.h"

namespace latentlab::ui {

ChartView::ChartView(std::shared_ptr<RunStore> store, QWidget* parent, bool cell)
    : QWidget(parent), m_store(std::move(store)), m_cell(cell) {
  createCanvas();
  QWidget* barHost = buildBar();
  QWidget* stackHost = buildPlotStack();
  createLegend();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(barHost);
  layout->addWidget(stackHost, 1);
  layout->addWidget(m_legend);
  if (m_cell) {
    barHost->hide();
    m_legend->hide();
    // A cell takes the room the grid gives it and never widens the window.
    m_view->setMinimumSize(100, 80);
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Ignored);
  }
  startTimers();
  applyAxes();
}

void ChartView::createCanvas() {
  m_chart = new QChart;
  m_chart->setMargins(QMargins(6, 6, 6, 6));
  m_chart->legend()->hide();  // the ChartLegend under the plot instead
  m_chart->setAnimationOptions(QChart::NoAnimation);
  m_view = new ChartCanvas(m_chart);
  m_view->setRenderHint(QPainter::Antialiasing);
  m_view->setCrosshairText([this](double x) { return crosshairLines(x); });
  connect(m_view, &ChartCanvas::viewChangedByUser, this, [this](bool yChosen) {
    m_userRange = true;
    m_userY = m_userY || yChosen;
    if (!m_userY) rescale();  // y refits to what is visible now
    m_refineTimer.start();
    Q_EMIT viewChanged();
  });
  connect(m_view, &ChartCanvas::resetRequested, this, &ChartView::resetView);
  // A wider or narrower plot: thin the curves to its new column count.
  m_thinTimer.setSingleShot(true);
  m_thinTimer.setInterval(0);
  connect(&m_thinTimer, &QTimer::timeout, this, [this] {
    for (auto& c : m_curves) pushSeries(*c);
  });
  connect(m_chart, &QChart::plotAreaChanged, this, [this](const QRectF& area) {
    updateTicks();  // as many ticks as the new size has room for
    if (std::abs(area.width() - m_thinColumns) >= 1 && area.width() > 200) m_thinTimer.start();
  });
}

QWidget* ChartView::buildPlotStack() {
  m_placeholder = new QLabel(tr("Select one or more runs on the left to compare their curves."));
  m_placeholder->setAlignment(Qt::AlignCenter);
  m_placeholder->setStyleSheet(QStringLiteral("color: palette(mid); font-size: 11pt;"));
  auto* stackHost = new QWidget;
  m_stack = new QStackedLayout(stackHost);
  m_stack->addWidget(m_placeholder);
  m_stack->addWidget(m_view);
  m_gridHost = new QWidget;
  m_stack->addWidget(m_gridHost);
  return stackHost;
}

void ChartView::createLegend() {
  m_legend = new ChartLegend;
  connect(m_legend, &ChartLegend::toggled, this, [this](qint64 run) { setRunVisible(run, !runVisible(run)); });
  connect(m_legend, &ChartLegend::soloed, this, &ChartView::soloRun);
  connect(m_legend, &ChartLegend::hovered, this, &ChartView::highlightRun);
  connect(m_legend, &ChartLegend::colorMenuRequested, this, &ChartView::colorChangeRequested);
}

void ChartView::startTimers() {
  m_redrawTimer.setSingleShot(true);
  m_redrawTimer.setInterval(kRedrawDelayMs);
  connect(&m_redrawTimer, &QTimer::timeout, this, &ChartView::redraw);
  m_pollTimer.setInterval(2000);
  connect(&m_pollTimer, &QTimer::timeout, this, [this] { pollStore(); });
  if (!m_cell) m_pollTimer.start();  // a grid's cells are polled by their owner
  m_refineTimer.setSingleShot(true);
  m_refineTimer.setInterval(120);  // one read after a burst of wheel steps
  connect(&m_refineTimer, &QTimer::timeout, this, &ChartView::refineVisible);
}

ChartView::~ChartView() = default;

void ChartView::insertBarWidget(int index, QWidget* widget) {
  m_bar->insertWidget(index, widget);
}

void ChartView::insertCaption(QWidget* caption) {
  static_cast<QVBoxLayout*>(layout())->insertWidget(1, caption);
}

QWidget* labelled(const QString& label, QWidget* a, QWidget* b) {
  auto* host = new QWidget;
  auto* row = new QHBoxLayout(host);
  row->setContentsMargins(0, 0, 0, 0);
  row->setSpacing(6);
  if (!label.isEmpty()) row->addWidget(new QLabel(label));
  row->addWidget(a);
  if (b != nullptr) row->addWidget(b);
  return host;
}

QStringList ChartView::metricNames() const {
  if (m_metric == QLatin1String("loss")) return {QStringLiteral("train/loss"), QStringLiteral("val/loss")};
  return {m_metric};
}

void ChartView::setRuns(const QVector<ChartRun>& runs) {
  bool same = runs.size() == m_runs.size();
  for (int i = 0; same && i < runs.size(); ++i) same = runs[i].id == m_runs[i].id && runs[i].name == m_runs[i].name;
  if (same) return;
  m_runs = runs;
  rebuild();
  if (m_grid) rebuildCells();  // the runs may have other metrics
}

void ChartView::setMetric(const QString& metric) {
  if (metric == m_metric) return;
  m_metric = metric;
  // Losses have early spikes worth ignoring; a schedule or a speed does not.
  const bool loss = metric == QLatin1String("loss") || metric.endsWith(QLatin1String("/loss"));
  m_ignoreOutliers = loss;
  m_outlierBox->setChecked(loss);
  const int i = m_metricBox->findData(metric);
  if (i >= 0 && i != m_metricBox->currentIndex()) m_metricBox->setCurrentIndex(i);
  rebuild();
}

void ChartView::setXAxis(XAxis axis) {
  if (axis == m_xAxis) return;
  m_xAxis = axis;
  const int i = axis == XAxis::Tokens ? 1 : axis == XAxis::WallTime ? 2 : 0;
  if (m_xBox->currentIndex() != i) m_xBox->setCurrentIndex(i);
  m_userRange = false;
  for (auto& c : m_curves) drawCurve(*c, /*restart=*/true);
  applyAxes();
  rescale();
  syncCells();
}

void ChartView::setLogY(bool on) {
  if (on == m_logY) return;
  m_logY = on;
  m_logBox->setChecked(on);
  m_userRange = false;
  m_userY = false;
  applyAxes();
  for (auto& c : m_curves) drawCurve(*c, /*restart=*/true);  // y drawn as log10 or not
  rescale();
  syncCells();
}

void ChartView::setIgnoreOutliers(bool on) {
  if (on == m_ignoreOutliers) return;
  m_ignoreOutliers = on;
  m_outlierBox->setChecked(on);
  if (!m_userY) rescale(true);
}

void ChartView::setSmoothing(double weight) {
  weight = std::clamp(weight, 0.0, 0.99);
  if (weight == m_smoothing) return;
  m_smoothing = weight;
  const int v = static_cast<int>(std::lround(weight * 100));
  if (m_smoothSlider->value() != v) m_smoothSlider->setValue(v);
  m_smoothLabel->setText(QString::number(weight, 'f', 2));
  for (auto& c : m_curves) drawCurve(*c, /*restart=*/true);
  if (!m_userY) rescale(true);  // the fit follows the smoothed curves as drawn
  syncCells();
}

void ChartView::updateMetricChoices() {
  // The fixed choices, then every other metric the runs have (eval/<task>/acc, ...).
  static const QStringList kListed = {QStringLiteral("train/loss"), QStringLiteral("val/loss"), QStringLiteral("lr"),
                                      QStringLiteral("grad_norm"), QStringLiteral("tokens_per_s")};
  const QSignalBlocker block(m_metricBox);
  while (m_metricBox->count() > kFixedMetricChoices) m_metricBox->removeItem(m_metricBox->count() - 1);
  QStringList extra;
  for (const QString& m : gridMetrics()) {
    if (!kListed.contains(m)) extra << m;
  }
  if (m_metricBox->findData(m_metric) < 0 && !extra.contains(m_metric)) extra << m_metric;  // the one shown stays
  // A distilled run's parts by what they are; any other metric by its name.
  const auto label = [](const QString& m) {
    if (m == QLatin1String("loss/kd")) return tr("Distillation: KL to the teacher");
    if (m == QLatin1String("loss/ce")) return tr("Distillation: next-token loss");
    if (m == QLatin1String("loss/total")) return tr("Distillation: objective");
    return m;
  };
  for (const QString& m : extra) m_metricBox->addItem(label(m), m);
  m_metricBox->setCurrentIndex(std::max(0, m_metricBox->findData(m_metric)));
}

void ChartView::updateGroupFields() {
  QVector<QMap<QString, QString>> specs;
  for (const ChartRun& r : m_runs) specs.push_back(m_runInfo.value(r.id).spec);
  m_groupFields = m_runs.size() > 1 ? differingFields(specs, {QStringLiteral("name")}) : QStringList{};
  if (!m_groupFields.contains(m_groupBy)) m_groupBy.clear();
  const QSignalBlocker block(m_groupBox);
  m_groupBox->clear();
  m_groupBox->addItem(tr("none"), QString());
  for (const QString& f : m_groupFields) m_groupBox->addItem(f, f);
  m_groupBox->setCurrentIndex(std::max(0, m_groupBox->findData(m_groupBy)));
  m_groupBox->setEnabled(!m_groupFields.isEmpty() && m_mode == CompareMode::Curves);
}

void ChartView::setGroupBy(const QString& field) {
  const QString f = m_groupFields.contains(field) ? field : QString();
  if (f == m_groupBy) return;
  m_groupBy = f;
  const QSignalBlocker block(m_groupBox);
  m_groupBox->setCurrentIndex(std::max(0, m_groupBox->findData(f)));
  m_hidden.clear();
  buildCurves();
  syncCells();
}

void ChartView::setCompareMode(CompareMode mode) {
  if (mode == m_mode) return;
  m_mode = mode;
  m_userY = false;
  m_groupBox->setEnabled(!m_groupFields.isEmpty() && m_mode == CompareMode::Curves);
  buildCurves();
  if (m_logY) {
    for (auto& c : m_curves) drawCurve(*c, /*restart=*/true);
    rescale();
  }
  syncCells();
}

void ChartView::setBaseline(qint64 runId) {
  if (runId == m_baseline) return;
  m_baseline = runId;
  if (m_mode == CompareMode::Difference) buildCurves();
  syncCells();
}

qint64 ChartView::baseline() const {
  for (const ChartRun& r : m_runs) {
    if (r.id == m_baseline) return r.id;
  }
  return m_runs.isEmpty() ? 0 : m_runs.front().id;
}

void ChartView::setPairLabels(const std::vector<std::pair<std::string, std::string>>& labels) {
  m_pairLabels = labels;
  if (m_mode == CompareMode::Paired) buildCurves();
  syncCells();
}

std::vector<RunPair> ChartView::pairs() const {
  std::vector<NamedRun> named;
  for (const ChartRun& r : m_runs) named.push_back({r.id, r.name.toStdString()});
  return matchPairs(named, m_pairLabels);
}

std::vector<std::string> ChartView::unmatchedPairLabels() const {
  std::vector<NamedRun> named;
  for (const ChartRun& r : m_runs) named.push_back({r.id, r.name.toStdString()});
  std::vector<std::string> out;
  matchPairs(named, m_pairLabels, &out);
  return out;
}

void ChartView::setRunVisible(qint64 runId, bool visible) {
  if (visible == runVisible(runId)) return;
  if (visible)
    m_hidden.remove(runId);
  else
    m_hidden.insert(runId);
  updateLegend();
  if (!m_userY) rescale(true);
  syncCells();
}

void ChartView::zoomToX(double x0, double x1) {
  if (!(x1 > x0)) return;
  m_userRange = true;
  m_axisX->setRange(x0, x1);
  refineVisible();
  rescale();
  Q_EMIT viewChanged();
}

void ChartView::resetView() {
  m_refineTimer.stop();
  for (auto& t : m_tracks) {
    if (t->window.stepMin == t->overviewWindow.stepMin && t->window.stepMax == t->overviewWindow.stepMax) continue;
    t->points = t->overview;
    t->window = t->overviewWindow;
    t->replaced = true;
  }
  m_userRange = false;
  m_userY = false;
  m_fitNext = true;
  redraw();
  for (auto& c : m_curves) pushSeries(*c);  // thinned for the whole extent again
  if (m_grid && !m_linking) {
    for (ChartView* c : m_cells) c->resetView();
  }
  Q_EMIT viewChanged();
}

QPointF ChartView::toPoint(const MetricPoint& p) const {
  if (!logAxis()) return {xOf(p, m_xAxis), p.value};
  return {xOf(p, m_xAxis), p.value > 0 ? std::log10(p.value) : std::numeric_limits<double>::quiet_NaN()};
}

}  // namespace latentlab::ui
