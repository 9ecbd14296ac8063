// The job controller's runs left by an earlier workbench: reattached on
// start (alive: followed through the store; dead: marked crashed), polled
// while they run, and the children detached when the user keeps them
// running on close; see job_controller.h.
#include "jobs/job_controller.h"

#include <QDateTime>
#include <csignal>
#include "latentlab/error.h"
#include "latentlab/run_store.h"
#include "models/spec_diff.h"

namespace latentlab::ui {

namespace {

// Steps a second over the newest train/loss rows of one stretch of the run
// (rows whose wall time keeps increasing: a resume starts a new stretch).
double storePace(const std::vector<MetricPoint>& rows) {
  if (rows.size() < 2) return 0;
  std::size_t first = rows.size() - 1;
  while (first > 0 && rows[first - 1].wallTime < rows[first].wallTime && rows[first - 1].step < rows[first].step)
    --first;
  const MetricPoint& a = rows[first];
  const MetricPoint& b = rows.back();
  if (b.step <= a.step || b.wallTime <= a.wallTime) return 0;
  return static_cast<double>(b.step - a.step) / (b.wallTime - a.wallTime);
}

}  // namespace

void JobController::reattach(bool enqueueQueued) {
  std::vector<RunRecord> runs;
  try {
    runs = m_store->listRuns();
  } catch (const Error& e) {
    qWarning("reattach: %s", e.message().c_str());
    return;
  }
  for (const RunRecord& r : runs) {
    if (m_jobs.contains(r.id)) continue;
    if (r.status != RunStatus::Completed) {
      // Submitted to Slurm: squeue says how it goes, not a pid on this host.
      try {
        const std::string cluster = runCluster(*m_store, r.id);
        const std::optional<std::int64_t> slurmJob = cluster.empty() ? std::nullopt : lastSlurmJob(*m_store, r.id);
        if (slurmJob) {
          if (r.status == RunStatus::Running || r.status == RunStatus::Queued)
            followOnCluster(r, QString::fromStdString(cluster), *slurmJob);
          else
            m_clusterCandidates.insert(r.id, {QString::fromStdString(cluster), *slurmJob});
          continue;
        }
      } catch (const Error& e) {
        qWarning("reattach: %s", e.message().c_str());
      }
    }
    if (r.status == RunStatus::Running) {
      // The same lease rule as `latentlab-engine runs list`: live owner or crashed.
      if (checkLease(r, storeNow()).state == LeaseState::Live && r.pid) {
        JobInfo job;
        job.runId = r.id;
        job.name = QString::fromStdString(r.name);
        job.device = QString::fromStdString(r.device);
        job.pid = *r.pid;
        job.external = true;
        job.status = RunStatus::Running;
        job.steps = specSteps(QString::fromStdString(r.specJson));
        job.startedAt =
            r.startedAt ? QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(*r.startedAt * 1000)) : QDateTime();
        job.log.push_back(QStringLiteral("reattached to engine process %1").arg(job.pid));
        m_jobs.insert(r.id, job);
        m_order.push_back(r.id);
        Q_EMIT jobsChanged();
        Q_EMIT statusChanged(r.id, job.status);
      } else {
        const QString why = QStringLiteral("engine process ended unexpectedly (found dead on reopening)");
        markInStore(r.id, RunStatus::Crashed, why);
        Q_EMIT statusChanged(r.id, RunStatus::Crashed);
      }
    }
  }
  if (enqueueQueued) {
    for (const RunRecord& r : runs) {
      if (r.status == RunStatus::Queued && !m_jobs.contains(r.id)) enqueue(r.id);
    }
  }
  if (!m_externalTimer.isActive()) m_externalTimer.start();
  pollExternal();
  if (!m_clusterCandidates.isEmpty()) {
    if (!m_clusterTimer.isActive()) m_clusterTimer.start();  // asked again if squeue fails now
    pollCluster();
  }
}

void JobController::readStoreProgress(JobInfo& j) {
  const qint64 id = j.runId;
  const auto last = m_store->lastStep(id, "train/loss");
  if (!last) return;
  // The newest rows: step, loss, tokens, and the pace of this stretch.
  auto pts = m_store->rowsSince(id, "train/loss", std::max<std::int64_t>(-1, *last - 64));
  j.step = *last;
  if (!pts.empty()) {
    j.loss = pts.back().value;
    j.hasLoss = true;
    j.tokens = pts.back().tokens;
    j.storeStepsPerSec = storePace(pts);
  }
  if (auto speedStep = m_store->lastStep(id, "tokens_per_s")) {
    const auto speed = m_store->rowsSince(id, "tokens_per_s", *speedStep - 1);
    if (!speed.empty()) j.tokensPerSec = speed.back().value;
  }
  j.observe(j.step, QDateTime::currentMSecsSinceEpoch());
  Q_EMIT progress(id, j.step, j.steps, j.tokens, j.loss, j.tokensPerSec);
}

void JobController::pollExternal() {
  for (qint64 id : m_order) {
    JobInfo& j = m_jobs[id];
    if (j.onCluster() && j.isActive() && j.slurmJob != 0) {
      // Between squeue's answers, the store: progress, and running once an engine holds the run.
      try {
        readStoreProgress(j);
        if (observedStatus(m_store->run(id), storeNow()) == RunStatus::Running) {
          setJobStatus(j, RunStatus::Running);
          // Started since squeue last answered: ask again for its state and nodes.
          if (j.slurmState != QLatin1String("RUNNING")) pollCluster();
        }
      } catch (const Error& e) {
        qWarning("run %lld: %s", static_cast<long long>(id), e.message().c_str());
      }
      Q_EMIT jobUpdated(id);
      continue;
    }
    if (!j.external || j.status != RunStatus::Running) continue;
    try {
      readStoreProgress(j);
      const RunRecord r = m_store->run(id);
      if (observedStatus(r, storeNow()) != RunStatus::Running) {
        if (r.status == RunStatus::Running) {
          markInStore(id, RunStatus::Crashed, QStringLiteral("engine process ended unexpectedly"));
        }
        setJobStatus(j, m_store->run(id).status);
        Q_EMIT finished(id, r.status == RunStatus::Completed ? 0 : r.status == RunStatus::Cancelled ? 2 : 1);
        QTimer::singleShot(0, this, &JobController::schedule);  // jobs waiting for it may start
      }
    } catch (const Error& e) {
      qWarning("run %lld: %s", static_cast<long long>(id), e.message().c_str());
    }
    Q_EMIT jobUpdated(id);
  }
}

void JobController::detachAll() {
  for (auto it = m_children.begin(); it != m_children.end(); ++it) {
    QProcess* p = it.value()->process;
    if (p == nullptr) continue;
    disconnect(p, nullptr, this, nullptr);
    p->setParent(nullptr);  // deliberately not deleted: deleting a QProcess kills its child
    p->closeWriteChannel();
    for (const auto& f : it.value()->followers) {
      if (f == nullptr) continue;
      disconnect(f, nullptr, this, nullptr);
      f->setParent(nullptr);
    }
  }
  m_children.clear();
}

}  // namespace latentlab::ui
