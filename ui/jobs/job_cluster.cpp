// The job controller's Slurm back end (see job_controller.h): a run tagged
// "cluster:<profile>" is submitted with sbatch and the profile's batch script
// (the one `latentlab-engine submit` writes), followed by squeue for its
// state and node list and by the store for its progress and outcome,
// cancelled with scancel, and submitted anew on retry; the ranks resume the
// run from its last checkpoint. Slurm's commands run asynchronously, so a
// slow controller never stalls the window.
#include <QDateTime>
#include <QFile>
#include <QHash>
#include <QProcess>
#include <algorithm>
#include <functional>

#include "jobs/job_controller.h"
#include "latentlab/error.h"
#include "latentlab/run_store.h"
#include "latentlab/slurm.h"
#include "models/spec_diff.h"

namespace latentlab::ui {

namespace {

namespace fs = std::filesystem;

const QString kSubmitting = QStringLiteral("submitting");
const QString kEnded = QStringLiteral("ended");

// The last lines of a job's output file (at most `count`, from its last 16 KiB):
// what the engine, srun or the batch script said last.
QStringList outputTail(const QString& workspace, qint64 runId, qint64 slurmJob, int count) {
  QFile out(QStringLiteral("%1/runs/%2/slurm-%3.out").arg(workspace).arg(runId).arg(slurmJob));
  if (!out.open(QIODevice::ReadOnly)) return {};
  if (out.size() > 16384) out.seek(out.size() - 16384);
  QStringList lines;
  for (const QByteArray& line : out.readAll().split('\n')) {
    if (!line.trimmed().isEmpty()) lines << QString::fromUtf8(line).trimmed();
  }
  return lines.mid(std::max<qsizetype>(0, lines.size() - count));
}

// The cause, as the output's end tells it: the first of its last lines that
// says "error:" (the engine's own, or slurmstepd's execve; srun's "tasks
// exited" follows them), else its last line.
QString causeInOutput(const QString& workspace, qint64 runId, qint64 slurmJob) {
  const QStringList tail = outputTail(workspace, runId, slurmJob, 20);
  for (const QString& line : tail) {
    if (line.contains(QLatin1String("error:"), Qt::CaseInsensitive)) return line;
  }
  return tail.isEmpty() ? QString() : tail.back();
}

// A Slurm command started for the controller: its merged output and exit
// code reach `done`; a command that cannot start reaches it with -1.
void runSlurmCommand(QObject* owner, const QString& program, const QStringList& args,
                     std::function<void(int code, const QString& output)> done) {
  auto* proc = new QProcess(owner);
  proc->setObjectName(program);  // the controller's destructor waits for an sbatch
  proc->setProcessChannelMode(QProcess::MergedChannels);
  QObject::connect(proc, &QProcess::finished, owner, [proc, done](int code, QProcess::ExitStatus status) {
    proc->deleteLater();
    done(status == QProcess::NormalExit ? code : -1, QString::fromUtf8(proc->readAll()).trimmed());
  });
  QObject::connect(proc, &QProcess::errorOccurred, owner, [proc, program, done](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;  // the other errors end in finished()
    proc->deleteLater();
    done(-1, QStringLiteral("%1 is not on PATH: the workbench places runs on a cluster from a host with Slurm's "
                            "commands (a login node)")
                 .arg(program));
  });
  proc->start(program, args);
}

}  // namespace

QString JobInfo::placement() const {
  if (!onCluster()) return device;
  if (slurmJob == 0) {
    return slurmState == kSubmitting ? QStringLiteral("Slurm (%1): submitting").arg(cluster)
                                     : QStringLiteral("Slurm (%1)").arg(cluster);
  }
  QString s =
      QStringLiteral("Slurm %1 · %2").arg(slurmJob).arg(slurmState.isEmpty() ? QStringLiteral("…") : slurmState);
  if (!slurmNodes.isEmpty()) {
    s += QStringLiteral(" · ") + slurmNodes;  // where it ran, also once it ended
  } else if (!slurmReason.isEmpty() && slurmReason != QLatin1String("None") && slurmState != kEnded) {
    s += QStringLiteral(" (%1)").arg(slurmReason);
  }
  return s;
}

void JobController::failCluster(JobInfo& job, const QString& why) {
  markInStore(job.runId, RunStatus::Failed, why);
  endClusterJob(job, RunStatus::Failed, why);
}

void JobController::submitToCluster(JobInfo& job) {
  const qint64 runId = job.runId;
  QString script;
  std::string profileName;
  try {
    const ClusterProfile profile = readClusterProfile(job.cluster.toStdString(), m_workspaceDir.toStdString());
    profileName = profile.name;
    const fs::path engine = engineOnNodes(profile, m_enginePath.toStdString());
    script = QString::fromStdString(
        writeBatchScript(profile, m_store->path(), runId, engine, m_workspaceDir.toStdString()).string());
  } catch (const Error& e) {
    failCluster(job, QString::fromStdString(e.message()));
    return;
  }
  job.slurmState = kSubmitting;
  job.startedAt = QDateTime::currentDateTime();
  appendLog(job, QStringLiteral("$ sbatch --parsable %1").arg(script));
  runSlurmCommand(this, QStringLiteral("sbatch"), {QStringLiteral("--parsable"), script},
                  [this, runId, script, profileName](int code, const QString& answer) {
                    auto it = m_jobs.find(runId);
                    if (it == m_jobs.end()) return;
                    JobInfo& j = it.value();
                    const auto id = code == 0 ? parseSbatchAnswer(answer.toStdString()) : std::nullopt;
                    if (!id) {
                      const QString why = QStringLiteral("sbatch refused %1: %2")
                                              .arg(script, answer.isEmpty() ? QStringLiteral("(no output)") : answer);
                      if (!j.cancelRequested) {
                        failCluster(j, why);
                        return;
                      }
                      markInStore(runId, RunStatus::Cancelled, why);  // cancelled meanwhile: as asked
                      endClusterJob(j, RunStatus::Cancelled, why);
                      return;
                    }
                    j.slurmJob = *id;
                    j.slurmSubmittedMs = QDateTime::currentMSecsSinceEpoch();
                    j.slurmState = QStringLiteral("submitted");  // squeue's first answer says more
                    try {
                      recordSlurmSubmission(*m_store, runId, *id, profileName, script.toStdString());
                    } catch (const Error& e) {
                      appendLog(j, QString::fromStdString(e.message()));
                    }
                    appendLog(j, QStringLiteral("submitted to Slurm as job %1 (cluster profile %2)")
                                     .arg(*id)
                                     .arg(QString::fromStdString(profileName)));
                    if (j.cancelRequested) cancelOnCluster(j);  // cancelled while sbatch ran
                    Q_EMIT jobUpdated(runId);
                    if (m_closing) return;
                    if (!m_clusterTimer.isActive()) m_clusterTimer.start();
                    if (!m_externalTimer.isActive()) m_externalTimer.start();  // the store, between squeue's answers
                    pollCluster();
                  });
  Q_EMIT jobUpdated(runId);
}

void JobController::followOnCluster(const RunRecord& run, const QString& cluster, qint64 slurmJob) {
  JobInfo job;
  job.runId = run.id;
  job.name = QString::fromStdString(run.name);
  job.device = QString::fromStdString(run.device);
  job.cluster = cluster;
  job.slurmJob = slurmJob;
  job.status = run.status == RunStatus::Running ? RunStatus::Running : RunStatus::Queued;
  job.steps = specSteps(QString::fromStdString(run.specJson));
  job.startedAt =
      run.startedAt ? QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(*run.startedAt * 1000)) : QDateTime();
  job.log.push_back(QStringLiteral("following Slurm job %1 (cluster profile %2)").arg(slurmJob).arg(cluster));
  m_jobs.insert(run.id, job);
  m_order.push_back(run.id);
  Q_EMIT jobsChanged();
  Q_EMIT statusChanged(run.id, job.status);
  if (!m_clusterTimer.isActive()) m_clusterTimer.start();
  if (!m_externalTimer.isActive()) m_externalTimer.start();
  QTimer::singleShot(0, this, &JobController::pollCluster);
}

