// The run chart's axes: ticks, fitting and the zero line; see chart_view.h.
#include <QAreaSeries>
#include <QCategoryAxis>
#include <QChart>
#include <QFontMetricsF>
#include <QLineSeries>
#include <algorithm>
#include <cmath>
#include <limits>

#include "charts/chart_canvas.h"
#include "charts/chart_view.h"

namespace latentlab::ui {

namespace {

QString metricTitle(const QString& metric) {
  if (metric == QLatin1String("loss")) return ChartView::tr("loss");
  if (metric == QLatin1String("val/loss")) return ChartView::tr("validation loss");
  if (metric == QLatin1String("train/loss")) return ChartView::tr("train loss");
  if (metric == QLatin1String("lr")) return ChartView::tr("learning rate");
  if (metric == QLatin1String("grad_norm")) return ChartView::tr("gradient norm");
  if (metric == QLatin1String("tokens_per_s")) return ChartView::tr("tokens / s");
  if (metric == QLatin1String("loss/kd")) return ChartView::tr("KL to the teacher");
  if (metric == QLatin1String("loss/ce")) return ChartView::tr("next-token loss");
  if (metric == QLatin1String("loss/total")) return ChartView::tr("distillation objective");
  return metric;
}

void setCategories(QCategoryAxis* axis, const AxisTicks& ticks) {
  const QStringList old = axis->categoriesLabels();
  bool same = old.size() == static_cast<qsizetype>(ticks.labels.size());
  for (qsizetype i = 0; same && i < old.size(); ++i) {
    same = old[i] == QString::fromStdString(ticks.labels[static_cast<std::size_t>(i)]) &&
           axis->endValue(old[i]) == ticks.values[static_cast<std::size_t>(i)];
  }
  if (same && axis->startValue() <= axis->min()) return;
  for (const QString& label : old) axis->remove(label);
  axis->setStartValue(ticks.values.empty() ? axis->min() : std::min(axis->min(), ticks.values.front()));
  for (std::size_t i = 0; i < ticks.values.size(); ++i)
    axis->append(QString::fromStdString(ticks.labels[i]), ticks.values[i]);
}

QCategoryAxis* newAxis(const QString& title) {
  auto* axis = new QCategoryAxis;
  axis->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  axis->setTitleText(title);
  axis->setGridLineColor(QColor(225, 225, 225));  // opaque: blending a grid costs a software paint dearly
  return axis;
}

}  // namespace

void ChartView::applyAxes() {
  double x0 = 0, x1 = 100;
  if (m_axisX != nullptr) std::tie(x0, x1) = visibleX();
  if (m_axisX != nullptr) m_chart->removeAxis(m_axisX);
  if (m_axisY != nullptr) m_chart->removeAxis(m_axisY);
  delete m_axisX;
  delete m_axisY;
  m_axisX = newAxis(m_xAxis == XAxis::Tokens     ? tr("tokens")
                    : m_xAxis == XAxis::WallTime ? tr("wall time (s)")
                                                 : tr("step"));
  QString yTitle = metricTitle(m_metric);
  if (m_mode == CompareMode::Difference) yTitle = tr("\u0394 %1 (run \u2212 baseline)").arg(yTitle);
  if (m_mode == CompareMode::Paired) yTitle = tr("\u0394 %1 (within pair)").arg(yTitle);
  if (logAxis()) yTitle += tr(" (log)");
  m_axisY = newAxis(yTitle);
  m_axisX->setRange(x0, x1);
  m_axisY->setRange(logAxis() ? -1 : 0, logAxis() ? 1 : 1);
  if (m_cell) {
    // Small multiples: the metric as the chart's title, no axis titles (the
    // x axis is the grid's, named in the bar), smaller tick labels: a small
    // plot keeps its ticks readable.
    for (QCategoryAxis* axis : {m_axisX, m_axisY}) {
      QFont labels = axis->labelsFont();
      labels.setPointSizeF(labels.pointSizeF() * 0.8);
      axis->setLabelsFont(labels);
      axis->setTitleVisible(false);
    }
    // The cell's title at the widget's own size (the chart's default title
    // font, scaled down, was about 6 px).
    QFont title = font();
    title.setBold(true);
    m_chart->setTitleFont(title);
    m_chart->setTitle(yTitle);
    m_chart->setMargins(QMargins(2, 0, 2, 0));
  }
  m_chart->addAxis(m_axisX, Qt::AlignBottom);
  m_chart->addAxis(m_axisY, Qt::AlignLeft);
  for (auto& c : m_curves) {
    for (QAbstractSeries* s : {static_cast<QAbstractSeries*>(c->raw), static_cast<QAbstractSeries*>(c->smoothed),
                               static_cast<QAbstractSeries*>(c->band)}) {
      if (s == nullptr) continue;
      s->attachAxis(m_axisX);
      s->attachAxis(m_axisY);
    }
  }
  if (m_zero != nullptr) {
    m_zero->attachAxis(m_axisX);
    m_zero->attachAxis(m_axisY);
  }
  connect(m_axisX, &QValueAxis::rangeChanged, this, &ChartView::updateTicks);
  connect(m_axisY, &QValueAxis::rangeChanged, this, &ChartView::updateTicks);
  updateTicks();
}

void ChartView::updateTicks() {
  if (m_ticking || m_axisX == nullptr || m_axisY == nullptr) return;
  m_ticking = true;
  // Room for a label every 90 px across and every two and a half label
  // heights up (labels closer than that are cut to "...").
  const QRectF plot = m_chart->plotArea();
  const double labelHeight = QFontMetricsF(m_axisY->labelsFont()).height();
  const int nx = plot.width() > 50 ? std::clamp(static_cast<int>(plot.width() / 90), 2, 10) : 6;
  // A small multiple's cell is short: its smaller labels go closer (one and a
  // half label heights), and it keeps at least four candidate ticks, so that
  // a cell reads as a scale, not a single number.
  const double spacing = m_cell ? 1.5 : 2.5;
  const int fewest = m_cell ? 4 : 2;
  const int ny =
      plot.height() > 30 ? std::clamp(static_cast<int>(plot.height() / (spacing * labelHeight)), fewest, 10) : 6;
  m_xTicks = niceTicks(m_axisX->min(), m_axisX->max(), nx, TickStyle::Count);
  const TickStyle yStyle = m_metric == QLatin1String("tokens_per_s") ? TickStyle::Count : TickStyle::Plain;
  m_yTicks =
      logAxis() ? logTicks(m_axisY->min(), m_axisY->max(), ny) : niceTicks(m_axisY->min(), m_axisY->max(), ny, yStyle);
  setCategories(m_axisX, m_xTicks);
  setCategories(m_axisY, m_yTicks);
  updateZeroLine();
  updateFaintSpan();
  m_ticking = false;
}

void ChartView::updateFaintSpan() {
  // The steps a running run has still to go, shaded faintly.
  double x0 = 0, x1 = 0, dataEnd = -std::numeric_limits<double>::infinity();
  bool live = false;
  if (dataXRange(&x0, &x1, &live) && live) {
    for (const auto& c : m_curves) {
      if (runVisible(c->runId) && !c->data().empty()) dataEnd = std::max(dataEnd, xOf(c->data().back(), m_xAxis));
    }
  }
  m_view->setFaintSpan(live ? dataEnd : 0, live ? x1 : 0);
}

void ChartView::updateZeroLine() {
  if (m_zero == nullptr || m_axisX == nullptr) return;
  m_zero->replace(QList<QPointF>{{m_axisX->min(), 0.0}, {m_axisX->max(), 0.0}});
}

bool ChartView::hasZeroLine() const {
  return m_zero != nullptr && m_zero->count() == 2;
}

bool ChartView::dataXRange(double* x0, double* x1, bool* live) const {
  *x0 = std::numeric_limits<double>::infinity();
  *x1 = -*x0;
  *live = false;
  for (const auto& c : m_curves) {
    if (!runVisible(c->runId)) continue;
    const auto& data = c->data();
    if (data.empty()) continue;
    *x0 = std::min(*x0, xOf(data.front(), m_xAxis));
    *x1 = std::max(*x1, xOf(data.back(), m_xAxis));
    for (const Track* t : c->inputs()) {
      const RunInfo info = m_runInfo.value(t->runId);
      if (!info.running) continue;
      *live = true;
      if (info.plannedSteps <= 0 || t->points.empty()) continue;
      const auto planned = static_cast<double>(info.plannedSteps);
      const MetricPoint& last = t->points.back();
      if (m_xAxis == XAxis::Step) *x1 = std::max(*x1, planned);
      if (m_xAxis == XAxis::Tokens && last.step > 0) {
        *x1 = std::max(*x1, static_cast<double>(last.tokens) / static_cast<double>(last.step) * planned);
      }
    }
  }
  // A grid cell spans what every cell of the grid spans (a validation cell
  // starts where the training cells start, so the columns line up).
  if (m_sharedX && std::isfinite(*x0)) {
    *x0 = std::min(*x0, m_sharedX->first);
    *x1 = std::max(*x1, m_sharedX->second);
  }
  return std::isfinite(*x0);
}

namespace {

// [first, last) of the points with x in [x0, x1], on points in x order.
std::pair<qsizetype, qsizetype> slice(const QList<QPointF>& points, double x0, double x1) {
  const auto lo =
      std::lower_bound(points.begin(), points.end(), x0, [](const QPointF& q, double x) { return q.x() < x; });
  const auto hi = std::upper_bound(lo, points.end(), x1, [](double x, const QPointF& q) { return x < q.x(); });
  return {lo - points.begin(), hi - points.begin()};
}

void pushRange(const ValueRange& r, bool log, std::vector<double>& into) {
  if (r.empty()) return;
  into.push_back(log ? std::log10(r.lo) : r.lo);
  into.push_back(log ? std::log10(r.hi) : r.hi);
}

}  // namespace

bool ChartView::fitY(double x0, double x1, double* y0, double* y1) const {
  // Validation points are few and each one matters: never outliers.
  std::vector<double> values, keep, drawn;
  const bool log = logAxis();
  for (const auto& c : m_curves) {
    if (!runVisible(c->runId)) continue;
    const bool kept = c->metricName == QLatin1String("val/loss") && m_metric == QLatin1String("loss");
    std::vector<double>& into = kept ? keep : values;
    const MetricSeries& data = c->data();
    // The series' own ranges stand for its rows when all of them are in view
    // and they are fitted whole (no percentile): no rescan per redraw.
    const auto [i0, i1] = data.within(m_xAxis, x0, x1);
    const bool whole = data.ordered(m_xAxis) && i0 == 0 && i1 == data.size();
    if (whole && (kept || !m_ignoreOutliers)) {
      pushRange(log ? data.positiveValues() : data.values(), log, into);
    } else {
      for (std::size_t i = i0; i < i1; ++i) {
        const QPointF q = toPoint(data[i]);
        if (q.x() >= x0 && q.x() <= x1) into.push_back(q.y());
      }
    }
    // A group's band is part of what it shows.
    for (const QList<QPointF>* band : {&c->bandLo, &c->bandHi}) {
      for (const QPointF& q : *band) {
        if (q.x() >= x0 && q.x() <= x1) values.push_back(q.y());
      }
    }
    // The smoothed line is the curve the eye follows: it is fitted as drawn,
    // beside the faint raw points (each with its own outliers).
    if (m_smoothing > 0 && !c->smoothedPoints.isEmpty()) {
      if (whole && !m_ignoreOutliers) {
        pushRange(c->smoothedRange, false, drawn);  // already log10 on a log axis
      } else {
        const auto [s0, s1] = data.ordered(m_xAxis) ? slice(c->smoothedPoints, x0, x1)
                                                    : std::pair<qsizetype, qsizetype>{0, c->smoothedPoints.size()};
        for (qsizetype i = s0; i < s1; ++i) {
          const QPointF& q = c->smoothedPoints[i];
          if (q.x() >= x0 && q.x() <= x1) drawn.push_back(q.y());
        }
      }
    }
    // The newest point of a live run is never an outlier.
    if (!data.empty()) {
      const QPointF q = toPoint(data.back());
      if (q.x() >= x0 && q.x() <= x1) keep.push_back(q.y());
    }
  }
  // A difference is read against zero: the zero line and its label stay in view.
  if (m_mode != CompareMode::Curves && (!values.empty() || !keep.empty())) keep.push_back(0.0);
  if (!fitRange(std::move(values), keep, m_ignoreOutliers, 0.06, y0, y1)) return false;
  double d0 = 0, d1 = 0;
  if (!drawn.empty() && fitRange(std::move(drawn), keep, m_ignoreOutliers, 0.06, &d0, &d1)) {
    *y0 = std::min(*y0, d0);
    *y1 = std::max(*y1, d1);
  }
  return true;
}

void ChartView::rescale(bool fit) {
  double x0 = 0, x1 = 0, y0 = 0, y1 = 0;
  if (m_userRange) {
    std::tie(x0, x1) = visibleX();
    if (!m_userY && fitY(x0, x1, &y0, &y1)) m_axisY->setRange(y0, y1);
    return;
  }
  bool live = false;
  if (!dataXRange(&x0, &x1, &live)) {
    m_axisX->setRange(0, 100);
    m_axisY->setRange(logAxis() ? -1 : 0, 1);
    return;
  }
  if (x1 <= x0) x1 = x0 + 1;
  const double cx0 = m_axisX->min(), cx1 = m_axisX->max();
  if (!fit) {
    // While points stream in, x grows by a quarter at a time (or stands at a
    // running run's planned end) so that an append lays out only its own
    // series, not every series again; the fit is exact again when the run
    // finishes or the view is reset.
    x0 = std::min(x0, cx0);
    x1 = x1 > cx1 ? x1 + (live ? 0.0 : 0.25 * (x1 - x0)) : cx1;
  }
  if (!fitY(x0, x1, &y0, &y1)) {
    y0 = logAxis() ? -1 : 0;
    y1 = 1;
  }
  if (!fit) {
    // Keep y while it holds the fit and wastes little: a percentile that
    // moves a hair with every append must not lay out every series again.
    const double cy0 = m_axisY->min(), cy1 = m_axisY->max();
    // The current range is kept only while it holds the whole fit, margins
    // included: the newest point is never on or below the edge.
    if (cy0 <= y0 && cy1 >= y1 && (cy1 - cy0) <= 1.2 * (y1 - y0)) {
      y0 = cy0;
      y1 = cy1;
    } else {
      // Outgrown: a little headroom on the side that moved, so the next
      // appends fit without another layout.
      const double room = 0.08 * (y1 - y0);
      if (y0 < cy0) y0 -= room;
      if (y1 > cy1) y1 += room;
    }
  }
  if (x0 != cx0 || x1 != cx1) m_axisX->setRange(x0, x1);
  if (y0 != m_axisY->min() || y1 != m_axisY->max()) m_axisY->setRange(y0, y1);
}

std::pair<double, double> ChartView::visibleX() const {
  return {m_axisX->min(), m_axisX->max()};
}

std::pair<double, double> ChartView::visibleY() const {
  if (logAxis()) return {std::pow(10.0, m_axisY->min()), std::pow(10.0, m_axisY->max())};
  return {m_axisY->min(), m_axisY->max()};
}

QStringList ChartView::xTickLabels() const {
  QStringList out;
  for (const auto& l : m_xTicks.labels) out << QString::fromStdString(l);
  return out;
}

QStringList ChartView::yTickLabels() const {
  QStringList out;
  for (const auto& l : m_yTicks.labels) out << QString::fromStdString(l);
  return out;
}

std::vector<double> ChartView::yTickValues() const {
  std::vector<double> out = m_yTicks.values;
  if (logAxis()) {
    for (double& v : out) v = std::pow(10.0, v);
  }
  return out;
}

}  // namespace latentlab::ui
