// Small multiples: the run chart's grid of linked charts; see chart_view.h.
#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QStackedLayout>
#include <algorithm>
#include <cmath>
#include <set>

#include "charts/chart_canvas.h"
#include "charts/chart_view.h"
#include "latentlab/error.h"

namespace latentlab::ui {

QStringList ChartView::gridMetrics() const {
  // The usual metrics first, in this order, then any other the runs have.
  static const QStringList kFirst = {QStringLiteral("train/loss"), QStringLiteral("val/loss"), QStringLiteral("lr"),
                                     QStringLiteral("grad_norm"), QStringLiteral("tokens_per_s")};
  std::set<QString> have;
  for (const ChartRun& r : m_runs) {
    try {
      for (const std::string& name : m_store->metricNames(r.id)) have.insert(QString::fromStdString(name));
    } catch (const Error& e) {
      qWarning("chart: %s", e.message().c_str());
    }
  }
  QStringList out;
  for (const QString& m : kFirst) {
    if (have.erase(m) > 0) out << m;
  }
  for (const QString& m : have) out << m;
  if (out.isEmpty()) out = kFirst.mid(0, 2);
  return out;
}

QWidget* ChartView::plotWidget() const {
  return m_grid ? m_gridHost : static_cast<QWidget*>(m_view);
}

void ChartView::setGrid(bool on) {
  if (on == m_grid) return;
  m_grid = on;
  m_gridBox->setChecked(on);
  m_metricBox->setEnabled(!on);  // each cell has its metric
  if (on) rebuildCells();
  m_stack->setCurrentIndex(m_runs.isEmpty() ? 0 : on ? 2 : 1);
}

void ChartView::rebuildCells() {
  const QStringList metrics = gridMetrics();
  QStringList current;
  for (const ChartView* c : m_cells) current << c->metric();
  if (current != metrics) {
    for (ChartView* c : m_cells) delete c;
    m_cells.clear();
    delete m_gridHost->layout();
    auto* grid = new QGridLayout(m_gridHost);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->setSpacing(2);
    const int columns = metrics.size() > 6 ? 3 : 2;
    for (const QString& metric : metrics) {
      auto* cell = new ChartView(m_store, m_gridHost, /*cell=*/true);
      cell->setMetric(metric);
      const int i = static_cast<int>(m_cells.size());
      grid->addWidget(cell, i / columns, i % columns);
      // Linked zoom: the others follow a cell's x range (or its reset).
      connect(cell, &ChartView::viewChanged, this, [this, cell] {
        if (m_linking) return;
        m_linking = true;
        const bool whole = cell->followsData();
        const auto [x0, x1] = cell->visibleX();
        for (ChartView* other : m_cells) {
          if (other == cell) continue;
          if (whole)
            other->resetView();
          else
            other->zoomToX(x0, x1);
        }
        m_linking = false;
      });
      // One crosshair: the same x in every cell.
      connect(cell->canvas(), &ChartCanvas::crosshairMoved, this, [this, cell](double x) {
        for (ChartView* other : m_cells) {
          if (other != cell) other->canvas()->showCrosshairAtX(x);
        }
      });
      m_cells.push_back(cell);
    }
  }
  syncCells();
}

void ChartView::syncCells() {
  if (!m_grid) return;
  for (ChartView* c : m_cells) {
    c->setRuns(m_runs);
    c->setXAxis(m_xAxis);
    c->setSmoothing(m_smoothing);
    c->setLogY(m_logY);
    c->setPairLabels(m_pairLabels);
    c->setBaseline(m_baseline);
    c->setCompareMode(m_mode);
    c->setGroupBy(m_groupBy);
    if (c->m_hidden != m_hidden) {
      c->m_hidden = m_hidden;
      c->updateLegend();
      c->rescale(true);
    }
  }
  // One x span for every cell: the union of what they draw.
  std::optional<std::pair<double, double>> span;
  for (ChartView* c : m_cells) {
    c->m_sharedX.reset();
    double x0 = 0, x1 = 0;
    bool live = false;
    if (!c->dataXRange(&x0, &x1, &live)) continue;
    span = span ? std::pair{std::min(span->first, x0), std::max(span->second, x1)} : std::pair{x0, x1};
  }
  for (ChartView* c : m_cells) {
    c->m_sharedX = span;
    if (!c->m_userRange) c->rescale(true);
  }
}

}  // namespace latentlab::ui
