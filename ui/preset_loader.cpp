// Preset files -> experiment with queued runs.
#include "preset_loader.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "latentlab/demo.h"
#include "latentlab/error.h"
#include "latentlab/run_store.h"

// Q_INIT_RESOURCE must be used outside any namespace.
static void initLatentlabResources() {
  Q_INIT_RESOURCE(latentlab);
}

namespace latentlab::ui {

void ensureResourcesLoaded() {
  static const bool done = [] {
    initLatentlabResources();
    return true;
  }();
  (void)done;
}

namespace {

QJsonObject readObject(const QString& path) {
  ensureResourcesLoaded();
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) throw Error(ErrorCode::Io, path.toStdString() + ": cannot open the preset");
  QJsonParseError err{};
  const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &err);
  if (err.error != QJsonParseError::NoError || !doc.isObject()) {
    throw Error(
        ErrorCode::BadSpec,
        path.toStdString() + ": " + err.errorString().toStdString() + " at offset " + std::to_string(err.offset),
        "A preset is one JSON object with \"scales\".");
  }
  return doc.object();
}

}  // namespace

QStringList builtinPresetFiles() {
  ensureResourcesLoaded();
  QStringList out;
  for (const QString& n :
       QDir(QStringLiteral(":/presets")).entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name)) {
    out << QStringLiteral(":/presets/") + n;
  }
  return out;
}

QStringList presetScales(const QString& path) {
  return readObject(path).value(QStringLiteral("scales")).toObject().keys();
}

Preset loadPreset(const QString& path, const QString& scale, const QString& workspaceDir) {
  const QJsonObject o = readObject(path);
  Preset p;
  p.id = QFileInfo(path).completeBaseName();
  p.title = o.value(QStringLiteral("title")).toString(p.id);
  p.description = o.value(QStringLiteral("description")).toString();
  p.scale = scale;
  const QJsonObject chart = o.value(QStringLiteral("chart")).toObject();
  p.chart.metric = chart.value(QStringLiteral("metric")).toString(p.chart.metric);
  p.chart.x = chart.value(QStringLiteral("x")).toString(p.chart.x);
  p.chart.compare = chart.value(QStringLiteral("compare")).toString(p.chart.compare);
  p.chart.smoothing = chart.value(QStringLiteral("smoothing")).toDouble(p.chart.smoothing);
  p.chart.note = chart.value(QStringLiteral("note")).toString();
  const QJsonArray pairs = chart.value(QStringLiteral("pairs")).toArray();
  for (qsizetype i = 0; i < pairs.size(); ++i) {
    const QJsonArray pair = pairs[i].toArray();
    if (pair.size() != 2 || !pair[0].isString() || !pair[1].isString()) {
      throw Error(ErrorCode::BadSpec,
                  path.toStdString() + ": chart.pairs[" + std::to_string(i) + "] is not two run names",
                  "Each pair is [\"<run without scale>\", \"<run with scale>\"].");
    }
    // "{scale} mla" names the run of the scale being loaded ("demo mla").
    auto label = [&](const QJsonValue& v) { return v.toString().replace(QStringLiteral("{scale}"), scale); };
    p.chart.pairs.push_back({label(pair[0]), label(pair[1])});
  }
  const QJsonObject scales = o.value(QStringLiteral("scales")).toObject();
  if (!scales.contains(scale)) {
    throw Error(ErrorCode::BadSpec, path.toStdString() + ": no scale '" + scale.toStdString() + "'",
                "Scales here: " + scales.keys().join(QStringLiteral(", ")).toStdString());
  }
  const QJsonArray runs = scales.value(scale).toObject().value(QStringLiteral("runs")).toArray();
  if (runs.isEmpty())
    throw Error(ErrorCode::BadSpec, path.toStdString() + ": scale '" + scale.toStdString() + "' has no runs");
  for (qsizetype i = 0; i < runs.size(); ++i) {
    const std::string source = path.toStdString() + " " + scale.toStdString() + " run " + std::to_string(i + 1);
    QJsonObject run = runs[i].toObject();
    // An evaluation of an earlier run of the preset, named: its id is known
    // once the runs are created (a stand-in id until then).
    int evaluates = -1;
    QJsonObject target = run.value(QStringLiteral("evaluates")).toObject();
    if (target.value(QStringLiteral("run")).isString()) {
      const std::string name = target.value(QStringLiteral("run")).toString().toStdString();
      for (std::size_t k = 0; k < p.runs.size(); ++k)
        if (p.runs[k].name == name) evaluates = static_cast<int>(k);
      if (evaluates < 0) {
        throw Error(ErrorCode::BadSpec, source + ": evaluates.run '" + name + "' is not an earlier run of the preset",
                    "Name a run listed before this one in the same scale.");
      }
      target.insert(QStringLiteral("run"), 1);
      run.insert(QStringLiteral("evaluates"), target);
    }
    QString json = QString::fromUtf8(QJsonDocument(run).toJson(QJsonDocument::Compact));
    json.replace(QStringLiteral("<workspace>"), QDir(workspaceDir).absolutePath());
    json.replace(QStringLiteral("<demo-text>"), QString::fromStdString(demoTextFolder().string()));
    RunSpec spec = parseRunSpec(json.toStdString(), source);
    validateRunSpec(spec, source);
    if (evaluates >= 0) spec.evaluatesRun = 0;
    p.runs.push_back(std::move(spec));
    p.evaluates.push_back(evaluates);
  }
  return p;
}

std::int64_t instantiatePreset(RunStore& store, const Preset& preset, std::vector<std::int64_t>* runIds,
                               std::vector<std::int64_t>* waitsFor) {
  const QString name = QStringLiteral("%1 (%2)").arg(preset.title, preset.scale);
  const std::int64_t exp =
      store.createExperiment(name.toStdString(), preset.id.toStdString(), preset.description.toStdString());
  std::vector<std::int64_t> ids;
  for (std::size_t k = 0; k < preset.runs.size(); ++k) {
    RunSpec spec = preset.runs[k];
    const int evaluates = k < preset.evaluates.size() ? preset.evaluates[k] : -1;
    if (evaluates >= 0) spec.evaluatesRun = ids[static_cast<std::size_t>(evaluates)];
    ids.push_back(store.createRun(exp, spec.name, spec.kind, runSpecToJson(spec), spec.device));
    if (runIds != nullptr) runIds->push_back(ids.back());
    if (waitsFor != nullptr) waitsFor->push_back(evaluates >= 0 ? spec.evaluatesRun : 0);
  }
  return exp;
}

}  // namespace latentlab::ui
