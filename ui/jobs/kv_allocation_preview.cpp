// Background KV-allocation preview.
#include "jobs/kv_allocation_preview.h"

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryFile>

namespace latentlab::ui {

KvAllocationPreview::KvAllocationPreview(QString enginePath, QString workspaceDir, QObject* parent)
    : QObject(parent), m_enginePath(std::move(enginePath)), m_workspace(std::move(workspaceDir)) {}

KvAllocationPreview::~KvAllocationPreview() {
  stop();
}

void KvAllocationPreview::stop() {
  if (m_process == nullptr) return;
  m_process->disconnect(this);
  m_process->kill();
  m_process->waitForFinished(2000);
  m_process->deleteLater();
  m_process = nullptr;
}

void KvAllocationPreview::start(const RunSpec& spec) {
  stop();
  m_specFile = std::make_unique<QTemporaryFile>(QDir::tempPath() + QStringLiteral("/latentlab-kv-budget-XXXXXX.json"));
  if (!m_specFile->open()) {
    Q_EMIT finished(false, {}, tr("cannot write a temporary spec file in %1").arg(QDir::tempPath()));
    return;
  }
  m_specFile->write(QByteArray::fromStdString(runSpecToJson(spec)));
  m_specFile->flush();
  m_process = new QProcess(this);
  QProcess* proc = m_process;
  connect(proc, &QProcess::finished, this, [this, proc](int code, QProcess::ExitStatus status) {
    const QByteArray out = proc->readAllStandardOutput();
    const QString err = QString::fromUtf8(proc->readAllStandardError()).trimmed();
    proc->deleteLater();
    m_process = nullptr;
    KvAllocation a;
    if (status == QProcess::NormalExit && code == 0 && parseKvAllocation(out, &a)) {
      Q_EMIT finished(true, a, {});
      return;
    }
    // The engine's "error: ..." and "hint: ..." lines, without its info lines.
    QStringList lines;
    for (const QString& line : err.split(QLatin1Char('\n'))) {
      if (line.startsWith(QLatin1String("error:")) || line.startsWith(QLatin1String("hint:"))) lines << line.trimmed();
    }
    Q_EMIT finished(false, {}, lines.isEmpty() ? err : lines.join(QLatin1Char('\n')));
  });
  connect(proc, &QProcess::errorOccurred, this, [this, proc](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart || m_process != proc) return;
    proc->deleteLater();
    m_process = nullptr;
    Q_EMIT finished(false, {}, tr("the engine (%1) did not start").arg(m_enginePath));
  });
  proc->start(m_enginePath, {QStringLiteral("run"), m_specFile->fileName(), QStringLiteral("--check"),
                             QStringLiteral("--kv-allocation"), QStringLiteral("--json"), QStringLiteral("--quiet"),
                             QStringLiteral("--workspace"), m_workspace});
}

bool parseKvAllocation(const QByteArray& json, KvAllocation* out) {
  const QJsonObject o = QJsonDocument::fromJson(json).object();
  const auto ints = [&](const char* key, std::vector<int>* v) {
    if (!o.value(QLatin1String(key)).isArray()) return false;
    for (const auto& x : o.value(QLatin1String(key)).toArray()) v->push_back(x.toInt());
    return true;
  };
  const auto doubles = [&](const char* key, std::vector<double>* v) {
    if (!o.value(QLatin1String(key)).isArray()) return false;
    for (const auto& x : o.value(QLatin1String(key)).toArray()) v->push_back(x.toDouble());
    return true;
  };
  const auto integer = [&](const char* key, std::int64_t* v) {
    if (!o.value(QLatin1String(key)).isDouble()) return false;
    *v = o.value(QLatin1String(key)).toInteger();
    return true;
  };
  KvAllocation a;
  std::int64_t uniformDKv = 0;
  const bool ok =
      ints("d_kv_per_layer", &a.layerDKv) && doubles("kept", &a.kept) && doubles("uniform_kept", &a.uniformKept) &&
      integer("budget_bytes_per_token", &a.limits.budgetBytes) && integer("bytes_per_token", &a.bytesPerToken) &&
      integer("uniform_bytes_per_token", &a.uniformBytesPerToken) &&
      integer("min_bytes_per_token", &a.limits.minBytes) && integer("max_bytes_per_token", &a.limits.maxBytes) &&
      integer("step_bytes", &a.limits.stepBytes) && integer("uniform_d_kv", &uniformDKv);
  if (!ok || a.layerDKv.empty()) return false;
  a.limits.uniformDKv = static_cast<int>(uniformDKv);
  a.heldOutLoss = o.value(QStringLiteral("held_out_loss")).toDouble(-1.0);
  a.uniformHeldOutLoss = o.value(QStringLiteral("uniform_held_out_loss")).toDouble(-1.0);
  *out = a;
  return true;
}

}  // namespace latentlab::ui
