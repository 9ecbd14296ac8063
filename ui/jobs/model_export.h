// `latentlab-engine export` for one model folder, run in the background so a
// large model's export never blocks the window.
#pragma once

#include <QObject>
#include <QString>

class QProcess;

namespace latentlab::ui {

class ModelExport : public QObject {
  Q_OBJECT
 public:
  explicit ModelExport(QString enginePath, QObject* parent = nullptr);
  bool running() const { return m_process != nullptr; }
  // Exports `modelDir` as DeepSeek-V3 into `outDir` (replacing a model folder there).
  void start(const QString& modelDir, const QString& outDir);

 Q_SIGNALS:
  // ok: the folder is written; message: the engine's summary, or its error and hint.
  void finished(bool ok, const QString& outDir, const QString& message);

 private:
  QString m_enginePath;
  QProcess* m_process = nullptr;
};

}  // namespace latentlab::ui
