// Presets (resources/presets/*.json): an experiment = a list of run specs at a
// demo or paper scale plus the chart that compares them. "<workspace>" in a
// spec is replaced by the workspace folder when the preset is loaded,
// "<demo-text>" by the folder of the demo corpus's text files. An evaluation
// may name an earlier run of the preset (`"evaluates": {"run": "<its name>"}`):
// it scores that run's final checkpoint, its results stored under that run,
// and waits for it.
#pragma once

#include <QList>
#include <QPair>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <vector>

#include "latentlab/run_spec.h"

namespace latentlab {
class RunStore;
}

namespace latentlab::ui {

struct PresetChart {
  QString metric = QStringLiteral("loss");     // as ChartView::setMetric
  QString x = QStringLiteral("step");          // step | tokens
  QString compare = QStringLiteral("curves");  // curves | difference
  double smoothing = -1;                       // the train curves' smoothing, 0..0.99 (< 0: left as it is)
  QList<QPair<QString, QString>> pairs;        // difference within pairs: (minuend, subtrahend) run names
  QString note;                                // what the figure shows
};

struct Preset {
  QString id;  // file stem: rope-strategies, ...
  QString title;
  QString description;
  QString scale;  // demo | paper
  PresetChart chart;
  std::vector<RunSpec> runs;
  std::vector<int> evaluates;  // per run: the index of the earlier run it evaluates, or -1
};

// Registers the compiled-in resources (icons, presets) of this static library.
void ensureResourcesLoaded();

// The preset files compiled into the resources (":/presets/<id>.json").
QStringList builtinPresetFiles();
QStringList presetScales(const QString& path);
// Parses and validates every spec; throws latentlab::Error naming the file,
// the run and the field.
Preset loadPreset(const QString& path, const QString& scale, const QString& workspaceDir);
// Creates the experiment "<title> (<scale>)" and its queued runs; returns
// the experiment id and appends the run ids to `runIds` and, per run, the id
// of the run it must wait for (0: none) to `waitsFor`.
std::int64_t instantiatePreset(RunStore& store, const Preset& preset, std::vector<std::int64_t>* runIds = nullptr,
                               std::vector<std::int64_t>* waitsFor = nullptr);

}  // namespace latentlab::ui
