// Job queue and child processes: see job_controller.h.
#include "jobs/job_controller.h"

#include <optional>

#include <cmath>
#include <csignal>

#include "jobs/engine_process.h"
#include "jobs/job_placement.h"
#include "latentlab/error.h"
#include "latentlab/memory_plan.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"
#include "models/spec_diff.h"

namespace latentlab::ui {

namespace {

constexpr int kMaxLogLines = 2000;

QString statusName(RunStatus s) {
  return QString::fromLatin1(runStatusName(s));
}

}  // namespace

void JobInfo::observe(qint64 newStep, qint64 nowMs) {
  if (!pace.isEmpty() && newStep < pace.back().second) pace.clear();  // restarted from a checkpoint
  if (pace.isEmpty() || pace.back().second != newStep) pace.push_back({nowMs, newStep});
  constexpr qint64 kWindowMs = 60'000;
  while (pace.size() > 2 && nowMs - pace.front().first > kWindowMs) pace.pop_front();
}

double JobInfo::etaSeconds() const {
  if (status != RunStatus::Running || steps <= 0 || step <= 0) return -1;
  const double left = static_cast<double>(steps - step);
  if (left <= 0) return 0;
  if (pace.size() >= 2) {
    const auto& a = pace.front();
    const auto& b = pace.back();
    if (b.second > a.second && b.first > a.first) {
      const double stepsPerSec =
          static_cast<double>(b.second - a.second) / (static_cast<double>(b.first - a.first) / 1000.0);
      return left / stepsPerSec;
    }
  }
  if (storeStepsPerSec > 0) return left / storeStepsPerSec;
  return -1;
}

JobController::JobController(std::shared_ptr<RunStore> store, QString workspaceDir, QString enginePath, QObject* parent)
    : QObject(parent),
      m_store(std::move(store)),
      m_workspaceDir(std::move(workspaceDir)),
      m_enginePath(std::move(enginePath)),
      m_logs(m_workspaceDir) {
  qRegisterMetaType<latentlab::RunStatus>("latentlab::RunStatus");  // statusChanged's argument, queued and spied
  m_externalTimer.setInterval(2000);
  connect(&m_externalTimer, &QTimer::timeout, this, &JobController::pollExternal);
  m_clusterTimer.setInterval(5000);
  connect(&m_clusterTimer, &QTimer::timeout, this, &JobController::pollCluster);
}

JobController::~JobController() {
  for (auto it = m_children.begin(); it != m_children.end(); ++it) {
    QProcess* p = it.value()->process;
    if (p == nullptr) continue;
    disconnect(p, nullptr, this, nullptr);
    for (const auto& f : it.value()->followers) killProcess(f);
    if (p->state() != QProcess::NotRunning) {
      p->kill();
      p->waitForFinished(3000);
      markInStore(it.key(), RunStatus::Cancelled, QStringLiteral("stopped when LatentLab closed"));
    }
  }
  // An sbatch still to answer: its job id is recorded, or a reopened
  // workbench would not know the job and submit the run again.
  m_closing = true;
  for (QProcess* p : findChildren<QProcess*>()) {
    if (p->objectName() == QLatin1String("sbatch") && p->state() != QProcess::NotRunning) p->waitForFinished(15000);
  }
  // Ranks 1.. of data-parallel jobs whose rank 0 has finished: they end by
  // themselves right after it; give them a moment before the hard stop.
  for (QProcess* p : findChildren<QProcess*>()) {
    disconnect(p, nullptr, this, nullptr);
    if (p->state() != QProcess::NotRunning && !p->waitForFinished(2000)) {
      p->kill();
      p->waitForFinished(1000);
    }
  }
}

const JobInfo* JobController::job(qint64 runId) const {
  auto it = m_jobs.constFind(runId);
  return it == m_jobs.constEnd() ? nullptr : &it.value();
}

int JobController::runningCount() const {
  int n = 0;
  for (const auto& j : m_jobs) n += j.status == RunStatus::Running ? 1 : 0;
  return n;
}

int JobController::activeCount() const {
  int n = 0;
  for (const auto& j : m_jobs) n += j.isActive() ? 1 : 0;
  return n;
}

qint64 JobController::processId(qint64 runId) const {
  auto it = m_children.constFind(runId);
  if (it == m_children.constEnd() || it.value()->process == nullptr) return 0;
  return it.value()->process->processId();
}

QStringList JobController::rankDevices(const QString& device) {
  return rankDevicesOf(device);
}

QList<qint64> JobController::rankProcessIds(qint64 runId) const {
  QList<qint64> out;
  auto it = m_children.constFind(runId);
  if (it == m_children.constEnd()) return out;
  out.push_back(it.value()->process != nullptr ? it.value()->process->processId() : 0);
  for (const auto& f : it.value()->followers) out.push_back(f != nullptr ? f->processId() : 0);
  return out;
}

void JobController::setDevices(const std::vector<DeviceInfo>& devices, const QString& runOn) {
  m_devices = devices;
  m_runOn = runOn;
  schedule();
}

bool JobController::markInStore(qint64 runId, RunStatus target, const QString& error) {
  try {
    const RunStatus now = m_store->run(runId).status;
    if (isTerminal(now) && isTerminal(target)) return false;  // the engine already recorded how it ended
    m_store->setStatus(runId, target, error.isEmpty() ? std::nullopt : std::optional<std::string>(error.toStdString()));
    if (isTerminal(target)) m_store->setPid(runId, std::nullopt);
    return true;
  } catch (const Error& e) {
    qWarning("run %lld: %s", static_cast<long long>(runId), e.message().c_str());
    return false;
  }
}

void JobController::enqueue(qint64 runId, qint64 after) {
  m_logs.close(runId);  // a retry writes to the log as it is now (its folder may have been removed)
  RunRecord rec;
  QString cluster;
  try {
    rec = m_store->run(runId);
    if (m_jobs.contains(runId) && m_jobs[runId].isActive()) return;
    if (rec.status == RunStatus::Running) return;  // someone else runs it (reattach() follows those)
    if (rec.status != RunStatus::Queued) m_store->setStatus(runId, RunStatus::Queued);
    if (after != 0) m_store->addTag(runId, "after:" + std::to_string(after));
    for (const std::string& tag : m_store->tags(runId)) {
      if (after == 0 && tag.rfind("after:", 0) == 0) after = QString::fromStdString(tag.substr(6)).toLongLong();
      if (tag.rfind("cluster:", 0) == 0) cluster = QString::fromStdString(tag.substr(8));
    }
  } catch (const Error& e) {
    qWarning("cannot queue run %lld: %s", static_cast<long long>(runId), e.message().c_str());
    return;
  }
  const bool isNew = !m_jobs.contains(runId);
  JobInfo& job = m_jobs[runId];
  const QStringList oldLog = job.log;
  job = JobInfo{};
  job.runId = runId;
  job.name = QString::fromStdString(rec.name);
  job.device = QString::fromStdString(rec.device.empty() ? std::string("cpu") : rec.device);
  job.log = oldLog;
  job.after = after;
  job.cluster = cluster;
  if (job.onCluster()) job.steps = specSteps(QString::fromStdString(rec.specJson));  // no progress events from Slurm
  if (isNew) {
    m_order.push_back(runId);
    Q_EMIT jobsChanged();
  }
  // Said even when the job was queued before (a retry): every enqueue is a new start.
  job.status = RunStatus::Queued;
  Q_EMIT statusChanged(runId, RunStatus::Queued);
  schedule();
}

void JobController::cancel(qint64 runId) {
  auto it = m_jobs.find(runId);
  if (it == m_jobs.end() || !it->isActive()) return;
  JobInfo& job = it.value();
  if (job.onCluster() && (job.slurmJob != 0 || job.slurmState == QLatin1String("submitting"))) {
    cancelOnCluster(job);
    return;
  }
  if (job.status == RunStatus::Queued) {
    markInStore(runId, RunStatus::Cancelled, {});
    setJobStatus(job, RunStatus::Cancelled);
    Q_EMIT finished(runId, 2);
    schedule();  // jobs waiting for it are cancelled in turn
    return;
  }
  job.cancelRequested = true;
  appendLog(job, QStringLiteral("cancel requested"));
  if (job.external) {
    std::string host;
    try {
      host = m_store->run(runId).ownerHost;
    } catch (const Error&) {
    }
    if (!host.empty() && host != ProcessIdentity::current().host) {
      // Its pid means another process here: nothing is signalled.
      appendLog(job, QStringLiteral("the engine runs on host %1: stop it there").arg(QString::fromStdString(host)));
      job.cancelRequested = false;
      Q_EMIT jobUpdated(runId);
      return;
    }
    if (job.pid > 0) ::kill(static_cast<pid_t>(job.pid), SIGTERM);  // the engine treats SIGTERM like "cancel"
    return;
  }
  auto child = m_children.value(runId);
  if (child == nullptr || child->process == nullptr) return;
  QPointer<QProcess> proc = child->process;
  proc->write("cancel\n");  // rank 0 passes the stop to the other ranks at the next step
  QTimer::singleShot(m_cancelTimeoutMs, this, [this, runId, proc, child] {
    for (const auto& f : child->followers) killProcess(f);
    if (proc == nullptr || proc->state() == QProcess::NotRunning) return;
    child->killedAfterCancel = true;
    auto j = m_jobs.find(runId);
    if (j != m_jobs.end()) appendLog(j.value(), QStringLiteral("the engine did not stop in time: killed"));
    proc->kill();
  });
  Q_EMIT jobUpdated(runId);
}

bool JobController::prerequisiteMet(JobInfo& job) {
  RunStatus status = RunStatus::Failed;
  try {
    status = m_store->run(job.after).status;
  } catch (const Error&) {
    // deleted: treated as not completed
  }
  if (status == RunStatus::Completed) return true;
  if (status == RunStatus::Queued || status == RunStatus::Running) return false;
  const QString why =
      QStringLiteral("run %1, which this run waited for, ended %2").arg(job.after).arg(statusName(status));
  markInStore(job.runId, RunStatus::Cancelled, why);
  job.error = why;
  appendLog(job, why);
  setJobStatus(job, RunStatus::Cancelled);
  Q_EMIT finished(job.runId, 2);
  return false;
}

void JobController::schedule() {
  SlotPool pool(m_cpuSlots);
  for (const auto& j : m_jobs)
    if (j.status == RunStatus::Running && !j.onCluster()) pool.hold(j.device);
  for (qint64 id : m_order) {
    JobInfo& j = m_jobs[id];
    if (j.status != RunStatus::Queued) continue;
    if (j.after != 0 && !prerequisiteMet(j)) continue;
    if (j.onCluster()) {
      if (j.slurmJob == 0 && j.slurmState.isEmpty()) submitToCluster(j);  // Slurm places it
      continue;
    }
    if (j.device == QLatin1String("cuda") && !m_devices.empty()) {
      // "cuda": the free GPU with the most memory that the plan says holds the run.
      std::string chosen = "cuda";
      try {
        chosen = placeOnGpu(m_store->run(j.runId).specJson, j.runId, m_devices, pool.busySlots());
      } catch (const Error&) {
        // The run is gone from the store: the engine says so when it starts.
      }
      if (chosen.empty()) continue;  // waits for a GPU that holds it
      j.device = QString::fromStdString(chosen);
      appendLog(j, QStringLiteral("device: %1").arg(j.device));
    }
    // A data-parallel job starts when every one of its devices has room.
    if (!pool.fits(j.device)) continue;
    pool.hold(j.device);
    start(j);
  }
}

QProcess* JobController::spawnEngine(qint64 runId, const QString& device, int rank, int worldSize, int port) {
  EngineLaunch launch;
  launch.enginePath = m_enginePath;
  launch.dbPath = QString::fromStdString(m_store->path().string());
  launch.workspaceDir = m_workspaceDir;
  launch.runId = runId;
  launch.device = device;
  launch.rank = rank;
  launch.worldSize = worldSize;
  launch.port = port;
  QProcess* proc = newEngineProcess(launch, this);
  connect(proc, &QProcess::errorOccurred, this, [this, runId](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) onStartFailed(runId);
  });
  return proc;
}

