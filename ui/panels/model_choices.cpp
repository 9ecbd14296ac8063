#include "panels/model_choices.h"

#include <QDir>
#include <QFileInfo>
#include <algorithm>

#include "latentlab/run_store.h"

namespace latentlab::ui {

QVector<ModelChoice> listModelChoices(const RunStore& store, const QString& workspaceDir) {
  QVector<ModelChoice> out;
  auto runs = store.listRuns();
  std::reverse(runs.begin(), runs.end());
  for (const RunRecord& r : runs) {
    if (r.kind == "eval") continue;
    auto artifacts = store.listArtifacts(r.id);
    std::sort(artifacts.begin(), artifacts.end(),
              [](const ArtifactRecord& a, const ArtifactRecord& b) { return a.step.value_or(0) > b.step.value_or(0); });
    for (const ArtifactRecord& a : artifacts) {
      if (a.kind != "checkpoint" || !a.step) continue;
      const QString dir = QString::fromStdString(a.path) + QStringLiteral("/model");
      if (!QFileInfo::exists(dir + QStringLiteral("/config.json"))) continue;
      out.push_back({QStringLiteral("#%1 %2 · step %3").arg(r.id).arg(QString::fromStdString(r.name)).arg(*a.step), dir,
                     r.id, *a.step});
    }
  }
  const QDir models(workspaceDir + QStringLiteral("/models"));
  for (const QString& name : models.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
    const QString dir = models.filePath(name);
    if (QFileInfo::exists(dir + QStringLiteral("/config.json")))
      out.push_back({QStringLiteral("models/%1").arg(name), dir, 0, 0});
  }
  return out;
}

}  // namespace latentlab::ui
