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
      throw Error(ErrorCode::Io, (dir + QLatin1Char('/') + QLatin1String(sub)).toStdString() + ": cannot create the folder",
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
  const std::int64_t exp = findOrCreateExperiment(store, kDemoBasesExperiment, "", "Base models pre-trained by LatentLab");
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

namespace {

bool copyTree(const QString& from, const QString& to) {
  QDir src(from);
  if (!src.exists() || !QDir().mkpath(to)) return false;
  QDirIterator it(from, QDir::Files | QDir::Dirs | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString path = it.next();
    const QString target = to + QLatin1Char('/') + src.relativeFilePath(path);
    if (it.fileInfo().isDir()) {
      if (!QDir().mkpath(target)) return false;
    } else if (!QFile::copy(path, target)) {
      return false;
    }
  }
  return true;
}

} // namespace

bool publishDemoBase(RunStore& store, const Workspace& ws, std::int64_t runId, QString* why) {
  auto fail = [&](const QString& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  const RunRecord r = store.run(runId);
  if (r.status != RunStatus::Completed) return fail(QStringLiteral("the pre-training run has not completed"));
  const QJsonObject summary = QJsonDocument::fromJson(QByteArray::fromStdString(r.summaryJson)).object();
  const QString model = summary.value(QStringLiteral("checkpoint")).toString() + QStringLiteral("/model");
  if (!QFileInfo::exists(model + QStringLiteral("/config.json"))) return fail(model + QStringLiteral(": no trained model"));
  const RunSpec spec = parseRunSpec(r.specJson, "run " + std::to_string(runId) + " spec");
  QString tokenizer;
  const QString suffix = QStringLiteral("-%1.json").arg(spec.data.tokenizerVocab);
  for (const QFileInfo& f : QDir(ws.dir + QStringLiteral("/cache")).entryInfoList({QStringLiteral("tokenizer-*")}, QDir::Files)) {
    if (f.fileName().endsWith(suffix)) tokenizer = f.absoluteFilePath();
  }
  if (tokenizer.isEmpty()) return fail(QStringLiteral("the trained tokenizer is missing from cache/"));
  const QString partial = ws.demoBaseDir() + QStringLiteral(".partial");
  QDir(partial).removeRecursively();
  if (!copyTree(model, partial) || !QFile::copy(tokenizer, partial + QStringLiteral("/tokenizer.json"))) {
    return fail(partial + QStringLiteral(": cannot copy the trained model"));
  }
  QDir(ws.demoBaseDir()).removeRecursively();
  if (!QDir().rename(partial, ws.demoBaseDir())) return fail(ws.demoBaseDir() + QStringLiteral(": cannot publish"));
  return true;
}

} // namespace latentlab::ui