void JobController::cancelOnCluster(JobInfo& job) {
  job.cancelRequested = true;
  Q_EMIT jobUpdated(job.runId);
  if (job.slurmJob == 0) return;  // sbatch has not answered: cancelled when it does
  const qint64 runId = job.runId;
  const QString id = QString::number(job.slurmJob);
  appendLog(job, QStringLiteral("cancel requested: scancel %1").arg(id));
  runSlurmCommand(this, QStringLiteral("scancel"), {id}, [this, runId, id](int code, const QString& output) {
    auto it = m_jobs.find(runId);
    if (it == m_jobs.end() || code == 0) return;
    appendLog(it.value(), QStringLiteral("scancel %1 refused: %2").arg(id, output));
  });
}

void JobController::pollCluster() {
  if (m_closing) return;
  if (m_squeue != nullptr) {  // the last answer is still to come: ask again after it
    m_pollAgain = true;
    return;
  }
  bool any = !m_clusterCandidates.isEmpty();
  for (const JobInfo& j : m_jobs) any = any || (j.onCluster() && j.slurmJob != 0 && j.slurmState != kEnded);
  if (!any) {
    m_clusterTimer.stop();
    return;
  }
  // Every job of this user in one call: a job id Slurm has forgotten would
  // make `squeue --jobs` refuse the whole list.
  auto* proc = new QProcess(this);
  m_squeue = proc;
  const qint64 askedMs = QDateTime::currentMSecsSinceEpoch();
  connect(proc, &QProcess::finished, this, [this, proc, askedMs](int code, QProcess::ExitStatus status) {
    proc->deleteLater();
    m_squeue = nullptr;
    const QByteArray out = proc->readAllStandardOutput() + proc->readAllStandardError();
    if (status != QProcess::NormalExit) {
      onSqueue(-1, QByteArrayLiteral("no answer within 30 s"), askedMs);
    } else {
      onSqueue(code, out, askedMs);
    }
    if (m_pollAgain) {
      m_pollAgain = false;
      pollCluster();
    }
  });
  connect(proc, &QProcess::errorOccurred, this, [this, proc, askedMs](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    proc->deleteLater();
    m_squeue = nullptr;
    onSqueue(-1, QByteArrayLiteral("squeue is not on PATH"), askedMs);
  });
  QTimer::singleShot(30000, proc, [proc] { proc->kill(); });  // a controller that does not answer
  proc->start(QStringLiteral("squeue"),
              {QStringLiteral("--noheader"), QStringLiteral("--me"), QStringLiteral("--format=%1").arg(kSqueueFormat)});
}