void JobController::start(JobInfo& job) {
  const qint64 runId = job.runId;
  auto child = std::make_shared<Child>();
  QStringList devices = rankDevices(job.device);
  const int world = static_cast<int>(devices.size());
  const int port = world > 1 ? freeLoopbackPort() : 0;
  if (!m_runOn.isEmpty()) {
    appendLog(job, QStringLiteral("simulated pool: %1 run on %2").arg(devices.join(QLatin1Char(',')), m_runOn));
    for (QString& d : devices) d = m_runOn;
  }
  QProcess* proc = spawnEngine(runId, devices[0], 0, world, port);
  child->process = proc;
  m_children.insert(runId, child);
  connect(proc, &QProcess::readyReadStandardOutput, this, [this, runId] { onStdout(runId); });
  connect(proc, &QProcess::readyReadStandardError, this, [this, runId] { onStderr(runId); });
  connect(proc, &QProcess::finished, this,
          [this, runId](int code, QProcess::ExitStatus st) { onFinished(runId, code, st); });
  for (int rank = 1; rank < world; ++rank) {
    QProcess* f = spawnEngine(runId, devices[rank], rank, world, port);
    f->setProcessChannelMode(QProcess::MergedChannels);
    child->followers.push_back(f);
    connect(f, &QProcess::readyReadStandardOutput, this, [this, runId, f, rank] {
      auto it = m_jobs.find(runId);
      if (it == m_jobs.end()) return;
      for (const QByteArray& line : f->readAllStandardOutput().split('\n')) {
        if (!line.trimmed().isEmpty())
          appendLog(it.value(), QStringLiteral("[rank %1] %2").arg(rank).arg(QString::fromUtf8(line)));
      }
    });
    connect(f, &QProcess::finished, this,
            [this, runId, rank](int code, QProcess::ExitStatus st) { onFollowerFinished(runId, rank, code, st); });
  }
  job.startedAt = QDateTime::currentDateTime();
  setJobStatus(job, RunStatus::Running);
  appendLog(job, QStringLiteral("$ %1 %2").arg(m_enginePath, proc->arguments().join(QLatin1Char(' '))));
  if (world > 1) {
    appendLog(job, QStringLiteral("data parallel: %1 ranks on %2, rendezvous 127.0.0.1:%3")
                       .arg(world)
                       .arg(devices.join(QStringLiteral(", ")))
                       .arg(port));
  }
  proc->start();
  for (const auto& f : child->followers) f->start();
}

