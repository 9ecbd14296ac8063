// The compare view over real store rows: the table lists exactly the config
// fields that differ (QAbstractItemModelTester on), difference-to-baseline
// and the scale-ablation preset's paired differences are aligned by tokens on
// unequal step grids, the crosshair lists every visible run and legend
// toggles hide runs, zoom re-reads the visible window and reset restores the
// whole, x by wall time, and each preset's experiment opens on its figure.
#include <QAbstractItemModelTester>
#include <QChart>
#include <QComboBox>
#include <QFile>
#include <QFont>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QScrollBar>
#include <QSet>
#include <QTableView>
#include <QTemporaryDir>
#include <QTreeView>
#include <QWheelEvent>
#include <QtTest>
#include <cmath>
#include <map>
#include <tuple>

#include "charts/chart_canvas.h"
#include "charts/chart_legend.h"
#include "charts/chart_view.h"
#include "latentlab/kv_quant.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"
#include "main_window.h"
#include "models/compare_table_model.h"
#include "models/run_tree_model.h"
#include "panels/compare_panel.h"
#include "panels/runs_panel.h"
#include "preset_loader.h"
#include "ui_test_support.h"
#include "workspace.h"

using namespace latentlab;
using namespace latentlab::ui;

namespace {

// train/loss rows every `every` steps, `tokensPerStep` tokens a step, value f(tokens).
template <typename F>
void writeRows(RunStore& store, qint64 run, const char* name, int last, int every, int tokensPerStep, F f) {
  MetricWriter w = store.metricWriter(run);
  for (int s = every; s <= last; s += every) {
    const std::int64_t t = static_cast<std::int64_t>(s) * tokensPerStep;
    w.add(name, s, t, s * 0.5, f(static_cast<double>(t)));
  }
}

QVector<ChartRun> chartRuns(const RunStore& store, std::optional<std::int64_t> experiment = std::nullopt) {
  QVector<ChartRun> out;
  RunFilter f;
  f.experimentId = experiment;
  for (const RunRecord& r : store.listRuns(f)) out.push_back({r.id, QString::fromStdString(r.name)});
  return out;
}

}  // namespace

