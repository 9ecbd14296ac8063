// The engine's child processes and their log: one `latentlab-engine run`
// process per rank of a job, with the environment torchrun would give a
// one-node job (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), in its
// own process group with SIGPIPE ignored so that a job the user keeps outlives
// the workbench; and each job's engine.log.
#pragma once

#include <QFile>
#include <QHash>
#include <QPointer>
#include <QProcess>
#include <QSet>
#include <QString>
#include <memory>

namespace latentlab::ui {

struct EngineLaunch {
  QString enginePath;
  QString dbPath;
  QString workspaceDir;  // the working directory
  qint64 runId = 0;
  QString device;  // this rank's device
  int rank = 0;
  int worldSize = 1;
  int port = 0;  // the rendezvous port of a data-parallel job
};

// A child process set up to run one rank (not started).
QProcess* newEngineProcess(const EngineLaunch& launch, QObject* parent);

// A loopback TCP port free right now, for a data-parallel job's rendezvous.
int freeLoopbackPort();

// Kills a child that is still running.
void killProcess(const QPointer<QProcess>& process);

// <workspace>/runs/<id>/engine.log of each job, opened at its first line and
// appended to line by line (each line flushed, so the file is whole if the
// workbench dies) until the job controller closes it: when the job ends, is
// queued again or leaves the table. A failed open is tried again next line.
class JobLogFiles {
 public:
  explicit JobLogFiles(QString workspaceDir) : m_workspaceDir(std::move(workspaceDir)) {}
  void append(qint64 runId, const QString& line);
  void close(qint64 runId) { m_files.remove(runId); }

 private:
  QString m_workspaceDir;
  QHash<qint64, std::shared_ptr<QFile>> m_files;
  QSet<qint64> m_warned;  // runs whose log could not be opened, said once
};

}  // namespace latentlab::ui