void JobController::onFollowerFinished(qint64 runId, int rank, int exitCode, QProcess::ExitStatus exitStatus) {
  auto child = m_children.value(runId);
  if (child == nullptr) return;
  if (exitStatus == QProcess::NormalExit && exitCode == 0) return;
  // One rank gone means the job cannot go on: stop rank 0 now instead of at
  // its collective timeout, and say which rank ended it.
  if (child->followerFailure.isEmpty()) {
    child->followerFailure = exitStatus == QProcess::CrashExit
                                 ? QStringLiteral("rank %1 ended unexpectedly (signal %2)").arg(rank).arg(exitCode)
                                 : QStringLiteral("rank %1 exited with code %2").arg(rank).arg(exitCode);
  }
  // The job may have left the table already (rank 0 finished first): then
  // there is nothing to log to and no cancel request to honour.
  auto it = m_jobs.find(runId);
  const bool cancelRequested = it != m_jobs.end() && it->cancelRequested;
  if (it != m_jobs.end()) appendLog(it.value(), child->followerFailure);
  if (!child->killedAfterCancel && !cancelRequested) killProcess(child->process);
}

void JobController::onStartFailed(qint64 runId) {
  auto it = m_jobs.find(runId);
  if (it == m_jobs.end() || it->status != RunStatus::Running) return;  // once per job, whichever rank failed
  if (auto child = m_children.value(runId)) {
    for (const auto& f : child->followers) killProcess(f);
  }
  const QString why = QStringLiteral("cannot start the engine %1 (set LATENTLAB_ENGINE to its path)").arg(m_enginePath);
  it->error = why;
  appendLog(it.value(), why);
  markInStore(runId, RunStatus::Failed, why);
  setJobStatus(it.value(), RunStatus::Failed);
  if (auto child = m_children.take(runId); child && child->process) child->process->deleteLater();
  Q_EMIT finished(runId, -1);
  schedule();
}

