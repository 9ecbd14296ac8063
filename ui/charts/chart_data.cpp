// The run chart's store reads: the tracks of the selected runs read once
// (a downsampled window of steps), polled for newer rows, and re-read for the
// visible window after a zoom; see chart_view.h.
#include "charts/chart_view.h"

#include <QStackedLayout>
#include <algorithm>
#include "charts/range_refine.h"
#include "latentlab/error.h"
#include "models/spec_diff.h"

namespace latentlab::ui {

bool ChartView::readRunInfo(qint64 runId) {
  RunInfo& info = m_runInfo[runId];
  const bool wasRunning = info.running;
  try {
    const RunRecord r = m_store->run(runId);
    info.running = r.status == RunStatus::Running;
    if (info.spec.isEmpty()) {
      const QString spec = QString::fromStdString(r.specJson);
      info.plannedSteps = specSteps(spec);
      info.spec = flattenJson(spec);
    }
  } catch (const Error&) {
    info.running = false;  // deleted meanwhile
  }
  return wasRunning && !info.running;
}

ChartView::Track* ChartView::track(qint64 runId, const QString& metricName) {
  for (auto& t : m_tracks) {
    if (t->runId == runId && t->metricName == metricName) return t.get();
  }
  return nullptr;
}

void ChartView::loadTrack(Track& t, std::int64_t stepMin, std::int64_t stepMax) {
  auto pts = m_store->series(t.runId, t.metricName.toStdString(), stepMin, stepMax, kMaxPoints);
  LoadedWindow w;
  w.stepMin = stepMin;
  w.stepMax = stepMax;
  w.maxPoints = kMaxPoints;
  w.rows = pts.size();
  if (!pts.empty()) {
    w.firstStep = pts.front().step;
    w.lastStep = pts.back().step;
  }
  t.window = w;
  t.points.assign(std::move(pts));
  t.replaced = true;
}

void ChartView::rebuild() {
  m_tracks.clear();
  m_userRange = false;
  const QStringList names = metricNames();
  for (const ChartRun& run : m_runs) {
    for (const QString& name : names) {
      auto t = std::make_unique<Track>();
      t->runId = run.id;
      t->metricName = name;
      t->runName = run.name;
      // The first read of a run is a downsampled series of its whole range;
      // later reads are rowsSince (live) or windows (zoom).
      try {
        loadTrack(*t, 0, kLastStep);
        t->lastStep = t->window.lastStep;
      } catch (const Error& e) {
        qWarning("chart: %s", e.message().c_str());
      }
      t->overview = t->points;
      t->overviewWindow = t->window;
      m_tracks.push_back(std::move(t));
    }
  }
  m_runInfo.clear();
  for (const ChartRun& run : m_runs) readRunInfo(run.id);
  updateGroupFields();
  updateMetricChoices();
  m_stack->setCurrentIndex(m_runs.isEmpty() ? 0 : m_grid ? 2 : 1);
  buildCurves();
}

void ChartView::pollStore(qint64 runId) {
  if (m_grid) {
    for (ChartView* c : m_cells) c->pollStore(runId);
  }
  for (const ChartRun& run : m_runs) {
    if (runId != 0 && run.id != runId) continue;
    if (readRunInfo(run.id)) {
      m_fitNext = true;  // finished: x fits the data exactly now
      scheduleRedraw();
    }
  }
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

void ChartView::redrawNow() {
  m_redrawTimer.stop();
  redraw();
}

void ChartView::refineVisible() {
  if (!m_userRange) return;
  const auto [x0, x1] = visibleX();
  bool any = false;
  for (auto& t : m_tracks) {
    if (t->overview.empty()) continue;
    std::int64_t s0 = 0, s1 = 0;
    if (m_xAxis == XAxis::Step) {
      s0 = static_cast<std::int64_t>(std::floor(std::max(0.0, x0)));
      s1 = static_cast<std::int64_t>(std::ceil(std::max(0.0, std::min(x1, 9e18))));
    } else {  // tokens and wall time grow with the step: bracket them on the full-range read
      std::vector<double> xs;
      xs.reserve(t->overview.size());
      for (const MetricPoint& p : t->overview) xs.push_back(xOf(p, m_xAxis));
      s0 = stepAtOrBelow(t->overview.rows(), xs, x0);
      s1 = stepAtOrAbove(t->overview.rows(), xs, x1);
    }
    const RefineDecision d = refineFor(t->window, s0, s1, t->lastStep, kMaxPoints);
    if (!d.read) continue;
    try {
      loadTrack(*t, d.stepMin, d.stepMax);
      // Rows that arrived after the read belong to the window when it is open-ended.
      t->lastStep = std::max(t->lastStep, t->window.lastStep);
      ++m_windowReads;
      any = true;
    } catch (const Error& e) {
      qWarning("chart: %s", e.message().c_str());
    }
  }
  if (any) redraw();
  for (auto& c : m_curves) pushSeries(*c);  // thinned for the new range
}

int ChartView::loadedRows(qint64 runId, const QString& metricName) const {
  for (const auto& t : m_tracks) {
    if (t->runId == runId && t->metricName == metricName) return static_cast<int>(t->points.size());
  }
  return -1;
}

}  // namespace latentlab::ui
