// `latentlab-engine run SPEC --check --kv-allocation --json` in the
// background: the per-layer d_kv a run's KV budget gives, for the Conversion
// tab's chart. A newer request replaces the one still running.
#pragma once

#include <QObject>
#include <QString>
#include <memory>

#include "latentlab/kv_budget.h"
#include "latentlab/run_spec.h"

class QProcess;
class QTemporaryFile;

namespace latentlab::ui {

class KvAllocationPreview : public QObject {
  Q_OBJECT
 public:
  KvAllocationPreview(QString enginePath, QString workspaceDir, QObject* parent = nullptr);
  ~KvAllocationPreview() override;
  void start(const RunSpec& spec);
  bool running() const { return m_process != nullptr; }

 Q_SIGNALS:
  // ok: `allocation` holds the engine's answer; else `message` says why not.
  void finished(bool ok, const latentlab::KvAllocation& allocation, const QString& message);

 private:
  void stop();
  QString m_enginePath, m_workspace;
  QProcess* m_process = nullptr;
  std::unique_ptr<QTemporaryFile> m_specFile;
};

// The engine's JSON answer (verb_convert.cpp's allocation object) read back;
// false when a field is missing or of the wrong type.
bool parseKvAllocation(const QByteArray& json, KvAllocation* out);

}  // namespace latentlab::ui
