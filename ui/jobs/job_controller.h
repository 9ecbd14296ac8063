// The job queue: one `latentlab-engine run --db DB --run ID` child process
// per job (one per CUDA device, a limited number on the CPU), its JSON lines
// turned into signals, cancel / kill / crash handling written to the store.
// Where jobs go is jobs/job_placement.h; the child processes and their log
// files are jobs/engine_process.h.
// A job whose device lists several devices ("cuda:0,cuda:1", "cpu,cpu") is a
// data-parallel job: one engine per device with RANK / WORLD_SIZE / LOCAL_RANK /
// MASTER_ADDR / MASTER_PORT set as torchrun would; rank 0 reports.
// A run tagged "cluster:<profile>" is placed on a Slurm cluster instead
// (jobs/job_cluster.cpp): sbatch'ed with the profile's batch script, followed
// by squeue and the store, cancelled with scancel, resubmitted on retry.
#pragma once

#include <QDateTime>
#include <QHash>
#include <QObject>
#include <QPair>
#include <QPointer>
#include <QProcess>
#include <QStringList>
#include <QTimer>
#include <QVector>
#include <cstdint>
#include <memory>
#include <vector>

#include "jobs/engine_process.h"
#include "jobs/line_protocol_parser.h"
#include "latentlab/engine.h"
#include "latentlab/run_store.h"
#include "latentlab/slurm.h"

namespace latentlab::ui {

struct JobInfo {
  qint64 runId = 0;
  QString name;
  QString device;  // cpu, cuda:0, ...
  RunStatus status = RunStatus::Queued;
  qint64 step = 0;
  qint64 steps = 0;
  qint64 tokens = 0;
  double loss = 0;
  double tokensPerSec = 0;
  double valLoss = 0;
  bool hasLoss = false;
  qint64 pid = 0;
  bool external = false;  // reattached: started by an earlier GUI session
  qint64 after = 0;       // waits, queued, until this run has completed (0: none)
  bool cancelRequested = false;
  int exitCode = -1;
  QString error;
  QDateTime startedAt;
  QStringList log;  // engine events and stderr, newest last (capped)
  // On a Slurm cluster: the profile, the job id once sbatch answered, and
  // what squeue says of it (state "ended" once squeue no longer lists it).
  QString cluster;
  qint64 slurmJob = 0;
  QString slurmState;
  QString slurmNodes;
  QString slurmReason;
  qint64 slurmSubmittedMs = 0;  // when sbatch answered: an older squeue answer cannot know the job
  bool onCluster() const { return !cluster.isEmpty(); }
  // Where the job runs: its device here, or "Slurm <job> · <state> · <nodes>".
  QString placement() const;
  // Pace: (ms since epoch, step) as progress was seen, the last 60 s of it;
  // the store's steps/s (from its rows' wall times) for a reattached job.
  QVector<QPair<qint64, qint64>> pace;
  double storeStepsPerSec = 0;

  // Records a step seen now (progress event or store poll).
  void observe(qint64 newStep, qint64 nowMs);
  // Seconds left at the recent pace (not from the start: a resumed run's
  // first steps happened before), or -1 when unknown.
  double etaSeconds() const;
  bool isActive() const { return status == RunStatus::Queued || status == RunStatus::Running; }
};

class JobController : public QObject {
  Q_OBJECT
 public:
  JobController(std::shared_ptr<RunStore> store, QString workspaceDir, QString enginePath, QObject* parent = nullptr);
  ~JobController() override;

  // Queues a run registered in the store (status queued; a terminal run is
  // re-queued, which resumes it from its last checkpoint). With `after`, the
  // run waits until that run has completed (kept in the store as the tag
  // "after:<id>", so a reopened workbench still waits) and is cancelled if
  // that run fails, crashes or is cancelled.
  void enqueue(qint64 runId, qint64 after = 0);
  // Queued: removed and marked cancelled. Running: "cancel\n" on stdin, then
  // killed after cancelTimeout() and marked cancelled. On a cluster: scancel
  // (the engine checkpoints on the SIGTERM Slurm sends).
  void cancel(qint64 runId);
  // A run on a cluster is submitted anew (a new Slurm job that resumes it).
  void retry(qint64 runId) { enqueue(runId); }
  // Runs left `running` by an earlier session: alive pid -> followed through
  // the store; dead -> marked crashed. Queued runs of the store are enqueued.
  void reattach(bool enqueueQueued = true);
  // Lets running children outlive the GUI (they ignore SIGPIPE); called when
  // the user closes the window and keeps the jobs.
  void detachAll();
  void clearFinished();