void JobController::onSqueue(int exitCode, const QByteArray& out, qint64 askedMs) {
  if (exitCode != 0) {
    // Slurm's controller unreachable: the jobs keep their last state, and say why once.
    const QString why = QStringLiteral("squeue: %1").arg(QString::fromUtf8(out).trimmed());
    if (why == m_squeueError) return;
    m_squeueError = why;
    for (qint64 id : m_order) {
      JobInfo& j = m_jobs[id];
      if (j.onCluster() && j.isActive()) appendLog(j, why);
    }
    return;
  }
  m_squeueError.clear();
  // Only jobs named for their run: a job id Slurm has given again to another job is not the run's.
  QHash<qint64, SlurmJobState> listed;
  for (const SlurmJobState& s : parseSqueue(out.toStdString())) listed.insert(s.job, s);
  const auto ours = [&](qint64 job, qint64 runId) {
    auto it = listed.constFind(job);
    return it != listed.constEnd() && it->name == slurmJobName(runId) ? &it.value() : nullptr;
  };
  for (auto c = m_clusterCandidates.constBegin(); c != m_clusterCandidates.constEnd(); ++c) {
    if (ours(c->slurmJob, c.key()) == nullptr || m_jobs.contains(c.key())) continue;
    try {
      followOnCluster(m_store->run(c.key()), c->cluster, c->slurmJob);
    } catch (const Error& e) {
      qWarning("run %lld: %s", static_cast<long long>(c.key()), e.message().c_str());
    }
  }
  m_clusterCandidates.clear();
  for (qint64 id : m_order) {
    JobInfo& j = m_jobs[id];
    if (!j.onCluster() || j.slurmJob == 0 || j.slurmState == kEnded || !j.isActive()) continue;
    const SlurmJobState* state = ours(j.slurmJob, id);
    // An answer asked for before sbatch answered cannot list the job: the next one says.
    if (state == nullptr && j.slurmSubmittedMs >= askedMs) continue;
    try {
      updateFromCluster(j, state);
    } catch (const Error& e) {
      qWarning("run %lld: %s", static_cast<long long>(id), e.message().c_str());
    }
  }
}

