// Locating the engine binary (see engine_path.h for the order).
#include "jobs/engine_path.h"

#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>

namespace latentlab::ui {

QString engineExecutablePath() {
  const QString fromEnv = qEnvironmentVariable("LATENTLAB_ENGINE");
  if (!fromEnv.isEmpty()) return fromEnv;
  const QString appDir = QCoreApplication::applicationDirPath();
  QFile pathFile(appDir + QStringLiteral("/latentlab-engine.path"));
  if (pathFile.open(QIODevice::ReadOnly)) {
    const QString p = QString::fromUtf8(pathFile.readAll()).trimmed();
    if (!p.isEmpty()) return p;
  }
  const QString sibling = appDir + QStringLiteral("/latentlab-engine");
  if (QFileInfo(sibling).isExecutable()) return sibling;
  return QStringLiteral(LATENTLAB_ENGINE_PATH);
}

}  // namespace latentlab::ui