void JobController::onStdout(qint64 runId) {
  auto child = m_children.value(runId);
  auto it = m_jobs.find(runId);
  if (child == nullptr || child->process == nullptr || it == m_jobs.end()) return;
  for (const EngineEvent& ev : child->parser.feed(child->process->readAllStandardOutput())) handleEvent(it.value(), ev);
}

void JobController::onStderr(qint64 runId) {
  auto child = m_children.value(runId);
  auto it = m_jobs.find(runId);
  if (child == nullptr || child->process == nullptr || it == m_jobs.end()) return;
  const QByteArray bytes = child->process->readAllStandardError();
  child->stderrTail = (child->stderrTail + bytes).right(4000);
  for (const QByteArray& line : bytes.split('\n')) {
    if (!line.trimmed().isEmpty()) appendLog(it.value(), QString::fromUtf8(line));
  }
}

void JobController::handleEvent(JobInfo& job, const EngineEvent& ev) {
  using K = EngineEvent::Kind;
  switch (ev.kind) {
    case K::Hello:
      job.pid = ev.pid;
      break;
    case K::Status:
      if (!ev.error.isEmpty()) job.error = ev.error;
      appendLog(job, QStringLiteral("status: %1%2")
                         .arg(ev.status,
                              ev.error.isEmpty() ? QString() : QStringLiteral(" (") + ev.error + QLatin1Char(')')));
      try {
        setJobStatus(job, parseRunStatus(ev.status.toStdString()));
      } catch (const Error&) {
        appendLog(job, QStringLiteral("unknown status '%1'").arg(ev.status));  // a newer engine's
      }
      return;
    case K::Progress:
      job.step = ev.step;
      job.steps = ev.steps;
      job.tokens = ev.tokens;
      job.loss = ev.loss;
      job.hasLoss = ev.hasLoss;
      job.tokensPerSec = ev.tokensPerSec;
      job.observe(ev.step, QDateTime::currentMSecsSinceEpoch());
      Q_EMIT progress(job.runId, ev.step, ev.steps, ev.tokens, ev.loss, ev.tokensPerSec);
      break;
    case K::Eval:
      job.valLoss = ev.valLoss;
      appendLog(job, QStringLiteral("eval at step %1: val loss %2").arg(ev.step).arg(ev.valLoss, 0, 'f', 4));
      Q_EMIT evalReported(job.runId, ev.step, ev.valLoss);
      break;
    case K::EvalTask:
      appendLog(job, QStringLiteral("%1 at step %2: acc %3, acc_norm %4 over %5 items")
                         .arg(ev.task)
                         .arg(ev.step)
                         .arg(ev.acc, 0, 'f', 4)
                         .arg(ev.accNorm, 0, 'f', 4)
                         .arg(ev.items));
      break;
    case K::Checkpoint:
      appendLog(job, QStringLiteral("checkpoint at step %1: %2").arg(ev.step).arg(ev.path));
      break;
    case K::Log:
      appendLog(job, QStringLiteral("[%1] %2").arg(ev.level, ev.message));
      break;
    case K::Unknown:
    case K::Malformed:
      appendLog(job, ev.message);
      break;
  }
  Q_EMIT jobUpdated(job.runId);
}