// One job against squeue's answer: listed, its state, nodes and status
// (running once Slurm runs it or the engine holds the run, queued while it
// pends, also after a requeue); gone, the store's outcome, or why it ended
// without one.
void JobController::updateFromCluster(JobInfo& job, const SlurmJobState* listed) {
  const RunRecord run = m_store->run(job.runId);
  if (listed != nullptr) {
    const QString state = QString::fromStdString(listed->state);
    const QString nodes = QString::fromStdString(listed->nodes);
    const QString reason = QString::fromStdString(listed->reason);
    if (state != job.slurmState || nodes != job.slurmNodes) {
      appendLog(job, QStringLiteral("Slurm job %1: %2%3")
                         .arg(job.slurmJob)
                         .arg(state, !nodes.isEmpty() ? QStringLiteral(" on ") + nodes
                                     : reason.isEmpty() || reason == QLatin1String("None")
                                         ? QString()
                                         : QStringLiteral(" (%1)").arg(reason)));
    }
    job.slurmState = state;
    job.slurmNodes = nodes;
    job.slurmReason = reason;
    readStoreProgress(job);
    const bool slurmRuns = state == QLatin1String("RUNNING") || state == QLatin1String("CONFIGURING") ||
                           state == QLatin1String("COMPLETING");
    setJobStatus(job, slurmRuns || run.status == RunStatus::Running ? RunStatus::Running : RunStatus::Queued);
    Q_EMIT jobUpdated(job.runId);
    return;
  }
  readStoreProgress(job);
  if (isTerminal(run.status)) {
    endClusterJob(job, run.status, {});
    return;
  }
  if (run.status == RunStatus::Running) {
    if (checkLease(run, storeNow()).state == LeaseState::Live) return;  // its last rows are still coming
    const QString why = QStringLiteral("Slurm job %1 ended while the run was running: %2")
                            .arg(job.slurmJob)
                            .arg(causeInOutput(m_workspaceDir, job.runId, job.slurmJob));
    markInStore(job.runId, RunStatus::Crashed, why);
    endClusterJob(job, RunStatus::Crashed, why);
    return;
  }
  if (job.cancelRequested) {
    const QString why = QStringLiteral("cancelled before Slurm job %1 started it").arg(job.slurmJob);
    markInStore(job.runId, RunStatus::Cancelled, why);
    endClusterJob(job, RunStatus::Cancelled, why);
    return;
  }
  const QString last = causeInOutput(m_workspaceDir, job.runId, job.slurmJob);
  failCluster(job, QStringLiteral("Slurm job %1 ended before the run started%2")
                       .arg(job.slurmJob)
                       .arg(last.isEmpty() ? QString() : QStringLiteral(": ") + last));
}

void JobController::endClusterJob(JobInfo& job, RunStatus status, const QString& why) {
  job.slurmState = job.slurmJob != 0 ? kEnded : QString();
  if ((status == RunStatus::Failed || status == RunStatus::Crashed) && job.slurmJob != 0) {
    // The engine's own messages went to the job's output file, not to this log: its end, here.
    const QStringList tail = outputTail(m_workspaceDir, job.runId, job.slurmJob, 20);
    if (!tail.isEmpty()) appendLog(job, QStringLiteral("slurm-%1.out ends:").arg(job.slurmJob));
    for (const QString& line : tail) appendLog(job, QStringLiteral("  ") + line);
  }
  if (!why.isEmpty()) {
    job.error = why;
    appendLog(job, why);
  } else {
    try {
      const std::string error = m_store->run(job.runId).error;
      if (!error.empty()) job.error = QString::fromStdString(error);
    } catch (const Error&) {
    }
  }
  setJobStatus(job, status);
  Q_EMIT jobUpdated(job.runId);
  Q_EMIT finished(job.runId, status == RunStatus::Completed ? 0 : status == RunStatus::Cancelled ? 2 : 1);
  QTimer::singleShot(0, this, &JobController::schedule);  // jobs waiting for it may start
}

}  // namespace latentlab::ui
