// QChart adapter for run curves; see chart_view.h.
#include "charts/chart_view.h"

#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QFile>
#include <QFileDialog>
#include <QPushButton>
#include <QLogValueAxis>
#include <QPainter>
#include <QSaveFile>
#include <QSlider>
#include <QSvgGenerator>
#include <QTextStream>
#include <QStackedLayout>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <limits>

#include "charts/run_palette.h"
#include "latentlab/error.h"

namespace latentlab::ui {

ChartView::ChartView(std::shared_ptr<RunStore> store, QWidget* parent) : QWidget(parent), m_store(std::move(store)) {
  m_chart = new QChart;
  m_chart->setMargins(QMargins(6, 6, 6, 6));
  m_chart->legend()->setAlignment(Qt::AlignBottom);
  m_chart->setAnimationOptions(QChart::NoAnimation);
  m_view = new QChartView(m_chart);
  m_view->setRenderHint(QPainter::Antialiasing);

  m_metricBox = new QComboBox;
  m_metricBox->addItem(tr("Loss (train and validation)"), QStringLiteral("loss"));
  m_metricBox->addItem(tr("Learning rate"), QStringLiteral("lr"));
  m_metricBox->addItem(tr("Gradient norm"), QStringLiteral("grad_norm"));
  m_metricBox->addItem(tr("Tokens per second"), QStringLiteral("tokens_per_s"));
  m_xBox = new QComboBox;
  m_xBox->addItem(tr("Step"));
  m_xBox->addItem(tr("Tokens"));
  m_logBox = new QCheckBox(tr("Log y"));
  connect(m_metricBox, &QComboBox::currentIndexChanged, this,
          [this](int i) { setMetric(m_metricBox->itemData(i).toString()); });
  connect(m_xBox, &QComboBox::currentIndexChanged, this, [this](int i) { setXAxis(i == 1 ? XAxis::Tokens : XAxis::Step); });
  connect(m_logBox, &QCheckBox::toggled, this, [this](bool on) { setLogY(on); });
  m_smoothSlider = new QSlider(Qt::Horizontal);
  m_smoothSlider->setRange(0, 99);
  m_smoothSlider->setValue(static_cast<int>(m_smoothing * 100));
  m_smoothSlider->setFixedWidth(120);
  m_smoothSlider->setToolTip(tr("Smoothing of train curves (TensorBoard's debiased moving average)"));
  m_smoothLabel = new QLabel(QString::number(m_smoothing, 'f', 2));
  connect(m_smoothSlider, &QSlider::valueChanged, this, [this](int v) { setSmoothing(v / 100.0); });

  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(8, 6, 8, 0);
  bar->setSpacing(6);
  bar->addWidget(new QLabel(tr("Metric")));
  bar->addWidget(m_metricBox);
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("x axis")));
  bar->addWidget(m_xBox);
  bar->addSpacing(12);
  bar->addWidget(m_logBox);
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("Smoothing")));
  bar->addWidget(m_smoothSlider);
  bar->addWidget(m_smoothLabel);
  bar->addStretch(1);
  auto* exportButton = new QPushButton(tr("Export…"));
  exportButton->setToolTip(tr("Save the chart as PNG or SVG, or its data as CSV"));
  connect(exportButton, &QPushButton::clicked, this, [this] {
    QString filter;
    const QString path = QFileDialog::getSaveFileName(this, tr("Export chart"), QStringLiteral("chart.png"),
                                                      tr("PNG image (*.png);;SVG image (*.svg);;CSV data (*.csv)"), &filter);
    if (path.isEmpty()) return;
    const bool ok = path.endsWith(QLatin1String(".svg"), Qt::CaseInsensitive)   ? exportSvg(path)
                    : path.endsWith(QLatin1String(".csv"), Qt::CaseInsensitive) ? exportCsv(path)
                                                                                 : exportPng(path);
    if (!ok) qWarning("chart: could not write %s", qPrintable(path));
  });
  bar->addWidget(exportButton);

  m_placeholder = new QLabel(tr("Select one or more runs on the left to compare their curves."));
  m_placeholder->setAlignment(Qt::AlignCenter);
  m_placeholder->setStyleSheet(QStringLiteral("color: palette(mid); font-size: 11pt;"));
  auto* stackHost = new QWidget;
  m_stack = new QStackedLayout(stackHost);
  m_stack->addWidget(m_placeholder);
  m_stack->addWidget(m_view);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addLayout(bar);
  layout->addWidget(stackHost, 1);

  m_redrawTimer.setSingleShot(true);
  m_redrawTimer.setInterval(kRedrawDelayMs);
  connect(&m_redrawTimer, &QTimer::timeout, this, &ChartView::redraw);
  m_pollTimer.setInterval(2000);
  connect(&m_pollTimer, &QTimer::timeout, this, [this] { pollStore(); });
  m_pollTimer.start();
  applyAxes();
}

