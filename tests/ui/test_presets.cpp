// Every preset file parses at every scale: each run spec passes
// validateRunSpec, placeholders are substituted, and conversion settings are
// possible for the model the spec names; loading one creates queued runs.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

#include "latentlab/architectures.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "latentlab/run_store.h"
#include "preset_loader.h"

using namespace latentlab;
using namespace latentlab::ui;

namespace {

ModelConfig shapeFor(const RunSpec& s) {
  const QString dir = QString::fromStdString(s.modelDir);
  if (dir.endsWith(QLatin1String("SmolLM-135M"))) return builtinArchitecture("smollm-135m");
  if (dir.endsWith(QLatin1String("Llama-2-7B"))) return builtinArchitecture("llama-2-7b");
  return builtinArchitecture(s.architecture.empty() ? "demo-gqa" : s.architecture);
}

}  // namespace

class TestPresets : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void everyPresetFileParses() {
    const QStringList onDisk = QDir(QStringLiteral(LATENTLAB_SOURCE_DIR "/resources/presets"))
                                   .entryList({QStringLiteral("*.json")}, QDir::Files);
    QCOMPARE(builtinPresetFiles().size(), onDisk.size());  // every file is compiled in
    QVERIFY(onDisk.size() >= 3);
    int specs = 0;
    for (const QString& name : onDisk) {
      const QString path = QStringLiteral(LATENTLAB_SOURCE_DIR "/resources/presets/") + name;
      const QStringList scales = presetScales(path);
      QVERIFY2(scales.contains(QStringLiteral("demo")) && scales.contains(QStringLiteral("paper")), qPrintable(name));
      for (const QString& scale : scales) {
        const Preset p = loadPreset(path, scale, QStringLiteral("/ws"));
        QVERIFY(!p.runs.empty());
        QVERIFY(!p.title.isEmpty());
        QCOMPARE(p.evaluates.size(), p.runs.size());
        for (std::size_t k = 0; k < p.runs.size(); ++k) {
          const RunSpec& s = p.runs[k];
          ++specs;
          RunSpec created = s;  // an evaluation of a run of the preset gets that run's id when created
          if (p.evaluates[k] >= 0) created.evaluatesRun = static_cast<std::int64_t>(p.evaluates[k]) + 1;
          validateRunSpec(created, name.toStdString());
          const std::string json = runSpecToJson(s);
          QVERIFY2(json.find("<workspace>") == std::string::npos, json.c_str());
          if (s.kind == RunKind::Eval) {
            // An evaluation of a run of the preset: its model is that run's checkpoint.
            QVERIFY(s.modelDir.empty());
            QVERIFY(s.passkey.file.find("<demo-text>") == std::string::npos);
          } else if (scale == QLatin1String("demo")) {
            QVERIFY(s.steps <= 100);
            QCOMPARE(s.data.seqLen, 128);
            QCOMPARE(s.microBatch, 8);
            if (!s.modelDir.empty()) QCOMPARE(s.modelDir, std::string("/ws/models/demo-gqa"));
          } else {
            // The scale ablation follows the MLRA paper's 100k steps; the others 12k.
            QCOMPARE(s.steps, name == QLatin1String("scale-ablation.json") ? 100000 : 12000);
          }
          if (s.conversion.enabled) {
            const KvSettings k = kvSettingsFor(s.conversion);
            const auto why = checkKvSettings(shapeFor(s), k);
            QVERIFY2(!why, (s.name + ": " + why.value_or("")).c_str());
          }
        }
      }
    }
    qInfo("%d run specs in %lld presets", specs, static_cast<long long>(onDisk.size()));
  }

  void loadingAPresetCreatesTheExperimentAndQueuedRuns() {
    QTemporaryDir dir;
    RunStore store(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const Preset p = loadPreset(QStringLiteral(":/presets/dkv-sweep.json"), QStringLiteral("demo"), dir.path());
    std::vector<std::int64_t> ids;
    const auto exp = instantiatePreset(store, p, &ids);
    QCOMPARE(ids.size(), p.runs.size());
    QCOMPARE(store.experiment(exp).preset, std::string("dkv-sweep"));
    for (auto id : ids) QCOMPARE(store.run(id).status, RunStatus::Queued);
    QCOMPARE(p.chart.x, QStringLiteral("tokens"));
  }

  // The quantized-cache preset: each evaluation scores a run of the preset
  // (its id filled in when the runs are created), waits for it, and reads the
  // corpus's validation tail over three caches.
  void anEvaluationOfAPresetRunWaitsForItAndNamesIt() {
    QTemporaryDir dir;
    RunStore store(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const Preset p = loadPreset(QStringLiteral(":/presets/quantized-cache.json"), QStringLiteral("demo"), dir.path());
    std::vector<std::int64_t> ids, waits;
    instantiatePreset(store, p, &ids, &waits);
    QCOMPARE(ids.size(), std::size_t{4});
    QCOMPARE(waits, (std::vector<std::int64_t>{0, 0, ids[0], ids[1]}));
    for (std::size_t k = 2; k < 4; ++k) {
      const RunSpec s = parseRunSpec(store.run(ids[k]).specJson, "stored");
      QCOMPARE(s.evaluatesRun, ids[k - 2]);
      QCOMPARE(s.evaluatesStep, std::int64_t{-1});  // the run's newest checkpoint when the job starts
      QCOMPARE(s.kvCaches.size(), std::size_t{3});
      QCOMPARE(s.heldOut.text, std::string("validation"));
      QVERIFY(QFileInfo(QString::fromStdString(s.passkey.file)).isFile());
    }
    // A name that is no earlier run of the preset is refused, naming it.
    QFile bad(dir.filePath(QStringLiteral("bad.json")));
    QVERIFY(bad.open(QIODevice::WriteOnly));
    bad.write(R"({"title": "bad", "scales": {"demo": {"runs": [
      {"name": "e", "kind": "eval", "evaluates": {"run": "later"}, "held_out": {"text": "validation"}},
      {"name": "later", "kind": "pretrain", "architecture": "demo-gqa"}]}}})");
    bad.close();
    try {
      loadPreset(bad.fileName(), QStringLiteral("demo"), dir.path());
      QFAIL("a preset evaluating a later run loaded");
    } catch (const Error& e) {
      QVERIFY2(e.message().find("evaluates.run 'later' is not an earlier run of the preset") != std::string::npos,
               e.message().c_str());
    }
  }
};

QTEST_MAIN(TestPresets)
#include "test_presets.moc"
