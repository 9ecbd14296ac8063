// The run chart's curves (per mode), coalesced redraw, axes, legend toggles,
// crosshair values and export; see chart_view.h.
#include <QAreaSeries>
#include <QCategoryAxis>
#include <QChart>
#include <QLineSeries>
#include <QLocale>
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
#include "charts/chart_legend.h"
#include "charts/chart_view.h"
#include "charts/run_palette.h"
#include "charts/thinning.h"

namespace latentlab::ui {

namespace {

bool isVal(const QString& metricName) {
  return metricName == QLatin1String("val/loss");
}
// Scores of eval tasks at checkpoints: few points, each one drawn.
bool isEvalScore(const QString& metricName) {
  return metricName.startsWith(QLatin1String("eval/"));
}
// Noisy per-step curves are smoothed; validation points, eval scores and the
// learning rate (a schedule, exact) are not.
bool smoothable(const QString& metricName) {
  return !isVal(metricName) && !isEvalScore(metricName) && metricName != QLatin1String("lr");
}

QString shortMetric(const QString& metricName) {
  if (metricName == QLatin1String("val/loss")) return ChartView::tr("val");
  if (metricName == QLatin1String("train/loss")) return ChartView::tr("train");
  return metricName;
}

}  // namespace

void ChartView::buildCurves() {
  m_chart->removeAllSeries();  // deletes the series
  m_curves.clear();
  const QStringList names = metricNames();
  const bool several = names.size() > 1;
  m_zero = nullptr;
  auto add = [&](Track* source, Track* minus, const QString& label, qint64 colourRun,
                 std::vector<Track*> members = {}) {
    auto c = std::make_unique<Curve>();
    c->members = std::move(members);
    c->label = several ? QStringLiteral("%1 · %2").arg(label, shortMetric(source->metricName)) : label;
    c->legendLabel = label;
    c->metricName = source->metricName;
    c->runId = colourRun;
    c->source = source;
    c->minus = minus;
    const bool val = isVal(c->metricName);
    c->legendEntry = !(several && val);  // one entry a run: its train curve (val is dashed, same colour)
    c->raw = new QLineSeries;
    c->raw->setName(label);
    c->raw->setPointsVisible(val || isEvalScore(c->metricName));
    if (val || isEvalScore(c->metricName)) c->raw->setMarkerSize(5);
    m_chart->addSeries(c->raw);
    if (smoothable(c->metricName)) {
      // Raw faint behind, smoothed in full colour on top.
      c->smoothed = new QLineSeries;
      c->smoothed->setName(label);
      m_chart->addSeries(c->smoothed);
    }
    if (c->members.size() > 1 && !(several && val)) {
      // The band behind the mean: min and max of the members at each x (one
      // band a group: the train curve's when validation is drawn with it).
      c->band = new QAreaSeries(new QLineSeries, new QLineSeries);
      c->band->setName(label);
      m_chart->addSeries(c->band);
    }
    for (QLineSeries* s : {c->raw, c->smoothed}) {
      if (s == nullptr) continue;
      connect(s, &QLineSeries::hovered, this,
              [this, run = colourRun](const QPointF&, bool on) { highlightRun(on ? run : 0); });
    }
    m_curves.push_back(std::move(c));
  };
  // Legend names without the words every selected run starts with.
  std::vector<std::string> full;
  for (const ChartRun& r : m_runs) full.push_back(r.name.toStdString());
  const std::vector<std::string> brief = withoutCommonWords(full);
  QHash<qint64, QString> shortName;
  for (qsizetype i = 0; i < m_runs.size(); ++i)
    shortName.insert(m_runs[i].id, QString::fromStdString(brief[static_cast<std::size_t>(i)]));
  if (m_mode == CompareMode::Curves && !m_groupBy.isEmpty()) {
    // One curve per value of the field, in the order the runs come.
    QStringList values;
    QHash<QString, std::vector<qint64>> runsOf;
    for (const ChartRun& r : m_runs) {
      const QString v = m_runInfo.value(r.id).spec.value(m_groupBy, QStringLiteral("—"));
      if (!runsOf.contains(v)) values << v;
      runsOf[v].push_back(r.id);
    }
    const QString field = m_groupBy.section(QLatin1Char('.'), -1);
    int groupIndex = 0;
    for (const QString& v : values) {
      // Each group its own palette colour in order (its first run's colour
      // could repeat another group's).
      const QColor groupColour = paletteColor(groupIndex++);
      const std::vector<qint64>& ids = runsOf[v];
      QString shown = v;
      if (shown.size() >= 2 && shown.startsWith(QLatin1Char('"')) && shown.endsWith(QLatin1Char('"')))
        shown = shown.mid(1, shown.size() - 2);
      const QString count = ids.size() == 1 ? tr("1 run") : tr("%1 runs").arg(ids.size());
      const QString label = QStringLiteral("%1 = %2 (%3)").arg(field, shown, count);
      for (const QString& name : names) {
        std::vector<Track*> members;
        for (qint64 id : ids) {
          if (Track* t = track(id, name)) members.push_back(t);
        }
        if (!members.empty()) {
          add(members.front(), nullptr, label, ids.front(), members);
          m_curves.back()->colour = groupColour;
        }
      }
    }
  } else if (m_mode == CompareMode::Curves) {
    for (auto& t : m_tracks) add(t.get(), nullptr, shortName.value(t->runId, t->runName), t->runId);
  } else if (m_mode == CompareMode::Difference) {
    const qint64 base = baseline();
    for (const ChartRun& r : m_runs) {
      if (r.id == base) continue;
      for (const QString& name : names) {
        Track* a = track(r.id, name);
        Track* b = track(base, name);
        if (a != nullptr && b != nullptr)
          add(a, b, QStringLiteral("%1 \u2212 %2").arg(shortName.value(r.id), shortName.value(base)), r.id);
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
  if (m_mode != CompareMode::Curves) {
    m_zero = new QLineSeries;
    QPen zero(QColor(60, 60, 60, 170));
    zero.setWidthF(1.2);
    m_zero->setPen(zero);
    m_chart->addSeries(m_zero);
  }
  m_highlighted = 0;
  applyAxes();
  updateLegend();  // and the pens
  for (auto& t : m_tracks) t->replaced = true;
  m_fitNext = true;
  redraw();
}

void ChartView::applyPens() {
  // Up to eight runs the smoothed curves are 1.6 px; beyond, 1 px: less
  // clutter, and the raster engine's thin-line path instead of a stroked
  // outline (a third of the paint with 20 runs of noisy loss).
  QSet<qint64> shownRuns;
  for (const auto& c : m_curves) {
    if (runVisible(c->runId)) shownRuns.insert(c->runId);
  }
  const double lineWidth = shownRuns.size() > 8 ? 1.0 : 1.6;
  for (auto& c : m_curves) {
    const bool val = isVal(c->metricName);
    const bool dim = m_highlighted != 0 && m_highlighted != c->runId;
    const bool bold = m_highlighted != 0 && m_highlighted == c->runId;
    QColor colour = c->colour.isValid() ? c->colour : runColor(c->runId);
    if (dim) colour.setAlpha(45);
    QPen pen(colour);
    pen.setWidthF((val ? 2.0 : lineWidth) * (bold ? 1.8 : 1.0));
    if (val) pen.setStyle(Qt::DashLine);
    if (c->smoothed != nullptr) {
      QColor faint = c->colour.isValid() ? c->colour : runColor(c->runId);
      faint.setAlpha(dim ? 20 : 70);
      QPen rawPen(faint);
      rawPen.setWidthF(1.0);
      c->raw->setPen(rawPen);
      c->smoothed->setPen(pen);
      if (!c->members.empty()) c->raw->setPen(Qt::NoPen);  // a group shows its band, not a raw mean
    } else {
      c->raw->setPen(pen);
      if (val) {
        c->raw->setColor(colour);
        c->raw->setBrush(colour);
      }
    }
    if (c->band != nullptr) {
      QColor fill = c->colour.isValid() ? c->colour : runColor(c->runId);
      fill.setAlpha(dim ? 15 : 50);
      c->band->setBrush(fill);
      c->band->setPen(Qt::NoPen);
    }
  }
}

void ChartView::updateColors() {
  updateLegend();
  for (ChartView* c : m_cells) c->updateColors();
}

void ChartView::highlightRun(qint64 runId) {
  if (runId != 0 && !runVisible(runId)) runId = 0;  // a hidden run's entry highlights nothing
  if (runId == m_highlighted) return;
  m_highlighted = runId;
  applyPens();
}

void ChartView::soloRun(qint64 runId) {
  QSet<qint64> others;
  for (const auto& c : m_curves) {
    if (c->runId != runId) others.insert(c->runId);
  }
  const bool alreadySolo =
      runVisible(runId) && std::all_of(others.begin(), others.end(), [this](qint64 id) { return !runVisible(id); });
  m_hidden = alreadySolo ? QSet<qint64>{} : others;
  updateLegend();
  if (!m_userY) rescale(true);
  syncCells();
}

void ChartView::updateLegend() {
  applyPens();  // colours, and the line width for the number of runs shown
  QVector<ChartLegend::Entry> entries;
  bool anyVal = false, anyTrain = false;
  QSet<qint64> listed;
  for (auto& c : m_curves) {
    const bool visible = runVisible(c->runId);
    c->raw->setVisible(visible);
    if (c->smoothed != nullptr) c->smoothed->setVisible(visible);
    if (c->band != nullptr) c->band->setVisible(visible);
    anyVal = anyVal || isVal(c->metricName);
    anyTrain = anyTrain || !isVal(c->metricName);
    if (!c->legendEntry || listed.contains(c->runId)) continue;
    listed.insert(c->runId);
    QString full = c->legendLabel;
    for (const ChartRun& r : m_runs) {
      if (r.id == c->runId && !c->isDerived()) full = r.name;
    }
    entries.push_back({c->runId, c->legendLabel, full, c->colour.isValid() ? c->colour : runColor(c->runId), visible});
  }
  m_legend->setEntries(entries);
  m_legend->setNote(anyVal && anyTrain ? tr("solid: train (smoothed) · dashed: validation") : QString());
}

void ChartView::drawCurve(Curve& c, bool restart) {
  if (c.minus != nullptr) {
    c.derived.assign(differenceByTokens(c.source->points.rows(), c.minus->points.rows()));
    restart = true;
  } else if (!c.members.empty()) {
    std::vector<const std::vector<MetricPoint>*> rows;
    for (const Track* t : c.members) rows.push_back(&t->points.rows());
    c.group = groupStats(rows, m_xAxis);
    c.derived.clear();
    for (const GroupPoint& g : c.group) c.derived.push_back(g.at);
    restart = true;
  }
  const MetricSeries& data = c.data();
  if (restart || c.drawnCount > data.size()) {
    c.drawnCount = 0;
    c.smoother = TensorBoardSmoother(m_smoothing);
    c.shown.clear();
    c.rawPoints.clear();
    c.smoothedPoints.clear();
    c.smoothedRange = {};
  }
  for (std::size_t i = c.drawnCount; i < data.size(); ++i) {
    const MetricPoint& p = data[i];
    const QPointF q = toPoint(p);
    if (std::isfinite(q.y())) c.rawPoints.push_back(q);
    if (c.smoothed != nullptr) {
      double v = c.smoother.next(p.value);
      if (logAxis()) v = v > 0 ? std::log10(v) : std::numeric_limits<double>::quiet_NaN();
      if (std::isfinite(v)) {
        c.smoothedPoints.push_back({q.x(), v});
        c.smoothedRange.add(v);
        c.shown.push_back({q.x(), v});
      }
    } else if (std::isfinite(q.y())) {
      c.shown.push_back({q.x(), q.y()});
    }
  }
  c.drawnCount = data.size();
  if (c.band != nullptr) {
    c.bandLo.clear();
    c.bandHi.clear();
    for (const GroupPoint& g : c.group) {
      const double x = xOf(g.at, m_xAxis);
      const double lo = logAxis() ? (g.lo > 0 ? std::log10(g.lo) : std::numeric_limits<double>::quiet_NaN()) : g.lo;
      const double hi = logAxis() ? (g.hi > 0 ? std::log10(g.hi) : std::numeric_limits<double>::quiet_NaN()) : g.hi;
      if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
      c.bandLo.push_back({x, lo});
      c.bandHi.push_back({x, hi});
    }
  }
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
  // The faint raw curve under a smoothed one: its min-max envelope over
  // two-pixel columns looks the same and costs half the paint.
  c.raw->replace(thinToColumns(c.rawPoints, x0, x1, c.smoothed != nullptr ? columns / 2 : columns));
  if (c.smoothed != nullptr) c.smoothed->replace(thinToColumns(c.smoothedPoints, x0, x1, columns));
  if (c.band != nullptr) {
    c.band->lowerSeries()->replace(thinToColumns(c.bandLo, x0, x1, columns));
    c.band->upperSeries()->replace(thinToColumns(c.bandHi, x0, x1, columns));
  }
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
    if (c->isDerived()) {
      const auto inputs = c->inputs();
      if (std::any_of(inputs.begin(), inputs.end(), dirty)) drawCurve(*c, /*restart=*/true);
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
  updateFaintSpan();
}

QStringList ChartView::crosshairLines(double x) const {
  // Every value with the same decimals, the fewest that still tell the
  // visible curves apart at this range (loss: 5.253 and 5.246, not 5.253 and 5.2459).
  std::vector<double> ys;
  for (const auto& c : m_curves) {
    if (!runVisible(c->runId)) continue;
    auto y = interpolateAt(c->shown, x);
    if (y && logAxis()) y = std::pow(10.0, *y);
    if (y) ys.push_back(*y);
  }
  double largest = 0;
  for (double y : ys) largest = std::max(largest, std::abs(y));
  const bool plain = largest >= 1e-3 && largest < 1e6;
  const int decimals =
      !plain ? 0 : std::clamp(3 - static_cast<int>(std::floor(std::log10(std::max(largest, 1e-3)))), 0, 6);
  QStringList lines;
  std::size_t k = 0;
  for (const auto& c : m_curves) {
    if (!runVisible(c->runId)) continue;
    auto y = interpolateAt(c->shown, x);
    if (!y) continue;
    const double v = ys[k++];
    lines << QStringLiteral("%1: %2").arg(c->label,
                                          plain ? QString::number(v, 'f', decimals) : QString::number(v, 'g', 5));
  }
  if (lines.isEmpty()) return lines;
  const QString head = m_xAxis == XAxis::Tokens     ? tr("tokens %1").arg(QLocale().toString(std::llround(x)))
                       : m_xAxis == XAxis::WallTime ? tr("%1 s").arg(QString::number(x, 'f', 1))
                                                    : tr("step %1").arg(QString::number(std::round(x), 'f', 0));
  lines.prepend(head);
  return lines;
}

QSize ChartView::exportSize() const {
  const QWidget* plot = plotWidget();
  return {plot->width(), plot->height() + m_legend->heightForWidth(plot->width())};
}

void ChartView::renderExport(QPainter& painter) const {
  // The plot, then the legend under it.
  const QWidget* plot = plotWidget();
  if (m_grid)
    m_gridHost->render(&painter);  // every cell as laid out
  else
    m_view->render(&painter, QRectF(0, 0, m_view->width(), m_view->height()), m_view->rect());
  m_legend->renderAt(painter, QPoint(0, plot->height()), plot->width());
}

bool ChartView::exportPng(const QString& path, double scale) const {
  const QSize size = exportSize();
  QImage image((QSizeF(size) * scale).toSize(), QImage::Format_ARGB32_Premultiplied);
  image.setDevicePixelRatio(scale);
  image.fill(Qt::white);
  QPainter painter(&image);
  painter.setRenderHint(QPainter::Antialiasing);
  renderExport(painter);
  painter.end();
  return image.save(path, "PNG");
}

bool ChartView::exportSvg(const QString& path) const {
  const QSize size = exportSize();
  QSvgGenerator svg;
  svg.setFileName(path);
  svg.setSize(size);
  svg.setViewBox(QRect(QPoint(0, 0), size));
  svg.setTitle(QStringLiteral("LatentLab chart"));
  QPainter painter;
  if (!painter.begin(&svg)) return false;
  renderExport(painter);
  return painter.end();
}

bool ChartView::exportCsv(const QString& path) const {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) return false;
  QTextStream out(&file);
  out << "run_id,run,metric,step,tokens,wall_time,value\n";
  for (const auto& c : m_curves) {
    QString name = c->isDerived() ? c->label : c->source->runName;
    name.replace(QLatin1Char('"'), QStringLiteral("\"\""));
    const QString metric = c->minus != nullptr   ? c->metricName + QStringLiteral(" difference")
                           : !c->members.empty() ? c->metricName + QStringLiteral(" group mean")
                                                 : c->metricName;
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
    if (!c->isDerived() && c->source->runId == runId && c->metricName == metricName)
      return static_cast<int>(c->rawPoints.size());
  }
  return -1;
}

int ChartView::drawnPointCount(qint64 runId, const QString& metricName) const {
  for (const auto& c : m_curves) {
    if (!c->isDerived() && c->source->runId == runId && c->metricName == metricName)
      return static_cast<int>(c->raw->count());
  }
  return -1;
}

int ChartView::seriesCount() const {
  return static_cast<int>(m_curves.size());
}

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

std::vector<GroupPoint> ChartView::curveGroup(const QString& label) const {
  const Curve* c = curve(label);
  return c != nullptr ? c->group : std::vector<GroupPoint>{};
}

std::vector<MetricPoint> ChartView::curveData(const QString& label) const {
  const Curve* c = curve(label);
  return c != nullptr ? c->data().rows() : std::vector<MetricPoint>{};
}

}  // namespace latentlab::ui