ChartView::~ChartView() = default;

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
}

void ChartView::setMetric(const QString& metric) {
  if (metric == m_metric) return;
  m_metric = metric;
  const int i = m_metricBox->findData(metric);
  if (i >= 0 && i != m_metricBox->currentIndex()) m_metricBox->setCurrentIndex(i);
  rebuild();
}

void ChartView::setXAxis(XAxis axis) {
  if (axis == m_xAxis) return;
  m_xAxis = axis;
  m_xBox->setCurrentIndex(axis == XAxis::Tokens ? 1 : 0);
  for (auto& t : m_tracks) {
    QList<QPointF> pts;
    pts.reserve(static_cast<qsizetype>(t->points.size()));
    for (const auto& p : t->points) pts.push_back(toPoint(p));
    t->series->replace(pts);
    updateSmoothed(*t, /*restart=*/true);
  }
  applyAxes();
  rescale();
}

void ChartView::setSmoothing(double weight) {
  weight = std::clamp(weight, 0.0, 0.99);
  if (weight == m_smoothing) return;
  m_smoothing = weight;
  const int v = static_cast<int>(std::lround(weight * 100));
  if (m_smoothSlider->value() != v) m_smoothSlider->setValue(v);
  m_smoothLabel->setText(QString::number(weight, 'f', 2));
  for (auto& t : m_tracks) updateSmoothed(*t, /*restart=*/true);
}

void ChartView::updateSmoothed(Track& t, bool restart) {
  if (t.smoothed == nullptr) return;
  if (restart) {
    t.smoother = TensorBoardSmoother(m_smoothing);
    t.smoothedCount = 0;
    t.smoothed->clear();
  }
  QList<QPointF> pts;
  pts.reserve(static_cast<qsizetype>(t.points.size() - t.smoothedCount));
  for (; t.smoothedCount < t.points.size(); ++t.smoothedCount) {
    const MetricPoint& p = t.points[t.smoothedCount];
    const double v = t.smoother.next(p.value);
    if (std::isfinite(v)) pts.push_back({toPoint(p).x(), v});
  }
  t.smoothed->append(pts);  // one append per redraw
}

bool ChartView::exportPng(const QString& path) const {
  return m_view->grab().save(path, "PNG");
}

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
  out << "run_id,run,metric,step,tokens,value\n";
  for (const auto& t : m_tracks) {
    QString name = t->runName;
    name.replace(QLatin1Char('"'), QStringLiteral("\"\""));
    for (const auto& p : t->points) {
      out << t->runId << ",\"" << name << "\"," << t->metricName << ',' << p.step << ',' << p.tokens << ','
          << QString::number(p.value, 'g', 17) << '\n';
    }
  }
  out.flush();
  return file.commit();
}

void ChartView::setLogY(bool on) {
  if (on == m_logY) return;
  m_logY = on;
  m_logBox->setChecked(on);
  applyAxes();
  rescale();
}

QPointF ChartView::toPoint(const MetricPoint& p) const {
  return {m_xAxis == XAxis::Tokens ? static_cast<double>(p.tokens) : static_cast<double>(p.step), p.value};
}

