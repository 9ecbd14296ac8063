// Background `latentlab-engine export`.
#include "jobs/model_export.h"

#include <QProcess>

namespace latentlab::ui {

ModelExport::ModelExport(QString enginePath, QObject* parent) : QObject(parent), m_enginePath(std::move(enginePath)) {}

void ModelExport::start(const QString& modelDir, const QString& outDir) {
  if (m_process != nullptr) return;
  m_process = new QProcess(this);
  connect(m_process, &QProcess::finished, this, [this, outDir](int code, QProcess::ExitStatus status) {
    const QString out = QString::fromUtf8(m_process->readAllStandardOutput()).trimmed();
    const QString err = QString::fromUtf8(m_process->readAllStandardError()).trimmed();
    m_process->deleteLater();
    m_process = nullptr;
    const bool ok = status == QProcess::NormalExit && code == 0;
    // The engine's own lines: its summary, or "error: ..." and "hint: ..." without the progress bars.
    QStringList lines;
    for (const QString& line : (ok ? out : err).split(QLatin1Char('\n'))) {
      if (ok || line.startsWith(QLatin1String("error:")) || line.startsWith(QLatin1String("hint:")))
        lines << line.trimmed();
    }
    Q_EMIT finished(ok, outDir, lines.isEmpty() ? err : lines.join(QLatin1Char('\n')));
  });
  connect(m_process, &QProcess::errorOccurred, this, [this, outDir](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart || m_process == nullptr) return;
    m_process->deleteLater();
    m_process = nullptr;
    Q_EMIT finished(false, outDir, tr("the engine (%1) did not start").arg(m_enginePath));
  });
  m_process->start(m_enginePath, {QStringLiteral("export"), QStringLiteral("--model"), modelDir,
                                  QStringLiteral("--out"), outDir, QStringLiteral("--format"),
                                  QStringLiteral("deepseek-v3"), QStringLiteral("--force"), QStringLiteral("--quiet")});
}

}  // namespace latentlab::ui
