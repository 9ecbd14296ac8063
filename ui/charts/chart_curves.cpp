// The run chart's curves (per mode), coalesced redraw, axes, legend toggles,
// crosshair values and export; see chart_view.h.
#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPainter>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QTextStream>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "charts/chart_canvas.h"
#include "charts/chart_view.h"
#include "charts/run_palette.h"
#include "charts/thinning.h"

namespace latentlab::ui {

namespace {

bool isVal(const QString& metricName) { return metricName == QLatin1String("val/loss"); }

QString shortMetric(const QString& metricName) {
  if (metricName == QLatin1String("val/loss")) return ChartView::tr("val");
  if (metricName == QLatin1String("train/loss")) return ChartView::tr("train");
  return metricName;
}

} // namespace

void ChartView::buildCurves() {
  m_chart->removeAllSeries();  // deletes the series
  m_curves.clear();
  const QStringList names = metricNames();
  const bool several = names.size() > 1;
  auto add = [&](Track* source, Track* minus, const QString& label, qint64 colourRun) {
    auto c = std::make_unique<Curve>();
    c->label = several ? QStringLiteral("%1 · %2").arg(label, shortMetric(source->metricName)) : label;
    c->metricName = source->metricName;
    c->runId = colourRun;
    c->source = source;
    c->minus = minus;
    const bool val = isVal(c->metricName);
    QPen pen(runColor(colourRun));
    pen.setWidthF(val ? 2.0 : 1.6);
    if (val) pen.setStyle(Qt::DashLine);
    c->legendEntry = !(several && val);  // one entry a run: its train curve (val is dashed, same colour)
    c->raw = new QLineSeries;
    c->raw->setName(label);
    c->raw->setPen(pen);
    c->raw->setPointsVisible(val);
    if (val) c->raw->setMarkerSize(5);
    m_chart->addSeries(c->raw);
    if (!val) {
      // Train curves: raw faint behind, smoothed in full colour on top.
      QColor faint = runColor(colourRun);
      faint.setAlpha(70);
      QPen rawPen(faint);
      rawPen.setWidthF(1.0);
      c->raw->setPen(rawPen);
      c->smoothed = new QLineSeries;
      c->smoothed->setName(label);
      c->smoothed->setPen(pen);
      m_chart->addSeries(c->smoothed);
    }
    m_curves.push_back(std::move(c));
  };
  // Legend names without the words every selected run starts with.
  std::vector<std::string> full;
  for (const ChartRun& r : m_runs) full.push_back(r.name.toStdString());
  const std::vector<std::string> brief = withoutCommonWords(full);
  QHash<qint64, QString> shortName;
  for (qsizetype i = 0; i < m_runs.size(); ++i) shortName.insert(m_runs[i].id, QString::fromStdString(brief[static_cast<std::size_t>(i)]));
  if (m_mode == CompareMode::Curves) {
    for (auto& t : m_tracks) add(t.get(), nullptr, shortName.value(t->runId, t->runName), t->runId);
  } else if (m_mode == CompareMode::Difference) {
    const qint64 base = baseline();
    for (const ChartRun& r : m_runs) {
      if (r.id == base) continue;
      for (const QString& name : names) {
        Track* a = track(r.id, name);
        Track* b = track(base, name);
        if (a != nullptr && b != nullptr) add(a, b, QStringLiteral("%1 \u2212 %2").arg(shortName.value(r.id), shortName.value(base)), r.id);
      }
    }
  } else {
    for (const RunPair& p : pairs()) {
      for (const QString& name : names) {
        Track* a = track(p.minuend, name);
        Track* b = track(p.subtrahend, name);
        if (a != nullptr && b != nullptr) add(a, b, QString::fromStdString(p.label), p.minuend);
      }
    }
  }
  applyAxes();
  updateLegend();
  for (auto& t : m_tracks) t->replaced = true;
  m_fitNext = true;
  redraw();
}

void ChartView::updateLegend() {
  for (auto& c : m_curves) {
    const bool visible = runVisible(c->runId);
    c->raw->setVisible(visible);
    if (c->smoothed != nullptr) c->smoothed->setVisible(visible);
    // One legend entry per curve (the bold line); hiding a series hides its
    // marker, so markers are shown again and dimmed instead.
    for (QLegendMarker* m : m_chart->legend()->markers(c->raw)) m->setVisible(c->smoothed == nullptr);
    QLineSeries* entry = c->smoothed != nullptr ? c->smoothed : c->raw;
    for (QLegendMarker* m : m_chart->legend()->markers(entry)) {
      m->setVisible(c->legendEntry);
      QColor text = palette().color(QPalette::WindowText);
      if (!visible) text.setAlpha(90);
      m->setLabelBrush(text);
      QColor swatch = runColor(c->runId);
      if (!visible) swatch.setAlpha(60);
      m->setBrush(swatch);
      const qint64 run = c->runId;
      disconnect(m, &QLegendMarker::clicked, this, nullptr);
      connect(m, &QLegendMarker::clicked, this, [this, run] { setRunVisible(run, !runVisible(run)); });
    }
  }
}

void ChartView::drawCurve(Curve& c, bool restart) {
  if (c.minus != nullptr) {
    c.derived = differenceByTokens(c.source->points, c.minus->points);
    restart = true;
  }
  const std::vector<MetricPoint>& data = c.data();
  if (restart || c.drawnCount > data.size()) {
    c.drawnCount = 0;
    c.smoother = TensorBoardSmoother(m_smoothing);
    c.shown.clear();
    c.rawPoints.clear();
    c.smoothedPoints.clear();
  }
  for (std::size_t i = c.drawnCount; i < data.size(); ++i) {
    const MetricPoint& p = data[i];
    const QPointF q = toPoint(p);
    if (std::isfinite(p.value)) c.rawPoints.push_back(q);
    if (c.smoothed != nullptr) {
      const double v = c.smoother.next(p.value);
      if (std::isfinite(v)) {
        c.smoothedPoints.push_back({q.x(), v});
        c.shown.push_back({q.x(), v});
      }
    } else if (std::isfinite(p.value)) {
      c.shown.push_back({q.x(), q.y()});
    }
  }
  c.drawnCount = data.size();
  pushSeries(c);
}

void ChartView::pushSeries(Curve& c) {
  // Thinned to the plot's columns over what is shown: the visible range when
  // the user chose it, else the curve's whole extent. One replace per series:
  // Qt Charts lays a series out again for every point appended.
  double x0 = 0, x1 = 0;
  if (m_userRange) {
    std::tie(x0, x1) = visibleX();
  } else if (!c.rawPoints.isEmpty()) {
    x0 = c.rawPoints.front().x();
    x1 = c.rawPoints.back().x();
  }
  m_thinColumns = m_chart->plotArea().width();
  const int columns = std::max(200, static_cast<int>(m_thinColumns));
  c.raw->replace(thinToColumns(c.rawPoints, x0, x1, columns));
  if (c.smoothed != nullptr) c.smoothed->replace(thinToColumns(c.smoothedPoints, x0, x1, columns));
}

void ChartView::redraw() {
  ++m_redrawCount;
  for (auto& t : m_tracks) {
    if (t->pending.empty()) continue;
    const std::int64_t drawnLast = t->points.empty() ? -1 : t->points.back().step;
    const std::int64_t overviewLast = t->overview.empty() ? -1 : t->overview.back().step;
    for (const MetricPoint& p : t->pending) {
      if (p.step > overviewLast) t->overview.push_back(p);
      // A window that ends before the newest rows keeps them for reset only.
      if (p.step > drawnLast && (t->window.stepMax == kLastStep || p.step <= t->window.stepMax)) t->points.push_back(p);
    }
    t->pending.clear();
  }
  auto dirty = [](const Track* t) { return t->replaced || t->points.size() != t->appendedFrom; };
  for (auto& c : m_curves) {
    if (c->minus != nullptr) {
      if (dirty(c->source) || dirty(c->minus)) drawCurve(*c, /*restart=*/true);
    } else if (dirty(c->source)) {
      drawCurve(*c, /*restart=*/c->source->replaced);
    }
  }
  for (auto& t : m_tracks) {
    t->replaced = false;
    t->appendedFrom = t->points.size();
  }
  if (!m_userRange) rescale(m_fitNext);
  m_fitNext = false;
}

void ChartView::applyAxes() {
  double x0 = 0, x1 = 100;
  if (m_axisX != nullptr) std::tie(x0, x1) = visibleX();
  if (m_axisX != nullptr) m_chart->removeAxis(m_axisX);
  if (m_axisY != nullptr) m_chart->removeAxis(m_axisY);
  delete m_axisX;
  delete m_axisY;
  auto* x = new QValueAxis;
  x->setTitleText(m_xAxis == XAxis::Tokens ? tr("tokens") : m_xAxis == XAxis::WallTime ? tr("wall time (s)") : tr("step"));
  x->setLabelFormat(m_xAxis == XAxis::Tokens ? QStringLiteral("%.3g") : QStringLiteral("%.0f"));
  x->setRange(x0, x1);
  m_axisX = x;
  if (m_logY && m_mode == CompareMode::Curves) {
    auto* y = new QLogValueAxis;
    y->setBase(10);
    y->setLabelFormat(QStringLiteral("%.3g"));
    y->setMinorTickCount(-1);
    m_axisY = y;
  } else {
    auto* y = new QValueAxis;
    y->setLabelFormat(QStringLiteral("%.3g"));
    m_axisY = y;
  }
  const bool loss = m_metric == QLatin1String("loss");
  const QString metric = loss ? tr("loss") : m_metric;
  QString yTitle = metric;
  if (m_mode == CompareMode::Difference) yTitle = tr("\u0394 %1 to the baseline").arg(metric);
  if (m_mode == CompareMode::Paired) yTitle = tr("\u0394 %1 within each pair").arg(metric);
  if (loss) yTitle += tr(" (dashed: validation)");
  m_axisY->setTitleText(yTitle);
  m_chart->addAxis(m_axisX, Qt::AlignBottom);
  m_chart->addAxis(m_axisY, Qt::AlignLeft);
  for (auto& c : m_curves) {
    c->raw->attachAxis(m_axisX);
    c->raw->attachAxis(m_axisY);
    if (c->smoothed != nullptr) {
      c->smoothed->attachAxis(m_axisX);
      c->smoothed->attachAxis(m_axisY);
    }
  }
}

void ChartView::rescale(bool fit) {
  const bool logY = m_logY && m_mode == CompareMode::Curves;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& c : m_curves) {
    if (!runVisible(c->runId)) continue;
    for (const auto& p : c->data()) {
      const QPointF q = toPoint(p);
      if (!std::isfinite(q.y()) || (logY && q.y() <= 0)) continue;
      x0 = std::min(x0, q.x());
      x1 = std::max(x1, q.x());
      y0 = std::min(y0, q.y());
      y1 = std::max(y1, q.y());
    }
  }
  if (!std::isfinite(x0)) {
    x0 = 0;
    x1 = 100;
    y0 = logY ? 0.1 : 0;
    y1 = logY ? 10 : 1;
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (logY) {
    y0 /= 1.15;
    y1 *= 1.15;
  } else {
    const double pad = y1 > y0 ? 0.05 * (y1 - y0) : std::max(1e-6, 0.05 * std::abs(y0));
    y0 -= pad;
    y1 += pad;
  }
  if (!fit) {
    const auto [cx0, cx1] = visibleX();
    const double cy0 = logY ? static_cast<QLogValueAxis*>(m_axisY)->min() : static_cast<QValueAxis*>(m_axisY)->min();
    const double cy1 = logY ? static_cast<QLogValueAxis*>(m_axisY)->max() : static_cast<QValueAxis*>(m_axisY)->max();
    x0 = std::min(x0, cx0);
    x1 = x1 > cx1 ? x1 + 0.25 * (x1 - x0) : cx1;
    y0 = std::min(y0, cy0);
    y1 = std::max(y1, cy1);
    if (x0 == cx0 && x1 == cx1 && y0 == cy0 && y1 == cy1) return;  // nothing to lay out again
  }
  m_axisX->setRange(x0, x1);
  m_axisY->setRange(y0, y1);
}

QStringList ChartView::crosshairLines(double x) const {
  QStringList lines;
  for (const auto& c : m_curves) {
    if (!runVisible(c->runId)) continue;
    const auto y = interpolateAt(c->shown, x);
    if (y) lines << QStringLiteral("%1: %2").arg(c->label, QString::number(*y, 'g', 5));
  }
  if (lines.isEmpty()) return lines;
  const QString head = m_xAxis == XAxis::Tokens     ? tr("tokens %1").arg(QString::number(x, 'g', 4))
                       : m_xAxis == XAxis::WallTime ? tr("%1 s").arg(QString::number(x, 'f', 1))
                                                    : tr("step %1").arg(QString::number(std::round(x), 'f', 0));
  lines.prepend(head);
  return lines;
}

bool ChartView::exportPng(const QString& path) const { return m_view->grab().save(path, "PNG"); }

bool ChartView::exportSvg(const QString& path) const {
  QSvgGenerator svg;
  svg.setFileName(path);
  svg.setSize(m_view->size());
  svg.setViewBox(QRect(QPoint(0, 0), m_view->size()));
  svg.setTitle(QStringLiteral("LatentLab chart"));
  QPainter painter;
  if (!painter.begin(&svg)) return false;
  m_view->render(&painter);
  return painter.end();
}

bool ChartView::exportCsv(const QString& path) const {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) return false;
  QTextStream out(&file);
  out << "run_id,run,metric,step,tokens,wall_time,value\n";
  for (const auto& c : m_curves) {
    QString name = c->minus != nullptr ? c->label : c->source->runName;
    name.replace(QLatin1Char('"'), QStringLiteral("\"\""));
    const QString metric = c->minus != nullptr ? c->metricName + QStringLiteral(" difference") : c->metricName;
    for (const auto& p : c->data()) {
      out << c->runId << ",\"" << name << "\"," << metric << ',' << p.step << ',' << p.tokens << ','
          << QString::number(p.wallTime, 'g', 10) << ',' << QString::number(p.value, 'g', 17) << '\n';
    }
  }
  out.flush();
  return file.commit();
}

int ChartView::pointCount(qint64 runId, const QString& metricName) const {
  for (const auto& c : m_curves) {
    if (c->minus == nullptr && c->source->runId == runId && c->metricName == metricName) return static_cast<int>(c->rawPoints.size());
  }
  return -1;
}

int ChartView::drawnPointCount(qint64 runId, const QString& metricName) const {
  for (const auto& c : m_curves) {
    if (c->minus == nullptr && c->source->runId == runId && c->metricName == metricName) return static_cast<int>(c->raw->count());
  }
  return -1;
}

int ChartView::seriesCount() const { return static_cast<int>(m_curves.size()); }

QStringList ChartView::curveLabels() const {
  QStringList out;
  for (const auto& c : m_curves) out << c->label;
  return out;
}

const ChartView::Curve* ChartView::curve(const QString& label) const {
  for (const auto& c : m_curves) {
    if (c->label == label) return c.get();
  }
  return nullptr;
}

std::vector<MetricPoint> ChartView::curveData(const QString& label) const {
  const Curve* c = curve(label);
  return c != nullptr ? c->data() : std::vector<MetricPoint>{};
}

} // namespace latentlab::ui