  void setCpuSlots(int n) {  // more slots start queued jobs now
    m_cpuSlots = n;
    schedule();
  }
  // The devices with their free memory (`latentlab-engine devices --json`):
  // a job that asks for "cuda" runs on the free GPU with the most memory on
  // which its memory plan fits, and waits while only busy GPUs would hold it.
  // With `runOn`, the pool is simulated: jobs are placed and held on these
  // devices as above, but every rank's engine runs on `runOn` (e.g. "cpu"), for
  // trying a GPU schedule on a machine without the GPUs.
  void setDevices(const std::vector<DeviceInfo>& devices, const QString& runOn = {});
  int cpuSlots() const { return m_cpuSlots; }
  void setCancelTimeout(int ms) { m_cancelTimeoutMs = ms; }
  // How often squeue is asked about the jobs on a cluster (default 5 s).
  void setClusterPollInterval(int ms) { m_clusterTimer.setInterval(ms); }
  int cancelTimeout() const { return m_cancelTimeoutMs; }

  const QVector<qint64>& jobOrder() const { return m_order; }
  const JobInfo* job(qint64 runId) const;
  int runningCount() const;
  int activeCount() const;
  QString enginePath() const { return m_enginePath; }
  qint64 processId(qint64 runId) const;              // 0 when no child process
  QList<qint64> rankProcessIds(qint64 runId) const;  // rank 0 first; empty when no child process

 Q_SIGNALS:
  void progress(qint64 runId, qint64 step, qint64 steps, qint64 tokens, double loss, double tokensPerSec);
  void evalReported(qint64 runId, qint64 step, double valLoss);
  void statusChanged(qint64 runId, latentlab::RunStatus status);
  void finished(qint64 runId, int exitCode);
  void logLine(qint64 runId, const QString& line);
  void jobsChanged();             // a job was added or removed
  void jobUpdated(qint64 runId);  // fields of one job changed

 private:
  struct Child {
    QPointer<QProcess> process;             // rank 0
    QVector<QPointer<QProcess>> followers;  // ranks 1.. of a data-parallel job
    QString followerFailure;                // why a follower ended early
    LineProtocolParser parser;
    QByteArray stderrTail;
    bool killedAfterCancel = false;
  };

  void schedule();
  void start(JobInfo& job);
  void onStdout(qint64 runId);
  void onStderr(qint64 runId);
  void onFinished(qint64 runId, int exitCode, QProcess::ExitStatus exitStatus);
  void onStartFailed(qint64 runId);
  void handleEvent(JobInfo& job, const EngineEvent& ev);
  void setJobStatus(JobInfo& job, RunStatus status);
  void appendLog(JobInfo& job, const QString& line);
  void pollExternal();
  // A waiting job's run: true once completed; false while it is queued or
  // running; a run that ended otherwise cancels the job (and false).
  bool prerequisiteMet(JobInfo& job);
  bool markInStore(qint64 runId, RunStatus status, const QString& error);
  // The newest train/loss and speed rows of a run another process writes.
  void readStoreProgress(JobInfo& job);
  // Slurm (jobs/job_cluster.cpp).
  void submitToCluster(JobInfo& job);
  void followOnCluster(const RunRecord& run, const QString& cluster, qint64 slurmJob);
  void cancelOnCluster(JobInfo& job);
  void pollCluster();
  void onSqueue(int exitCode, const QByteArray& out, qint64 askedMs);
  void updateFromCluster(JobInfo& job, const SlurmJobState* listed);
  void endClusterJob(JobInfo& job, RunStatus status, const QString& why);
  void failCluster(JobInfo& job, const QString& why);
  void onFollowerFinished(qint64 runId, int rank, int exitCode, QProcess::ExitStatus exitStatus);
  QProcess* spawnEngine(qint64 runId, const QString& device, int rank, int worldSize, int port);

 public:
  // The devices of one job, one per rank: "cuda:0,cuda:1" -> {cuda:0, cuda:1}.
  static QStringList rankDevices(const QString& device);

 private:
  std::shared_ptr<RunStore> m_store;
  QString m_workspaceDir;
  QString m_enginePath;
  int m_cpuSlots = 1;
  int m_cancelTimeoutMs = 5000;
  QVector<qint64> m_order;
  QHash<qint64, JobInfo> m_jobs;
  QHash<qint64, std::shared_ptr<Child>> m_children;
  QTimer m_externalTimer;
  QTimer m_clusterTimer;
  QPointer<QProcess> m_squeue;
  bool m_pollAgain = false;  // a job was submitted while squeue was being asked
  bool m_closing = false;    // the destructor waits for sbatch's answers, and asks nothing more
  // Runs on a cluster that the store says ended but whose Slurm job may run
  // them again (a requeue or preemption stops the engine, which records
  // cancelled, and starts it anew): followed if squeue still lists the job.
  struct ClusterCandidate {
    QString cluster;
    qint64 slurmJob = 0;
  };
  QHash<qint64, ClusterCandidate> m_clusterCandidates;
  QString m_squeueError;  // the last refusal, logged once
  std::vector<DeviceInfo> m_devices;
  QString m_runOn;
  JobLogFiles m_logs;
};

}  // namespace latentlab::ui
