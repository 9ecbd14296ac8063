// Workspace folders and the demo workspace's first-start content.
#include "workspace.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>

#include "latentlab/demo.h"
#include "latentlab/error.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"

namespace latentlab::ui {

Workspace openWorkspace(const QString& dir) {
  QDir d(dir);
  for (const char* sub : {"models", "cache", "runs"}) {
    if (!d.mkpath(QString::fromLatin1(sub))) {
      throw Error(ErrorCode::Io,
                  (dir + QLatin1Char('/') + QLatin1String(sub)).toStdString() + ": cannot create the folder",
                  "Choose a workspace folder you can write to.");
    }
  }
  Workspace ws{QDir(dir).absolutePath()};
  RunStore store(ws.dbPath().toStdString());  // creates and migrates
  return ws;
}

QString defaultDemoWorkspaceDir() {
  // ~/.local/share/latentlab/demo (as the README says; AppDataLocation would add the organisation too).
  return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) + QStringLiteral("/latentlab/demo");
}

std::optional<std::int64_t> ensureDemoPretrainQueued(RunStore& store, const Workspace& ws) {
  if (QFileInfo::exists(ws.demoBaseDir() + QStringLiteral("/config.json"))) return std::nullopt;
  const std::int64_t exp =
      findOrCreateExperiment(store, kDemoBasesExperiment, "", "Base models pre-trained by LatentLab");
  const RunSpec spec = demoPretrainSpec(kDemoArch);
  for (const auto& r : store.listRuns(RunFilter{exp, std::nullopt, std::nullopt})) {
    if (r.name == spec.name && r.status != RunStatus::Completed) return r.id;
    if (r.name == spec.name && r.status == RunStatus::Completed) return std::nullopt;  // publish pending
  }
  return store.createRun(exp, spec.name, spec.kind, runSpecToJson(spec), spec.device);
}

bool isDemoPretrainRun(RunStore& store, std::int64_t runId) {
  const RunRecord r = store.run(runId);
  if (!r.experimentId || r.name != demoPretrainSpec(kDemoArch).name) return false;
  return store.experiment(*r.experimentId).name == kDemoBasesExperiment;
}

bool publishDemoBase(RunStore& store, const Workspace& ws, std::int64_t runId, QString* why) {
  try {
    latentlab::publishDemoBase(store, runId, ws.dir.toStdString(), kDemoArch);
    return true;
  } catch (const Error& e) {
    if (why != nullptr) *why = QString::fromStdString(e.message());
    return false;
  }
}

}  // namespace latentlab::ui
