// The window's Export action: a run's newest checkpoint as a DeepSeek-V3 folder.
#include <QDir>
#include <QFileDialog>
#include <QStatusBar>

#include "jobs/engine_path.h"
#include "jobs/model_export.h"
#include "latentlab/convert.h"
#include "latentlab/error.h"
#include "latentlab/model_config.h"
#include "main_window.h"
#include "panels/message_banner.h"
#include "panels/model_choices.h"

namespace latentlab::ui {

bool MainWindow::exportRunCheckpoint(qint64 runId, QString outDir) {
  ModelChoice newest;
  for (const ModelChoice& c : listModelChoices(*m_store, m_ws.dir)) {
    if (c.run == runId) {
      newest = c;
      break;
    }
  }
  if (newest.dir.isEmpty()) {
    m_banner->showMessage(MessageBanner::Level::Warning, tr("Run #%1 has no checkpoint to export yet").arg(runId),
                          tr("A run writes its checkpoints as it trains; export one once it has."));
    return false;
  }
  std::optional<std::string> problem;
  try {
    problem = deepSeekExportProblem(readHfConfig((newest.dir + QStringLiteral("/config.json")).toStdString()));
  } catch (const Error& e) {
    m_banner->showError(e);
    return false;
  }
  if (problem) {
    m_banner->showMessage(
        MessageBanner::Level::Error,
        tr("Run #%1 cannot be exported as DeepSeek-V3: %2.").arg(runId).arg(QString::fromStdString(*problem)),
        tr("Convert with the DeepSeek-V3 target (Conversion tab) to get an exportable model."));
    return false;
  }
  if (m_export != nullptr && m_export->running()) {
    m_banner->showMessage(MessageBanner::Level::Warning, tr("An export is still running"),
                          tr("Wait for it to finish."));
    return false;
  }
  if (outDir.isEmpty()) {
    // A folder not there yet: the engine never writes into an existing one
    // (and an existing folder would open the dialog inside it, name empty).
    const QString base =
        QDir(m_ws.dir).filePath(QStringLiteral("exports/run-%1-step-%2-deepseek-v3").arg(runId).arg(newest.step));
    QString suggested = base;
    for (int n = 2; QFileInfo::exists(suggested); ++n) suggested = base + QStringLiteral("-%1").arg(n);
    QDir().mkpath(QFileInfo(suggested).path());
    outDir = QFileDialog::getSaveFileName(this, tr("Export run #%1 as DeepSeek-V3: the new model folder").arg(runId),
                                          suggested);
    if (outDir.isEmpty()) return false;
  }
  if (m_export == nullptr) {
    m_export = new ModelExport(m_options.enginePath.isEmpty() ? engineExecutablePath() : m_options.enginePath, this);
    connect(m_export, &ModelExport::finished, this, [this](bool ok, const QString& dir, const QString& message) {
      if (ok) {
        m_lastExport = tr("Exported as DeepSeek-V3 to %1").arg(QDir::toNativeSeparators(dir));
        statusBar()->showMessage(m_lastExport + QStringLiteral(" — ") +
                                 message.section(QLatin1Char('\n'), -1).simplified());
      } else {
        m_lastExport = tr("Export failed: %1").arg(message);
        m_banner->showMessage(MessageBanner::Level::Error, tr("The export to %1 failed").arg(dir), message);
      }
      Q_EMIT exportFinished(ok, dir);
    });
  }
  statusBar()->showMessage(tr("Exporting run #%1 (step %2) as DeepSeek-V3…").arg(runId).arg(newest.step));
  m_export->start(newest.dir, outDir);
  return true;
}

}  // namespace latentlab::ui