void JobController::onFinished(qint64 runId, int exitCode, QProcess::ExitStatus exitStatus) {
  auto child = m_children.take(runId);
  auto it = m_jobs.find(runId);
  if (child == nullptr || it == m_jobs.end()) return;
  JobInfo& job = it.value();
  // Rank 0 is done: a follower still running after a failure has nobody to talk to.
  if (exitStatus != QProcess::NormalExit || exitCode != 0) {
    for (const auto& f : child->followers) killProcess(f);
  }
  if (child->process != nullptr) {
    for (const EngineEvent& ev : child->parser.feed(child->process->readAllStandardOutput())) handleEvent(job, ev);
    for (const EngineEvent& ev : child->parser.finish()) handleEvent(job, ev);
    child->process->deleteLater();
  }
  job.exitCode = exitCode;
  int reported = exitCode;
  if (exitStatus == QProcess::CrashExit) {
    reported = -exitCode;  // -N: ended by signal N
    if (child->killedAfterCancel) {
      const QString why =
          QStringLiteral("did not stop within %1 s after cancel; killed").arg(m_cancelTimeoutMs / 1000.0);
      markInStore(runId, RunStatus::Cancelled, why);
      job.error = why;
      setJobStatus(job, RunStatus::Cancelled);
    } else {
      const QString why = child->followerFailure.isEmpty()
                              ? QStringLiteral("engine process ended unexpectedly (signal %1)").arg(exitCode)
                              : QStringLiteral("data-parallel job stopped: %1").arg(child->followerFailure);
      markInStore(runId, RunStatus::Crashed, why);
      job.error = why;
      appendLog(job, why);
      setJobStatus(job, RunStatus::Crashed);
    }
  } else {
    // The engine records its own terminal status; one that exits before doing
    // so (bad arguments, unreadable DB) leaves the run to be marked here.
    std::optional<RunStatus> stored;
    std::optional<std::int64_t> otherOwner;
    try {
      const RunRecord rec = m_store->run(runId);
      stored = rec.status;
      // An engine refused because another live engine owns the run: that
      // engine records the outcome; the job follows it like a reattached one.
      if (rec.status == RunStatus::Running && checkLease(rec, storeNow()).state == LeaseState::Live)
        otherOwner = rec.pid;
    } catch (const Error&) {
    }
    if (otherOwner) {
      appendLog(job, QString::fromUtf8(child->stderrTail).trimmed().section(QLatin1Char('\n'), -1));
      job.external = true;
      job.pid = *otherOwner;
      if (!m_externalTimer.isActive()) m_externalTimer.start();
    } else if (stored == RunStatus::Running || stored == RunStatus::Queued) {
      const QString why = exitCode == 0 ? QStringLiteral("the engine exited without a final status")
                                        : QString::fromUtf8(child->stderrTail).trimmed().section(QLatin1Char('\n'), -1);
      const RunStatus st = exitCode == 2 ? RunStatus::Cancelled : RunStatus::Failed;
      markInStore(runId, st, why.isEmpty() ? QStringLiteral("the engine exited with code %1").arg(exitCode) : why);
      stored = st;
      job.error = why;
    }
    if (stored) setJobStatus(job, *stored);
  }
  appendLog(job, QStringLiteral("engine exited (%1)")
                     .arg(exitStatus == QProcess::CrashExit ? QStringLiteral("signal %1").arg(exitCode)
                                                            : QStringLiteral("code %1").arg(exitCode)));
  m_logs.close(runId);  // the job's last line: a retry opens its log afresh
  Q_EMIT finished(runId, reported);
  schedule();
}

void JobController::setJobStatus(JobInfo& job, RunStatus status) {
  if (job.status == status) return;
  job.status = status;
  if (isTerminal(status)) m_logs.close(job.runId);  // a later line reopens it
  Q_EMIT statusChanged(job.runId, status);
  Q_EMIT jobUpdated(job.runId);
}

void JobController::appendLog(JobInfo& job, const QString& line) {
  job.log.push_back(line);
  if (job.log.size() > kMaxLogLines) job.log.removeFirst();
  m_logs.append(job.runId, line);
  Q_EMIT logLine(job.runId, line);
}

void JobController::clearFinished() {
  QVector<qint64> keep;
  for (qint64 id : m_order) {
    if (m_jobs[id].isActive())
      keep.push_back(id);
    else {
      m_jobs.remove(id);
      m_logs.close(id);
    }
  }
  if (keep.size() != m_order.size()) {
    m_order = keep;
    Q_EMIT jobsChanged();
  }
}

}  // namespace latentlab::ui