void ChartView::applyAxes() {
  if (m_axisX != nullptr) m_chart->removeAxis(m_axisX);
  if (m_axisY != nullptr) m_chart->removeAxis(m_axisY);
  delete m_axisX;
  delete m_axisY;
  auto* x = new QValueAxis;
  x->setTitleText(m_xAxis == XAxis::Tokens ? tr("tokens") : tr("step"));
  x->setLabelFormat(m_xAxis == XAxis::Tokens ? QStringLiteral("%.3g") : QStringLiteral("%d"));
  m_axisX = x;
  if (m_logY) {
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
  m_axisY->setTitleText(m_metric == QLatin1String("loss") ? tr("loss") : m_metric);
  m_chart->addAxis(m_axisX, Qt::AlignBottom);
  m_chart->addAxis(m_axisY, Qt::AlignLeft);
  for (auto& t : m_tracks) {
    t->series->attachAxis(m_axisX);
    t->series->attachAxis(m_axisY);
    if (t->smoothed != nullptr) {
      t->smoothed->attachAxis(m_axisX);
      t->smoothed->attachAxis(m_axisY);
    }
  }
}

ChartView::Track* ChartView::track(qint64 runId, const QString& metricName) {
  for (auto& t : m_tracks) {
    if (t->runId == runId && t->metricName == metricName) return t.get();
  }
  return nullptr;
}

void ChartView::rebuild() {
  m_chart->removeAllSeries();  // deletes the series
  m_tracks.clear();
  const QStringList names = metricNames();
  for (const ChartRun& run : m_runs) {
    for (const QString& name : names) {
      auto t = std::make_unique<Track>();
      t->runId = run.id;
      t->metricName = name;
      t->series = new QLineSeries;
      const bool val = name == QLatin1String("val/loss");
      t->series->setName(names.size() > 1 ? QStringLiteral("%1 · %2").arg(run.name, val ? tr("val") : tr("train")) : run.name);
      QPen pen(runColor(run.id));
      pen.setWidthF(val ? 2.0 : 1.6);
      if (val) pen.setStyle(Qt::DashLine);
      t->series->setPen(pen);
      t->series->setPointsVisible(val);
      if (val) t->series->setMarkerSize(5);
      t->runName = run.name;
      m_chart->addSeries(t->series);
      if (!val) {
        // Train curves: raw faint behind, smoothed in full colour on top.
        QColor faint = runColor(run.id);
        faint.setAlpha(70);
        QPen rawPen(faint);
        rawPen.setWidthF(1.0);
        t->series->setPen(rawPen);
        t->smoothed = new QLineSeries;
        t->smoothed->setName(t->series->name());
        t->smoothed->setPen(pen);
        m_chart->addSeries(t->smoothed);
        for (QLegendMarker* m : m_chart->legend()->markers(t->series)) m->setVisible(false);
      }
      m_tracks.push_back(std::move(t));
    }
  }
  applyAxes();
  m_stack->setCurrentIndex(m_runs.isEmpty() ? 0 : 1);
  // The first read of a saved run is a downsampled series; later reads are rowsSince.
  for (auto& t : m_tracks) {
    try {
      auto pts = m_store->series(t->runId, t->metricName.toStdString(), 0, std::numeric_limits<std::int64_t>::max(), 4000);
      if (!pts.empty()) t->lastStep = pts.back().step;
      t->pending = std::move(pts);
    } catch (const Error& e) {
      qWarning("chart: %s", e.message().c_str());
    }
  }
  redraw();
}

void ChartView::pollStore(qint64 runId) {
  for (auto& t : m_tracks) {
    if (runId != 0 && t->runId != runId) continue;
    try {
      auto pts = m_store->rowsSince(t->runId, t->metricName.toStdString(), t->lastStep);
      if (!pts.empty()) appendPoints(t->runId, t->metricName, pts);
    } catch (const Error& e) {
      qWarning("chart: %s", e.message().c_str());
    }
  }
}

void ChartView::appendPoints(qint64 runId, const QString& metricName, const std::vector<MetricPoint>& points) {
  Track* t = track(runId, metricName);
  if (t == nullptr || points.empty()) return;
  for (const auto& p : points) {
    if (p.step <= t->lastStep) continue;
    t->pending.push_back(p);
    t->lastStep = p.step;
  }
  scheduleRedraw();
}

void ChartView::scheduleRedraw() {
  if (!m_redrawTimer.isActive()) m_redrawTimer.start();
}

void ChartView::redraw() {
  ++m_redrawCount;
  for (auto& t : m_tracks) {
    if (t->pending.empty()) continue;
    QList<QPointF> pts;
    pts.reserve(static_cast<qsizetype>(t->pending.size()));
    for (const auto& p : t->pending) {
      if (std::isfinite(p.value)) pts.push_back(toPoint(p));
    }
    t->series->append(pts);  // one append per series
    t->points.insert(t->points.end(), t->pending.begin(), t->pending.end());
    t->pending.clear();
    updateSmoothed(*t, /*restart=*/false);
  }
  rescale();
}

void ChartView::rescale() {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& t : m_tracks) {
    for (const auto& p : t->points) {
      const QPointF q = toPoint(p);
      if (!std::isfinite(q.y()) || (m_logY && q.y() <= 0)) continue;
      x0 = std::min(x0, q.x());
      x1 = std::max(x1, q.x());
      y0 = std::min(y0, q.y());
      y1 = std::max(y1, q.y());
    }
  }
  if (!std::isfinite(x0)) {
    x0 = 0;
    x1 = 100;
    y0 = m_logY ? 0.1 : 0;
    y1 = m_logY ? 10 : 1;
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (m_logY) {
    y0 /= 1.15;
    y1 *= 1.15;
  } else {
    const double pad = y1 > y0 ? 0.05 * (y1 - y0) : std::max(1e-6, 0.05 * std::abs(y0));
    y0 -= pad;
    y1 += pad;
  }
  m_axisX->setRange(x0, x1);
  m_axisY->setRange(y0, y1);
}

int ChartView::pointCount(qint64 runId, const QString& metricName) const {
  for (const auto& t : m_tracks) {
    if (t->runId == runId && t->metricName == metricName) return static_cast<int>(t->series->count());
  }
  return -1;
}

int ChartView::seriesCount() const { return static_cast<int>(m_tracks.size()); }

} // namespace latentlab::ui
