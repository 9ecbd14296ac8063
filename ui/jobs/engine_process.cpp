// Engine child processes and job logs; see engine_process.h.
#include "jobs/engine_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <QDir>
#include <QProcessEnvironment>
#include <QThread>
#include <algorithm>
#include <csignal>

namespace latentlab::ui {

int freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 29500;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

void killProcess(const QPointer<QProcess>& p) {
  if (p != nullptr && p->state() != QProcess::NotRunning) p->kill();
}

QProcess* newEngineProcess(const EngineLaunch& l, QObject* parent) {
  auto* proc = new QProcess(parent);
  proc->setProgram(l.enginePath);
  proc->setArguments({QStringLiteral("run"), QStringLiteral("--db"), l.dbPath, QStringLiteral("--run"),
                      QString::number(l.runId), QStringLiteral("--device"), l.device, QStringLiteral("--quiet")});
  proc->setWorkingDirectory(l.workspaceDir);
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  if (l.worldSize > 1) {
    // What torchrun sets for a one-node job of worldSize processes.
    env.insert(QStringLiteral("RANK"), QString::number(l.rank));
    env.insert(QStringLiteral("WORLD_SIZE"), QString::number(l.worldSize));
    env.insert(QStringLiteral("LOCAL_RANK"), QString::number(l.rank));
    env.insert(QStringLiteral("LOCAL_WORLD_SIZE"), QString::number(l.worldSize));
    env.insert(QStringLiteral("MASTER_ADDR"), QStringLiteral("127.0.0.1"));
    env.insert(QStringLiteral("MASTER_PORT"), QString::number(l.port));
    env.insert(QStringLiteral("LATENTLAB_DIST"), QStringLiteral("on"));
    // Share the cores among the CPU ranks instead of oversubscribing them.
    if (l.device == QLatin1String("cpu") && !env.contains(QStringLiteral("OMP_NUM_THREADS"))) {
      env.insert(QStringLiteral("OMP_NUM_THREADS"),
                 QString::number(std::max(1, QThread::idealThreadCount() / l.worldSize)));
    }
  } else {
    // A one-device job never joins a group, even inside a Slurm allocation.
    env.insert(QStringLiteral("LATENTLAB_DIST"), QStringLiteral("off"));
  }
  proc->setProcessEnvironment(env);
  // Its own process group (a Ctrl-C in the GUI's terminal does not reach it)
  // and SIGPIPE ignored, so a job the user keeps outlives the GUI.
  proc->setChildProcessModifier([] {
    ::setpgid(0, 0);
    std::signal(SIGPIPE, SIG_IGN);
  });
  return proc;
}

void JobLogFiles::append(qint64 runId, const QString& line) {
  std::shared_ptr<QFile>& file = m_files[runId];
  if (file == nullptr) {
    const QString dir = QStringLiteral("%1/runs/%2").arg(m_workspaceDir).arg(runId);
    QDir().mkpath(dir);
    file = std::make_shared<QFile>(dir + QStringLiteral("/engine.log"));
    if (!file->open(QIODevice::Append | QIODevice::Text)) {
      // Tried again with the next line; said once.
      if (!m_warned.contains(runId))
        qWarning("run %lld: cannot write %s", static_cast<long long>(runId), qPrintable(file->fileName()));
      m_warned.insert(runId);
      m_files.remove(runId);
      return;
    }
  }
  file->write(line.toUtf8() + '\n');
  file->flush();
}

}  // namespace latentlab::ui
