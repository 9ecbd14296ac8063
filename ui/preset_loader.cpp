// Preset files -> experiment with queued runs.
#include "preset_loader.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

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
    QString json = QString::fromUtf8(QJsonDocument(runs[i].toObject()).toJson(QJsonDocument::Compact));
    json.replace(QStringLiteral("<workspace>"), QDir(workspaceDir).absolutePath());
    const std::string source = path.toStdString() + " " + scale.toStdString() + " run " + std::to_string(i + 1);
    RunSpec spec = parseRunSpec(json.toStdString(), source);
    validateRunSpec(spec, source);
    p.runs.push_back(std::move(spec));
  }
  return p;
}

std::int64_t instantiatePreset(RunStore& store, const Preset& preset, std::vector<std::int64_t>* runIds) {
  const QString name = QStringLiteral("%1 (%2)").arg(preset.title, preset.scale);
  const std::int64_t exp =
      store.createExperiment(name.toStdString(), preset.id.toStdString(), preset.description.toStdString());
  for (const RunSpec& spec : preset.runs) {
    const std::int64_t id = store.createRun(exp, spec.name, spec.kind, runSpecToJson(spec), spec.device);
    if (runIds != nullptr) runIds->push_back(id);
  }
  return exp;
}

}  // namespace latentlab::ui