class TestCompareView : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { uitest::isolateSettings(); }

  // A KV saving is positive for a smaller cache, and the largest saving is
  // the one marked best (bold, green): the base fine-tune (0%) and full RoPE
  // (37.5%) are not.
  void theLargestKvSavingIsPositiveAndMarkedBest() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    RunSpec s;
    s.kind = RunKind::Finetune;
    s.modelDir = "models/base";
    std::vector<qint64> ids;
    for (auto [name, change] :
         {std::tuple{"base fine-tune", 0.0}, std::tuple{"full RoPE", -0.375}, std::tuple{"2-norm d_kv 8", -0.8125}}) {
      s.name = name;
      const qint64 id = store->createRun(std::nullopt, name, s.kind, runSpecToJson(s), "cpu");
      store->setStatus(id, RunStatus::Running);
      store->setStatus(id, RunStatus::Completed);
      store->setSummary(id,
                        QStringLiteral(R"({"tokens":4096,"kv_bytes_per_token":%1,"kv_dtype":"bf16","kv_saving":%2})")
                            .arg(static_cast<int>(1536 * (1.0 + change)))
                            .arg(change)
                            .toStdString());
      ids.push_back(id);
    }
    CompareTableModel model(store);
    model.setRuns({ids[0], ids[1], ids[2]});
    const int col = model.columnOf(QStringLiteral("kv_saving"));
    QCOMPARE(model.index(0, col).data().toString(), QStringLiteral("0.0%"));
    QCOMPARE(model.index(1, col).data().toString(), QStringLiteral("37.5%"));
    QCOMPARE(model.index(2, col).data().toString(), QStringLiteral("81.3%"));
    for (int row = 0; row < 3; ++row) {
      const bool bold = model.index(row, col).data(Qt::FontRole).value<QFont>().bold();
      QCOMPARE(bold, row == 2);
      QCOMPARE(model.index(row, col).data(Qt::BackgroundRole).isValid(), row == 2);
    }
    // The bytes are counted in the dtype the runs train in, said in the header.
    QCOMPARE(model.headerData(model.columnOf(QStringLiteral("kv_bytes_per_token")), Qt::Horizontal, Qt::ToolTipRole)
                 .toString(),
             QStringLiteral("KV bytes/token (bf16)"));
    // The smallest cache is the best bytes/token too.
    const int bytes = model.columnOf(QStringLiteral("kv_bytes_per_token"));
    QVERIFY(model.index(2, bytes).data(Qt::FontRole).value<QFont>().bold());
    QVERIFY(!model.index(0, bytes).data(Qt::FontRole).value<QFont>().bold());
  }

  void compareTableShowsExactlyTheDifferingFields() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    RunSpec s;
    s.kind = RunKind::ConvertFinetune;
    s.modelDir = "models/base";
    s.conversion.enabled = true;
    std::vector<qint64> ids;
    for (auto [name, dkv, lr] : {std::tuple{"a", 16, 1e-3}, std::tuple{"b", 8, 1e-3}, std::tuple{"c", 16, 2e-3}}) {
      s.name = name;
      s.conversion.dKv = dkv;
      s.optimizer.lr = lr;
      ids.push_back(store->createRun(std::nullopt, name, s.kind, runSpecToJson(s), "cpu"));
    }
    {
      MetricWriter w = store->metricWriter(ids[0]);
      w.add("val/loss", 10, 1000, 1, 3.5);
      w.add("val/loss", 20, 2000, 2, 3.1);
      w.add("val/loss", 30, 3000, 3, 3.2);
      w.add("train/loss", 30, 3000, 3, 3.0);
      w.add("tokens_per_s", 30, 3000, 3, 1234.0);
    }
    store->setStatus(ids[0], RunStatus::Running);
    store->setStatus(ids[1], RunStatus::Running);
    store->setStatus(ids[1], RunStatus::Completed);
    store->setSummary(
        ids[1],
        R"({"tokens":4096,"parameters":123456,"kv_bytes_per_token":512,"kv_saving":-0.75,"tokens_per_s":900.5})");

    CompareTableModel model(store);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setRuns({ids[0], ids[1], ids[2]});
    QCOMPARE(model.differingFields(), (QStringList{QStringLiteral("conversion.d_kv"), QStringLiteral("optimizer.lr")}));
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.columnCount(), 1 + 9 + 2);
    // Metrics first, then the differing fields; the run's name is also the row header.
    QCOMPARE(model.headerData(1, Qt::Horizontal, Qt::ToolTipRole).toString(), QStringLiteral("Final val loss"));
    QCOMPARE(model.columnOf(QStringLiteral("conversion.d_kv")), 10);
    QCOMPARE(model.headerData(10, Qt::Horizontal).toString(), QStringLiteral("conversion.d_kv"));
    QCOMPARE(model.headerData(1, Qt::Vertical).toString(), QStringLiteral("b"));
    auto cell = [&](int row, const char* key) {
      return model.index(row, model.columnOf(QLatin1String(key))).data().toString();
    };
    QCOMPARE(cell(0, "run"), QStringLiteral("a"));
    QCOMPARE(cell(1, "conversion.d_kv"), QStringLiteral("8"));
    QCOMPARE(cell(2, "optimizer.lr"), QStringLiteral("0.002"));
    // A running run: losses, tokens and speed from its newest rows.
    QCOMPARE(cell(0, "final_val_loss"), QStringLiteral("3.2000"));
    QCOMPARE(cell(0, "best_val_loss"), QStringLiteral("3.1000"));
    QCOMPARE(model.index(0, model.columnOf(QStringLiteral("tokens"))).data(CompareTableModel::SortRole).toDouble(),
             3000.0);
    QCOMPARE(
        model.index(0, model.columnOf(QStringLiteral("tokens_per_s"))).data(CompareTableModel::SortRole).toDouble(),
        1234.0);
    QCOMPARE(cell(0, "status"), QStringLiteral("running"));
    QCOMPARE(cell(0, "parameters"), QStringLiteral("—"));
    // A finished run: its summary.
    QCOMPARE(cell(1, "kv_saving"), QStringLiteral("75.0%"));
    QCOMPARE(model.index(1, model.columnOf(QStringLiteral("parameters"))).data(CompareTableModel::SortRole).toDouble(),
             123456.0);
    QCOMPARE(model.index(1, model.columnOf(QStringLiteral("kv_bytes_per_token")))
                 .data(CompareTableModel::SortRole)
                 .toDouble(),
             512.0);
    QCOMPARE(cell(1, "status"), QStringLiteral("completed"));
    // Two runs alike but for d_kv: only that field; one run: none.
    model.setRuns({ids[0], ids[1]});
    QCOMPARE(model.differingFields(), QStringList{QStringLiteral("conversion.d_kv")});
    model.setRuns({ids[2]});
    QCOMPARE(model.differingFields(), QStringList{});
    QCOMPARE(model.columnCount(), 10);
    model.refresh();
  }

  void compareTableMatchesTokensAndMarksTheBest() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 a = store->createRun(std::nullopt, "a", "pretrain", "{}", "cpu");
    const qint64 b = store->createRun(std::nullopt, "b", "pretrain", "{}", "cpu");
    // a validated to 3000 tokens, b to 2000: matched at 2000, a interpolated there.
    {
      MetricWriter w = store->metricWriter(a);
      w.add("val/loss", 10, 1000, 1, 4.0);
      w.add("val/loss", 30, 3000, 3, 3.0);
      MetricWriter v = store->metricWriter(b);
      v.add("val/loss", 10, 1000, 1, 3.9);
      v.add("val/loss", 20, 2000, 2, 3.6);
    }
    // b finished once (summary 4096 tokens) and was resumed: its live rows count, not the summary.
    store->setStatus(b, RunStatus::Running);
    store->setStatus(b, RunStatus::Completed);
    store->setSummary(b, R"({"tokens":4096,"tokens_per_s":10.0})");
    store->setStatus(b, RunStatus::Running);
    {
      MetricWriter v = store->metricWriter(b);
      v.add("train/loss", 40, 5120, 4, 3.4);
      v.add("tokens_per_s", 40, 5120, 4, 777.0);
    }
    CompareTableModel model(store);
    model.setRuns({a, b});
    QCOMPARE(model.matchedTokens().value_or(-1), 2000.0);
    QVERIFY(model.headerData(model.columnOf(QStringLiteral("matched_val_loss")), Qt::Horizontal)
                .toString()
                .contains(QStringLiteral("2k")));
    auto sortValue = [&](int row, const char* key) {
      return model.index(row, model.columnOf(QLatin1String(key))).data(CompareTableModel::SortRole).toDouble();
    };
    QCOMPARE(sortValue(0, "matched_val_loss"), 3.5);
    QCOMPARE(sortValue(1, "matched_val_loss"), 3.6);
    QCOMPARE(sortValue(1, "tokens"), 5120.0);
    QCOMPARE(sortValue(1, "tokens_per_s"), 777.0);
    // The best of each metric is bold: a's matched and final losses (the
    // lower); nothing in a column with a single value or all values alike.
    for (const char* key : {"matched_val_loss", "final_val_loss"}) {
      const int column = model.columnOf(QLatin1String(key));
      QVERIFY(model.index(0, column).data(Qt::FontRole).value<QFont>().bold());
      QVERIFY(!model.index(1, column).data(Qt::FontRole).isValid());
    }
    const int speed = model.columnOf(QStringLiteral("tokens_per_s"));
    QVERIFY(!model.index(1, speed).data(Qt::FontRole).isValid());
  }

  // Eval tasks scored at checkpoints: one table column per task (acc at the
  // newest step), and a chart over the steps from the metric list.
  void evalTaskScoresInTheTableAndOverSteps() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    QVector<ChartRun> runs;
    for (const char* name : {"a", "b"}) {
      const qint64 id = store->createRun(std::nullopt, name, "pretrain", "{}", "cpu");
      MetricWriter w = store->metricWriter(id);
      const double gain = std::string(name) == "a" ? 0.1 : 0.2;
      for (int step : {50, 100}) {
        const double acc = 0.25 + gain * step / 100.0;
        for (const auto& [metric, value] : {std::pair{"acc", acc}, std::pair{"acc_norm", acc + 0.01}}) {
          EvaluationRecord e;
          e.runId = id;
          e.step = step;
          e.task = "arc_easy";
          e.metric = metric;
          e.value = value;
          e.stderrValue = 0.02;
          e.items = 100;
          store->addEvaluation(e);
          w.add(std::string("eval/arc_easy/") + metric, step, step * 1000, step, value);
        }
        w.add("train/loss", step, step * 1000, step, 3.0);
      }
      runs.push_back({id, QString::fromLatin1(name)});
    }
    CompareTableModel model(store);
    model.setRuns({runs[0].id, runs[1].id});
    const int column = model.columnOf(QStringLiteral("task:arc_easy"));
    QVERIFY(column > 0);
    QCOMPARE(model.headerData(column, Qt::Horizontal).toString(), QStringLiteral("arc_easy acc"));
    QCOMPARE(model.index(0, column).data().toString(), QStringLiteral("0.350"));
    QCOMPARE(model.index(1, column).data().toString(), QStringLiteral("0.450"));
    QVERIFY(model.index(1, column).data(Qt::FontRole).value<QFont>().bold());  // the higher is the better
    QVERIFY(model.index(1, column).data(Qt::ToolTipRole).toString().contains(QStringLiteral("step 100")));
    // The chart lists the task's metrics and draws them over the steps, unsmoothed.
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart));
    chart.setRuns(runs);
    QComboBox* metricBox = nullptr;
    for (QComboBox* box : chart.findChildren<QComboBox*>()) {
      if (box->findData(QStringLiteral("eval/arc_easy/acc")) >= 0) metricBox = box;
    }
    QVERIFY(metricBox != nullptr);
    metricBox->setFocus();
    while (metricBox->currentData().toString() != QStringLiteral("eval/arc_easy/acc"))
      QTest::keyClick(metricBox, Qt::Key_Down);
    QCOMPARE(chart.metric(), QStringLiteral("eval/arc_easy/acc"));
    QCOMPARE(chart.pointCount(runs[1].id, QStringLiteral("eval/arc_easy/acc")), 2);
    QCOMPARE(chart.crosshairLines(75.0).at(2), QStringLiteral("b: 0.4000"));  // halfway between 0.35 and 0.45
  }

  // A distilled run beside a plain one: the table's config columns say which
  // was distilled and how, and the chart offers the KL to the teacher by name,
  // chosen from the keyboard, drawn for the distilled run only.
  void aDistilledRunIsToldApartInTheTableAndItsKlIsCharted() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    RunSpec plain;
    plain.kind = RunKind::ConvertFinetune;
    plain.modelDir = "/models/base";
    plain.conversion.enabled = true;
    RunSpec distilled = plain;
    distilled.distill.enabled = true;
    distilled.distill.alpha = 0.7;
    QVector<ChartRun> runs;
    for (const auto& [name, spec] : {std::pair{"plain", plain}, std::pair{"distilled", distilled}}) {
      const qint64 id = store->createRun(std::nullopt, name, "convert-finetune", runSpecToJson(spec), "cpu");
      MetricWriter w = store->metricWriter(id);
      for (int step = 1; step <= 5; ++step) {
        w.add("train/loss", step, step * 1000, step, 4.0 - 0.1 * step);
        if (spec.distill.enabled) {
          w.add("loss/kd", step, step * 1000, step, 0.5 / step);
          w.add("loss/ce", step, step * 1000, step, 4.0 - 0.1 * step);
          w.add("loss/total", step, step * 1000, step, 0.3 * (4.0 - 0.1 * step) + 0.7 * 0.5 / step);
        }
      }
      w.flush();
      runs.push_back({id, QString::fromLatin1(name)});
    }
    CompareTableModel model(store);
    model.setRuns({runs[0].id, runs[1].id});
    const int enabled = model.columnOf(QStringLiteral("distill.enabled"));
    const int alpha = model.columnOf(QStringLiteral("distill.alpha"));
    QVERIFY2(enabled > 0, "a column says whether each run was distilled");
    QVERIFY(alpha > 0);
    QCOMPARE(model.index(0, enabled).data().toString(), QStringLiteral("false"));
    QCOMPARE(model.index(1, enabled).data().toString(), QStringLiteral("true"));
    QCOMPARE(model.index(0, alpha).data().toString(), QStringLiteral("—"));
    QCOMPARE(model.index(1, alpha).data().toString(), QStringLiteral("0.7"));

    ChartView chart(store);
    QVERIFY(uitest::showChart(chart));
    chart.setRuns(runs);
    QComboBox* metricBox = nullptr;
    for (QComboBox* box : chart.findChildren<QComboBox*>()) {
      if (box->findData(QStringLiteral("loss/kd")) >= 0) metricBox = box;
    }
    QVERIFY(metricBox != nullptr);
    QCOMPARE(metricBox->itemText(metricBox->findData(QStringLiteral("loss/kd"))),
             QStringLiteral("Distillation: KL to the teacher"));
    metricBox->setFocus();
    while (metricBox->currentData().toString() != QStringLiteral("loss/kd")) QTest::keyClick(metricBox, Qt::Key_Down);
    QCOMPARE(chart.metric(), QStringLiteral("loss/kd"));
    QCOMPARE(chart.pointCount(runs[1].id, QStringLiteral("loss/kd")), 5);
    QCOMPARE(chart.pointCount(runs[0].id, QStringLiteral("loss/kd")), 0);
  }

  void differenceToBaselineIsAlignedByTokensOnUnequalGrids() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 base = store->createRun(std::nullopt, "base", "finetune", "{}", "cpu");
    const qint64 run = store->createRun(std::nullopt, "dkv 8", "convert-finetune", "{}", "cpu");
    writeRows(*store, base, "train/loss", 500, 5, 64, [](double t) { return 3.0 - 2e-4 * t; });
    writeRows(*store, run, "train/loss", 300, 3, 96, [](double t) { return 2.0 - 1e-4 * t; });
    ChartView chart(store);
    chart.resize(900, 500);
    chart.show();
    chart.setMetric(QStringLiteral("train/loss"));
    chart.setRuns({{base, QStringLiteral("base")}, {run, QStringLiteral("dkv 8")}});
    chart.setCompareMode(CompareMode::Difference);
    chart.setBaseline(base);
    QCOMPARE(chart.curveLabels(), QStringList{QStringLiteral("dkv 8 \u2212 base")});
    const auto d = chart.curveData(QStringLiteral("dkv 8 \u2212 base"));
    QCOMPARE(static_cast<int>(d.size()), 99);  // the run's rows inside the baseline's token range
    for (const MetricPoint& p : d) QVERIFY(std::abs(p.value - (-1.0 + 1e-4 * static_cast<double>(p.tokens))) < 1e-9);
    // The other way round, and the CSV of the difference.
    chart.setBaseline(run);
    QCOMPARE(chart.curveLabels(), QStringList{QStringLiteral("base \u2212 dkv 8")});
    QTemporaryDir out;
    QVERIFY(chart.exportCsv(out.filePath(QStringLiteral("d.csv"))));
    QFile f(out.filePath(QStringLiteral("d.csv")));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = f.readAll().trimmed().split('\n');
    QCOMPARE(lines[0], QByteArray("run_id,run,metric,step,tokens,wall_time,value"));
    QVERIFY(lines[1].startsWith(QByteArray::number(base) + ",\"base \xe2\x88\x92 dkv 8\",train/loss difference,"));
  }

  void scaleAblationPresetPairsAreNoScaleMinusScaled() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    auto store = std::make_shared<RunStore>(ws.dbPath().toStdString());
    const Preset p = loadPreset(QStringLiteral(":/presets/scale-ablation.json"), QStringLiteral("demo"), ws.dir);
    QCOMPARE(p.chart.pairs.size(), 3);
    const auto exp = instantiatePreset(*store, p);
    const QVector<ChartRun> runs = chartRuns(*store, exp);
    QCOMPARE(runs.size(), 6);
    // Unequal grids: scaled runs log every 6 steps, no-scale runs every 4;
    // no-scale is worse by 0.05, 0.10, 0.15 for the three pairs.
    const QStringList variants = {QStringLiteral("mla"), QStringLiteral("gla-2"), QStringLiteral("mlra-2")};
    for (const ChartRun& r : runs) {
      for (int k = 0; k < 3; ++k) {
        if (r.name.endsWith(QLatin1Char(' ') + variants[k])) {
          writeRows(*store, r.id, "train/loss", 600, 6, 100, [](double t) { return 4.0 - 1e-4 * t; });
        } else if (r.name.endsWith(QLatin1Char(' ') + variants[k] + QStringLiteral(" noscale"))) {
          writeRows(*store, r.id, "train/loss", 600, 4, 100, [k](double t) { return 4.05 + 0.05 * k - 1e-4 * t; });
        }
      }
    }
    ComparePanel panel(store);
    panel.resize(1000, 700);
    panel.show();
    QAbstractItemModelTester tester(panel.tableModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    panel.setRuns(runs);
    panel.applyPresetChart(p.chart);
    ChartView* chart = panel.chart();
    QCOMPARE(chart->compareMode(), CompareMode::Paired);
    QCOMPARE(chart->xAxis(), ChartView::XAxis::Tokens);
    // The preset's "{scale} mla noscale" labels name the demo runs.
    QStringList expected;
    for (const QString& v : variants) {
      for (const char* m : {"train", "val"})
        expected << QStringLiteral("demo %1 noscale \u2212 demo %1 · %2").arg(v, QLatin1String(m));
    }
    QCOMPARE(chart->curveLabels(), expected);
    for (int k = 0; k < 3; ++k) {
      const auto d = chart->curveData(QStringLiteral("demo %1 noscale \u2212 demo %1 · train").arg(variants[k]));
      QCOMPARE(static_cast<int>(d.size()),
               149);  // no-scale rows at steps 8..600: from 800 tokens, past the scaled run's first 600
      for (const MetricPoint& pt : d) QVERIFY(std::abs(pt.value - 0.05 * (k + 1)) < 1e-9);
    }
    QVERIFY(panel.caption().contains(QStringLiteral("3 pair(s)")));
    QCOMPARE(panel.tableModel()->rowCount(), 6);
    // A selection without a pair's partner: that pair is reported, not drawn.
    panel.setRuns(runs.mid(0, 3));
    QVERIFY(chart->curveLabels().size() < 6);
    QVERIFY(panel.caption().contains(QStringLiteral("not selected")));
  }

  void crosshairListsEveryVisibleRunAndTheLegendTogglesRuns() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 a = store->createRun(std::nullopt, "a", "pretrain", "{}", "cpu");
    const qint64 b = store->createRun(std::nullopt, "b", "pretrain", "{}", "cpu");
    writeRows(*store, a, "train/loss", 100, 1, 10, [](double t) { return 5.0 - 0.001 * t; });
    writeRows(*store, b, "train/loss", 50, 2, 10, [](double) { return 2.5; });
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart));
    chart.setSmoothing(0.0);
    chart.setRuns({{a, QStringLiteral("a")}, {b, QStringLiteral("b")}});
    // Both with the same decimals.
    QCOMPARE(chart.crosshairLines(41.0), (QStringList{QStringLiteral("step 41"), QStringLiteral("a · train: 4.590"),
                                                      QStringLiteral("b · train: 2.500")}));
    QCOMPARE(chart.crosshairLines(75.0).size(), 2);  // b ends at step 50
    // The crosshair under the mouse shows the same lines.
    QChart* qc = chart.canvas()->chart();
    const QPointF at = qc->mapToPosition(QPointF(41.0, 3.0));
    chart.canvas()->showCrosshairAt(at);
    QVERIFY(chart.canvas()->crosshairVisible());
    QCOMPARE(chart.canvas()->crosshairLines().size(), 3);
    // One legend entry a run. Clicking a's entry hides a (curves, scale, crosshair); again shows it.
    ChartLegend* legend = chart.legend();
    QCOMPARE(legend->entries().size(), 2);
    const QRect entryA = legend->entryRect(a);
    QVERIFY(!entryA.isEmpty());
    QTest::mouseClick(legend, Qt::LeftButton, Qt::NoModifier, entryA.center());
    QVERIFY(!chart.runVisible(a));
    QCOMPARE(chart.crosshairLines(41.0), (QStringList{QStringLiteral("step 41"), QStringLiteral("b · train: 2.500")}));
    QCOMPARE(legend->entries().size(), 2);  // the entry stays, struck out
    QVERIFY(!legend->entries().front().visible);
    QTest::mouseClick(legend, Qt::LeftButton, Qt::NoModifier, legend->entryRect(a).center());
    QVERIFY(chart.runVisible(a));
    QCOMPARE(chart.crosshairLines(41.0).size(), 3);
  }

  void zoomRereadsTheVisibleWindowAndResetRestoresTheWhole() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 run = store->createRun(std::nullopt, "long", "pretrain", "{}", "cpu");
    writeRows(*store, run, "train/loss", 100000, 1, 8, [](double t) { return 3.0 + std::sin(t * 1e-3); });
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart));
    chart.setMetric(QStringLiteral("train/loss"));
    chart.setRuns({{run, QStringLiteral("long")}});
    const int overview = chart.loadedRows(run, QStringLiteral("train/loss"));
    QVERIFY(overview <= static_cast<int>(ChartView::kMaxPoints) && overview > 1000);
    QCOMPARE(chart.pointCount(run, QStringLiteral("train/loss")), overview);
    // Qt Charts gets at most two points a pixel column of the plot.
    QTRY_VERIFY(chart.drawnPointCount(run, QStringLiteral("train/loss")) <=
                2 * chart.canvas()->chart()->plotArea().width() + 2);
    QVERIFY(chart.followsData());
    chart.zoomToX(50000, 51000);
    QCOMPARE(chart.windowReadCount(), 1);
    QCOMPARE(chart.loadedRows(run, QStringLiteral("train/loss")), 2001);  // steps 49500..51500, raw
    QCOMPARE(chart.pointCount(run, QStringLiteral("train/loss")), 2001);
    QVERIFY(!chart.followsData());
    chart.zoomToX(50200, 50300);  // inside the raw window: no read
    QCOMPARE(chart.windowReadCount(), 1);
    chart.resetView();
    QCOMPARE(chart.loadedRows(run, QStringLiteral("train/loss")), overview);
    QVERIFY(chart.followsData());
    QVERIFY(chart.visibleX().first <= 1 && chart.visibleX().second >= 100000);

    // The mouse: ten wheel steps in at the plot's centre, then a refinement.
    ChartCanvas* canvas = chart.canvas();
    const QPointF centre = canvas->chart()->plotArea().center();
    for (int i = 0; i < 10; ++i) {
      QWheelEvent wheel(centre, canvas->mapToGlobal(centre.toPoint()), QPoint(), QPoint(0, 120), Qt::NoButton,
                        Qt::NoModifier, Qt::NoScrollPhase, false);
      QApplication::sendEvent(canvas->viewport(), &wheel);
    }
    const auto [w0, w1] = chart.visibleX();
    QVERIFY2(w1 - w0 < 100000 / 8.0, qPrintable(QStringLiteral("%1 %2").arg(w0).arg(w1)));
    QTRY_COMPARE_WITH_TIMEOUT(chart.windowReadCount(), 2, 2000);
    // A rubber band over a fifth of the plot's width zooms to it.
    const QRectF plot = canvas->chart()->plotArea();
    const QPoint from(static_cast<int>(plot.left() + plot.width() * 0.4), static_cast<int>(plot.top() + 20));
    const QPoint to(static_cast<int>(plot.left() + plot.width() * 0.6), static_cast<int>(plot.bottom() - 20));
    QTest::mousePress(canvas->viewport(), Qt::LeftButton, Qt::NoModifier, from);
    QTest::mouseMove(canvas->viewport(), to);
    QTest::mouseRelease(canvas->viewport(), Qt::LeftButton, Qt::NoModifier, to);
    const auto [b0, b1] = chart.visibleX();
    QVERIFY(b0 > w0 && b1 < w1);
    QVERIFY(std::abs((b1 - b0) - 0.2 * (w1 - w0)) < 0.02 * (w1 - w0));
    // A middle-button drag pans right to left: the range moves to higher x.
    QTest::mousePress(canvas->viewport(), Qt::MiddleButton, Qt::NoModifier, plot.center().toPoint());
    QTest::mouseMove(canvas->viewport(), plot.center().toPoint() - QPoint(100, 0));
    QTest::mouseRelease(canvas->viewport(), Qt::MiddleButton, Qt::NoModifier, plot.center().toPoint() - QPoint(100, 0));
    QVERIFY(chart.visibleX().first > b0);
    // A double click resets.
    QTest::mouseDClick(canvas->viewport(), Qt::LeftButton, Qt::NoModifier, plot.center().toPoint());
    QVERIFY(chart.followsData());
    QCOMPARE(chart.loadedRows(run, QStringLiteral("train/loss")), overview);
  }

  void xByWallTime() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 run = store->createRun(std::nullopt, "w", "pretrain", "{}", "cpu");
    writeRows(*store, run, "train/loss", 100, 1, 10, [](double) { return 1.0; });
    ChartView chart(store);
    chart.setRuns({{run, QStringLiteral("w")}});
    chart.setXAxis(ChartView::XAxis::WallTime);
    QCOMPARE(chart.visibleX(), (std::pair<double, double>{0.5, 50.0}));  // wall time = step / 2
    QCOMPARE(chart.crosshairLines(25.0).first(), QStringLiteral("25.0 s"));
  }

  // The quantized-cache preset's experiment, its runs scored: one row per
  // model (the evaluation jobs' own rows left out, their figures are in the
  // rows of the runs they evaluate), one column per task and cache from full
  // precision down, a loss ranked lower-is-better and the passkey share as a
  // percentage; clicking a column's header sorts the rows by it.
  void quantizedCacheColumnsOneRowPerModel() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    std::vector<std::int64_t> ids;
    {
      RunStore store(ws.dbPath().toStdString());
      instantiatePreset(
          store, loadPreset(QStringLiteral(":/presets/quantized-cache.json"), QStringLiteral("demo"), ws.dir), &ids);
      for (std::int64_t id : ids) {
        store.setStatus(id, RunStatus::Running);
        store.setStatus(id, RunStatus::Completed);
      }
      // What the two evaluation jobs store under the runs they evaluate.
      const std::vector<KvQuantSettings> caches = {{0}, {8, 64, 128}, {4, 32, 64}};
      const double losses[2][3] = {{4.8183, 4.8183, 4.8186}, {5.0850, 5.0847, 5.0881}};
      for (int m = 0; m < 2; ++m) {
        for (int c = 0; c < 3; ++c) {
          EvaluationRecord e;
          e.runId = ids[static_cast<std::size_t>(m)];
          e.step = 60;
          e.task = kvQuantTaskName("held-out", caches[static_cast<std::size_t>(c)]);
          e.metric = "loss";
          e.value = losses[m][c];
          e.items = 16384;
          store.addEvaluation(e);
          for (const char* cell : {"len=256,depth=0", "len=256,depth=1", "len=512,depth=0", "len=512,depth=1"}) {
            e.task = kvQuantTaskName("passkey", caches[static_cast<std::size_t>(c)]);
            e.metric = cell;
            e.value = m == 0 && std::string(cell) == "len=256,depth=0" ? 1.0 : 0.0;  // base: one cell of four
            e.items = 2;
            store.addEvaluation(e);
          }
        }
      }
    }
    const MainWindowOptions options = uitest::quietWindowOptions();
    MainWindow w(ws, options);
    w.resize(1440, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTreeView* tree = w.runsPanel()->view();
    const QModelIndex exp = w.runModel()->indexOfRun(ids[0]).parent();
    tree->scrollTo(exp);
    QTest::mouseClick(tree->viewport(), Qt::LeftButton, Qt::NoModifier, tree->visualRect(exp).center());
    CompareTableModel* model = w.comparePanel()->tableModel();
    QTRY_COMPARE(model->rowCount(), 2);
    QCOMPARE(model->index(0, 0).data().toString(), QStringLiteral("demo-gqa base fine-tune"));
    QCOMPARE(w.chart()->runs().size(), 2);  // nor do the evaluation jobs have curves or legend entries
    // A group or window other than the default on a third line.
    const QStringList expected = {QStringLiteral("held-out loss"),
                                  QStringLiteral("held-out loss\nint8 cache"),
                                  QStringLiteral("held-out loss\nint4 cache\ngroup 32, window 64"),
                                  QStringLiteral("passkey"),
                                  QStringLiteral("passkey\nint8 cache"),
                                  QStringLiteral("passkey\nint4 cache\ngroup 32, window 64")};
    const int first = model->columnOf(QStringLiteral("task:held-out"));
    QVERIFY(first > 0);
    for (int k = 0; k < expected.size(); ++k)
      QCOMPARE(model->headerData(first + k, Qt::Horizontal).toString(), expected[k]);
    const int int4 = first + 2, passkey = first + 3;
    QCOMPARE(model->index(0, int4).data().toString(), QStringLiteral("4.8186"));
    QCOMPARE(model->index(1, int4).data().toString(), QStringLiteral("5.0881"));
    QVERIFY(model->index(0, int4).data(Qt::FontRole).value<QFont>().bold());  // the lower loss
    QVERIFY(!model->index(1, int4).data(Qt::FontRole).value<QFont>().bold());
    QCOMPARE(model->index(0, passkey).data().toString(), QStringLiteral("25%"));
    QCOMPARE(model->index(1, passkey).data().toString(), QStringLiteral("0%"));
    QVERIFY(model->index(0, passkey).data(Qt::FontRole).value<QFont>().bold());  // the higher share
    QVERIFY(model->index(0, int4).data(Qt::ToolTipRole).toString().contains(QStringLiteral("over 16,384 tokens")));
    QVERIFY(model->index(0, passkey).data(Qt::ToolTipRole).toString().contains(QStringLiteral("4 cells")));
    // A click on the int4 loss's header sorts by it: once ascending, twice descending.
    QTableView* table = w.comparePanel()->table();
    QHeaderView* header = table->horizontalHeader();
    auto clickHeader = [&](int column) {
      table->scrollTo(table->model()->index(0, column));
      const int x = header->sectionViewportPosition(column) + header->sectionSize(column) / 2;
      QTest::mouseClick(header->viewport(), Qt::LeftButton, Qt::NoModifier, QPoint(x, header->height() / 2));
    };
    auto topRow = [&] { return table->model()->index(0, 0).data().toString(); };
    clickHeader(int4);
    const QString afterOne = topRow();
    clickHeader(int4);
    QVERIFY(topRow() != afterOne);
    QCOMPARE(QSet<QString>({afterOne, topRow()}),
             QSet<QString>({QStringLiteral("demo-gqa base fine-tune"), QStringLiteral("demo-gqa d_kv 8")}));
  }

  void eachPresetExperimentOpensOnItsFigure() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    std::map<QString, qint64> experiments;
    {
      RunStore store(ws.dbPath().toStdString());
      for (const QString& id :
           {QStringLiteral("rope-strategies"), QStringLiteral("dkv-sweep"), QStringLiteral("scale-ablation")}) {
        experiments[id] = instantiatePreset(
            store, loadPreset(QStringLiteral(":/presets/%1.json").arg(id), QStringLiteral("demo"), ws.dir));
      }
    }
    const MainWindowOptions options = uitest::quietWindowOptions();
    MainWindow w(ws, options);
    w.show();
    auto selectExperiment = [&](qint64 exp) {
      for (int r = 0; r < w.runModel()->rowCount(); ++r) {
        const QModelIndex idx = w.runModel()->index(r, 0);
        if (idx.data(RunTreeModel::ExperimentIdRole).toLongLong() == exp) {
          w.runsPanel()->view()->selectionModel()->select(
              idx, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
          return true;
        }
      }
      return false;
    };
    QVERIFY(selectExperiment(experiments[QStringLiteral("scale-ablation")]));
    QCOMPARE(w.chart()->runs().size(), 6);
    QCOMPARE(w.chart()->compareMode(), CompareMode::Paired);
    QCOMPARE(w.chart()->xAxis(), ChartView::XAxis::Tokens);
    QCOMPARE(static_cast<int>(w.chart()->pairs().size()), 3);
    QVERIFY(w.comparePanel()->caption().startsWith(QStringLiteral("loss(no scale) - loss(scaled)")));
    QCOMPARE(w.chart()->smoothing(), 0.8);

    QVERIFY(selectExperiment(experiments[QStringLiteral("dkv-sweep")]));
    QCOMPARE(w.chart()->runs().size(), 4);
    QCOMPARE(w.chart()->compareMode(), CompareMode::Curves);
    QCOMPARE(w.chart()->xAxis(), ChartView::XAxis::Tokens);
    QCOMPARE(w.chart()->metric(), QStringLiteral("loss"));
    qint64 baseRun = 0;
    for (const ChartRun& r : w.chart()->runs()) {
      if (r.name == QLatin1String("demo-gqa base fine-tune")) baseRun = r.id;
    }
    QCOMPARE(w.chart()->baseline(), baseRun);  // the reference of difference mode

    QCOMPARE(w.chart()->smoothing(), 0.8);  // 60-step runs read at the preset's smoothing

    QVERIFY(selectExperiment(experiments[QStringLiteral("rope-strategies")]));
    QCOMPARE(w.chart()->runs().size(), 6);
    QCOMPARE(w.chart()->compareMode(), CompareMode::Curves);
    // The caption says validation loss: the chart shows it, not spiky train curves.
    QVERIFY(w.comparePanel()->caption().startsWith(QStringLiteral("validation loss")));
    QCOMPARE(w.chart()->metric(), QStringLiteral("val/loss"));
    QCOMPARE(w.comparePanel()->tableModel()->rowCount(), 6);
    // The five strategies differ in their rope strategy; the sixth run is the
    // DeepSeek target at the same r and d_kv (the same KV budget).
    const QStringList differing = w.comparePanel()->tableModel()->differingFields();
    QVERIFY2(differing.contains(QStringLiteral("conversion.rope_strategy")),
             qPrintable(differing.join(QLatin1Char(' '))));
    QVERIFY2(differing.contains(QStringLiteral("conversion.target")), qPrintable(differing.join(QLatin1Char(' '))));
    QVERIFY2(!differing.contains(QStringLiteral("conversion.d_kv")), qPrintable(differing.join(QLatin1Char(' '))));
    QVERIFY2(!differing.contains(QStringLiteral("conversion.rope_pairs")),
             qPrintable(differing.join(QLatin1Char(' '))));

    // Runs across experiments: overlaid as they are.
    const QModelIndex r1 = w.runModel()->indexOfRun(1), r2 = w.runModel()->indexOfRun(12);
    w.runsPanel()->view()->selectionModel()->select(r1,
                                                    QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    w.runsPanel()->view()->selectionModel()->select(r2, QItemSelectionModel::Select | QItemSelectionModel::Rows);
    QCOMPARE(w.chart()->runs().size(), 2);

    // The table scrolled sideways in one experiment starts at its first
    // columns in the next.
    w.resize(1000, 760);
    QVERIFY(selectExperiment(experiments[QStringLiteral("rope-strategies")]));
    QScrollBar* sideways = w.comparePanel()->table()->horizontalScrollBar();
    QTRY_VERIFY2(sideways->maximum() > 0, "the compare table is wider than its view at 1000 px");
    sideways->setValue(sideways->maximum());
    QVERIFY(selectExperiment(experiments[QStringLiteral("dkv-sweep")]));
    QCOMPARE(sideways->value(), 0);
  }
};

QTEST_MAIN(TestCompareView)
#include "test_compare_view.moc"
