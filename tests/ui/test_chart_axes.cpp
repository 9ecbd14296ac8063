// The chart's axes and run identity, driven as a user drives them: nice 1-2-5
// ticks for the ranges researchers see, y fitted to the visible data after a
// run streams in (no empty bands), labelled log ticks inside a decade, a zero
// line for differences, legend click / double click / hover with the mouse,
// distinct stored colours for thirty runs across experiments, and runs
// grouped by a config field (mean and min-max band, chosen from the keyboard),
// and small multiples with linked zoom and crosshair.
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QItemSelectionModel>
#include <QScreen>
#include <QTemporaryDir>
#include <QTreeView>
#include <QWindow>
#include <QtTest>
#include <cmath>
#include <random>

#include "charts/axis_ticks.h"
#include "charts/chart_canvas.h"
#include "charts/chart_legend.h"
#include "charts/chart_view.h"
#include "charts/run_palette.h"
#include "charts/smoothing.h"
#include "latentlab/run_store.h"
#include "main_window.h"
#include "models/run_tree_model.h"
#include "panels/runs_panel.h"
#include "ui_test_support.h"
#include "workspace.h"

using namespace latentlab;
using namespace latentlab::ui;

namespace {

// True when v is k * step for an integer k and step is 1, 2 or 5 times a power of ten.
bool isNiceMultiple(double v, double step) {
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const bool niceStep = std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 || std::abs(mantissa - 5) < 1e-9;
  const double k = v / step;
  return niceStep && std::abs(k - std::round(k)) < 1e-6;
}

}  // namespace

class TestChartAxes : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { uitest::isolateSettings(); }

  void ticksAreOneTwoFiveMultiplesThatCoverTheData() {
    struct Case {
      double lo, hi;
      TickStyle style;
      QStringList expect;  // labels, when the case pins them
    };
    const std::vector<Case> cases = {
        {4.87, 5.09, TickStyle::Plain, {}},
        {0,
         61440,
         TickStyle::Count,
         {QStringLiteral("0"), QStringLiteral("10k"), QStringLiteral("20k"), QStringLiteral("30k"),
          QStringLiteral("40k"), QStringLiteral("50k"), QStringLiteral("60k")}},
        {-0.07, 0.02, TickStyle::Plain, {}},
        {0, 1e-3, TickStyle::Plain, {}},
        {1, 300, TickStyle::Count, {}},
        {0, 1.5e6, TickStyle::Count, {}},
    };
    for (const Case& c : cases) {
      // The chart's y range: the data padded by 6% each side; x: the data.
      const double pad = c.style == TickStyle::Plain ? 0.06 * (c.hi - c.lo) : 0;
      const double lo = c.lo - pad, hi = c.hi + pad;
      const AxisTicks t = niceTicks(lo, hi, 8, TickStyle(c.style));
      QVERIFY2(t.values.size() >= 3 && t.values.size() <= 8,
               qPrintable(QStringLiteral("%1..%2: %3 ticks").arg(c.lo).arg(c.hi).arg(t.values.size())));
      for (double v : t.values) {
        QVERIFY2(isNiceMultiple(v, t.step), qPrintable(QStringLiteral("%1 step %2").arg(v).arg(t.step)));
        QVERIFY(v >= lo - 1e-12 && v <= hi + 1e-12);
      }
      // Bounds cover the data with at most one tick step of padding each side.
      QVERIFY(lo <= c.lo && hi >= c.hi);
      QVERIFY(c.lo - lo <= t.step && hi - c.hi <= t.step);
      if (!c.expect.isEmpty()) {
        QStringList labels;
        for (const auto& l : t.labels) labels << QString::fromStdString(l);
        QCOMPARE(labels, c.expect);
      }
    }
    // Labels read as written by hand: no "-0", no 1.63e+04, small steps in short scientific form.
    const AxisTicks diff = niceTicks(-0.0742, 0.0251, 8, TickStyle::Plain);
    QStringList d;
    for (const auto& l : diff.labels) d << QString::fromStdString(l);
    QCOMPARE(d, (QStringList{QStringLiteral("-0.06"), QStringLiteral("-0.04"), QStringLiteral("-0.02"),
                             QStringLiteral("0"), QStringLiteral("0.02")}));
    QCOMPARE(tickLabel(4e-4, 2e-4, TickStyle::Plain), std::string("4e-4"));
    QCOMPARE(tickLabel(1.5e6, 5e5, TickStyle::Count), std::string("1.5M"));
    QCOMPARE(tickLabel(4.9, 0.05, TickStyle::Plain), std::string("4.90"));
    QCOMPARE(tickLabel(-1e-20, 0.01, TickStyle::Plain), std::string("0"));
  }

  void logTicksAreLabelledInsideADecade() {
    // Loss 4..9: inside one decade, every tick labelled.
    const AxisTicks inside = logTicks(std::log10(4.0), std::log10(9.0), 8);
    QVERIFY(inside.labels.size() >= 3);
    for (std::size_t i = 0; i < inside.values.size(); ++i) {
      QCOMPARE(QString::number(std::pow(10.0, inside.values[i]), 'g', 6), QString::fromStdString(inside.labels[i]));
    }
    // Two decades: 1, 2, (3,) 5 times the powers of ten.
    const AxisTicks two = logTicks(std::log10(0.2), std::log10(30.0), 10);
    QStringList l;
    for (const auto& s : two.labels) l << QString::fromStdString(s);
    QVERIFY2(l.contains(QStringLiteral("0.5")) && l.contains(QStringLiteral("2")) && l.contains(QStringLiteral("20")),
             qPrintable(l.join(' ')));
  }

  void yFitsTheVisibleDataAfterARunStreamsIn() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 a =
        store->createRun(std::nullopt, "demo 2-norm d_kv 8", "convert-finetune", R"({"steps":300})", "cpu");
    const qint64 b = store->createRun(std::nullopt, "demo high d_kv 8", "convert-finetune", R"({"steps":300})", "cpu");
    store->setStatus(a, RunStatus::Running);
    store->setStatus(b, RunStatus::Running);
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart, 900, 560));
    chart.setRuns(
        {{a, QStringLiteral("demo 2-norm d_kv 8")}, {b, QStringLiteral("demo high d_kv 8")}});  // empty: nothing yet
    // Loss from 8.3 falling to about 5 with noise, validation every 50 steps, streamed in bursts.
    std::mt19937 rng(7);
    std::normal_distribution<double> noise(0.0, 0.08);
    auto lossAt = [](int s, double offset) { return 4.9 + offset + 3.4 * std::exp(-s / 12.0); };
    for (int s0 = 1; s0 <= 300; s0 += 25) {
      for (const qint64 run : {a, b}) {
        MetricWriter w = store->metricWriter(run);
        const double off = run == a ? 0.0 : 0.12;
        for (int s = s0; s < s0 + 25; ++s) {
          w.add("train/loss", s, s * 1024, s * 0.1, lossAt(s, off) + noise(rng));
          if (s % 50 == 0) w.add("val/loss", s, s * 1024, s * 0.1, lossAt(s, off) - 0.05);
        }
      }
      chart.pollStore();
      chart.redrawNow();
      // While running, x reaches the planned 300 steps, the steps to come shaded.
      QVERIFY(chart.visibleX().second >= 300);
      QCOMPARE(chart.canvas()->faintSpanVisible(), s0 + 24 < 300);
    }
    store->setStatus(a, RunStatus::Completed);
    store->setStatus(b, RunStatus::Completed);
    chart.pollStore();
    chart.redrawNow();
    // Finished: x spans the data exactly, y the 5th-95th percentile band (plus
    // the validation points) with a small margin; nothing pressed.
    QCOMPARE(chart.visibleX(), (std::pair<double, double>{1.0, 300.0}));
    QVERIFY(!chart.canvas()->faintSpanVisible());
    std::vector<double> values;
    double lowest = 1e9;
    for (const qint64 run : {a, b}) {
      for (const MetricPoint& p : store->series(run, "train/loss", 0, 1'000'000, 100000)) values.push_back(p.value);
      for (const MetricPoint& p : store->series(run, "val/loss", 0, 1'000'000, 100000))
        lowest = std::min(lowest, p.value);
    }
    const double q05 = quantile(values, 0.05), q95 = quantile(values, 0.95);
    lowest = std::min(lowest, q05);
    const auto [y0, y1] = chart.visibleY();
    QVERIFY2(y0 <= q05 && y1 >= q95,
             qPrintable(QStringLiteral("y %1..%2, band %3..%4").arg(y0).arg(y1).arg(q05).arg(q95)));
    QVERIFY2((lowest - y0) / (y1 - y0) <= 0.25,
             qPrintable(QStringLiteral("empty below: %1").arg((lowest - y0) / (y1 - y0))));
    QVERIFY2((y1 - y0) < 2.0, qPrintable(QStringLiteral("y %1..%2 for curves near 5").arg(y0).arg(y1)));
    // The ticks the axes draw are nice numbers.
    QVERIFY(chart.yTickLabels().size() >= 3);
    for (const QString& l : chart.xTickLabels())
      QVERIFY2(l.toDouble() == 0 || std::fmod(l.toDouble(), 50) == 0, qPrintable(l));
    // Tokens: SI suffixes.
    chart.setXAxis(ChartView::XAxis::Tokens);
    QVERIFY2(
        chart.xTickLabels().contains(QStringLiteral("100k")) || chart.xTickLabels().contains(QStringLiteral("200k")),
        qPrintable(chart.xTickLabels().join(' ')));
    // Ignoring outliers off: the early 8.3 is in range again.
    chart.setIgnoreOutliers(false);
    QVERIFY(chart.visibleY().second > 8.0);
    // Log y on loss that stays inside a decade: labelled ticks.
    chart.setLogY(true);
    QVERIFY2(chart.yTickLabels().size() >= 3, qPrintable(chart.yTickLabels().join(' ')));
    for (double v : chart.yTickValues())
      QVERIFY(v >= chart.visibleY().first * 0.999 && v <= chart.visibleY().second * 1.001);
    // Differences get a zero line; overlays do not.
    QVERIFY(!chart.hasZeroLine());
    chart.setCompareMode(CompareMode::Difference);
    QVERIFY(chart.hasZeroLine());
  }

  // Difference to baseline is read against zero: the zero line and a tick
  // labelled 0 stay in view even when every difference is positive.
  void differenceToBaselineKeepsZeroAndItsLabelInView() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    QVector<ChartRun> runs;
    for (const char* name : {"base", "worse"}) {
      const qint64 id = store->createRun(std::nullopt, name, "finetune", "{}", "cpu");
      MetricWriter w = store->metricWriter(id);
      const double gap = runs.isEmpty() ? 0.0 : 1.0;
      for (int s = 1; s <= 60; ++s) w.add("val/loss", s, s * 10, s, 4.0 - 0.01 * s + gap * (0.2 + 0.005 * s));
      runs.push_back({id, QString::fromLatin1(name)});
    }
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart));
    chart.setMetric(QStringLiteral("val/loss"));
    chart.setRuns(runs);
    chart.setCompareMode(CompareMode::Difference);
    chart.setBaseline(runs[0].id);
    const auto [y0, y1] = chart.visibleY();
    QVERIFY2(y0 < 0 && y1 > 0.45, qPrintable(QStringLiteral("y %1..%2").arg(y0).arg(y1)));
    const auto ticks = chart.yTickValues();
    QVERIFY2(std::any_of(ticks.begin(), ticks.end(), [](double v) { return std::abs(v) < 1e-12; }),
             qPrintable(chart.yTickLabels().join(' ')));
  }

  // At smoothing 0.98 the smoothed curve (the one drawn bold) is in range: all
  // of it without outlier trimming, all but its own 5% outliers with it.
  void theSmoothedCurveIsInRangeAtHighSmoothing() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 id = store->createRun(std::nullopt, "noisy", "pretrain", "{}", "cpu");
    std::vector<double> raw;
    {
      std::mt19937 rng(7);
      std::normal_distribution<double> noise(0.0, 0.15);
      MetricWriter w = store->metricWriter(id);
      for (int s = 1; s <= 120; ++s) {
        raw.push_back(5.0 + 3.3 * std::exp(-s / 6.0) + noise(rng));
        w.add("train/loss", s, s * 10, s, raw.back());
      }
    }
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart));
    chart.setMetric(QStringLiteral("train/loss"));
    chart.setRuns({{id, QStringLiteral("noisy")}});
    chart.setSmoothing(0.98);
    const std::vector<double> smoothed = smoothTensorBoard(raw, 0.98);
    auto inside = [&] {
      const auto [y0, y1] = chart.visibleY();
      return static_cast<double>(
                 std::count_if(smoothed.begin(), smoothed.end(), [&](double v) { return v >= y0 && v <= y1; })) /
             static_cast<double>(smoothed.size());
    };
    QVERIFY2(inside() >= 0.95, qPrintable(QString::number(inside())));
    chart.setIgnoreOutliers(false);
    QCOMPARE(inside(), 1.0);
  }

  // After a zoom (a drag) and the right click that resets it, what is on the
  // screen is what a fresh paint draws: no axis label is left over from the
  // zoomed view beside the new one.
  void aRightClickResetLeavesNoStaleAxisLabels() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 id = store->createRun(std::nullopt, "run", "pretrain", "{}", "cpu");
    {
      MetricWriter w = store->metricWriter(id);
      for (int s = 1; s <= 400; ++s) w.add("train/loss", s, s * 1000, s, 3.0 + 6.0 * std::exp(-s / 60.0));
    }
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart, 900, 520));
    chart.setMetric(QStringLiteral("train/loss"));
    chart.setRuns({{id, QStringLiteral("run")}});
    QTest::qWait(100);
    QWidget* viewport = chart.canvas()->viewport();
    const QRectF plot = chart.canvas()->chart()->plotArea();
    const QPoint from(static_cast<int>(plot.left() + plot.width() * 0.6), static_cast<int>(plot.center().y()));
    const QPoint to(static_cast<int>(plot.left() + plot.width() * 0.8), static_cast<int>(plot.center().y()));
    QWindow* window = chart.windowHandle();
    QTest::mousePress(window, Qt::LeftButton, {}, viewport->mapTo(&chart, from));
    QTest::mouseMove(window, viewport->mapTo(&chart, to));
    QTest::mouseRelease(window, Qt::LeftButton, {}, viewport->mapTo(&chart, to));
    QTRY_VERIFY(chart.visibleX().first > 100);
    QTest::qWait(300);
    QTest::mouseClick(window, Qt::RightButton, {}, viewport->mapTo(&chart, from));
    QTRY_VERIFY(chart.visibleX().first < 50);
    QTest::qWait(300);
    const QImage onScreen =
        window->screen()->grabWindow(window->winId()).toImage().convertToFormat(QImage::Format_RGB32);
    const QImage fresh = chart.grab().toImage().convertToFormat(QImage::Format_RGB32);
    QCOMPARE(onScreen.size(), fresh.size());
    int differing = 0;
    for (int y = 0; y < fresh.height(); ++y)
      for (int x = 0; x < fresh.width(); ++x) differing += onScreen.pixel(x, y) != fresh.pixel(x, y);
    if (differing > 0) {
      onScreen.save(dir.filePath(QStringLiteral("screen.png")));
      fresh.save(dir.filePath(QStringLiteral("fresh.png")));
    }
    QVERIFY2(differing == 0, qPrintable(QStringLiteral("%1 pixels differ from a fresh paint").arg(differing)));
  }

  // The crosshair gives every run's value with the same decimals.
  void theCrosshairReadsEveryValueWithTheSameDecimals() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    QVector<ChartRun> runs;
    for (auto [name, value] : {std::pair{"a", 5.2530}, std::pair{"b", 5.2459}}) {
      const qint64 id = store->createRun(std::nullopt, name, "pretrain", "{}", "cpu");
      MetricWriter w = store->metricWriter(id);
      for (int s = 1; s <= 10; ++s) w.add("val/loss", s, s * 10, s, value);
      runs.push_back({id, QString::fromLatin1(name)});
    }
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart));
    chart.setMetric(QStringLiteral("val/loss"));
    chart.setRuns(runs);
    const QStringList lines = chart.crosshairLines(5.0);
    QVERIFY2(lines.size() == 3, qPrintable(lines.join(QLatin1Char('|'))));
    QVERIFY2(lines[1].endsWith(QStringLiteral(": 5.253")) && lines[2].endsWith(QStringLiteral(": 5.246")),
             qPrintable(lines.join(QLatin1Char('|'))));
  }

  // Groups are drawn in distinct colours even when their first runs' own
  // colours are alike (run ids 1 and 10 share a palette entry).
  void groupsGetDistinctColours() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    QVector<ChartRun> runs;
    for (int i = 1; i <= 10; ++i) {
      const char* attention = i < 10 ? "gla-2" : "mlra-2";
      const std::string spec = std::string("{\"attention\":\"") + attention + "\",\"seed\":" + std::to_string(i) + "}";
      const qint64 id = store->createRun(std::nullopt, "run " + std::to_string(i), "pretrain", spec, "cpu");
      MetricWriter w = store->metricWriter(id);
      for (int s = 1; s <= 20; ++s) w.add("train/loss", s, s * 10, s, 4.0 + 0.01 * i - 0.01 * s);
      runs.push_back({id, QString::fromStdString("run " + std::to_string(i))});
    }
    QCOMPARE(runColor(runs[0].id), runColor(runs[9].id));  // the case: first runs alike
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart));
    chart.setMetric(QStringLiteral("train/loss"));
    chart.setRuns(runs);
    chart.setGroupBy(QStringLiteral("attention"));
    const auto entries = chart.legend()->entries();
    QCOMPARE(entries.size(), 2);
    QVERIFY2(entries[0].color != entries[1].color,
             qPrintable(entries[0].color.name() + QLatin1Char(' ') + entries[1].color.name()));
  }

  void legendClicksHideSoloAndHighlightRuns() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    QVector<ChartRun> runs;
    for (const char* name : {"x seed 1", "x seed 2", "x seed 3"}) {
      const qint64 id = store->createRun(std::nullopt, name, "pretrain", "{}", "cpu");
      MetricWriter w = store->metricWriter(id);
      for (int s = 1; s <= 50; ++s) w.add("train/loss", s, s * 10, s, 3.0 + 0.1 * static_cast<double>(id) - 0.01 * s);
      runs.push_back({id, QString::fromLatin1(name)});
    }
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart));
    chart.setMetric(QStringLiteral("train/loss"));
    chart.setRuns(runs);
    ChartLegend* legend = chart.legend();
    QCOMPARE(legend->entries().size(), 3);
    const qint64 first = runs[0].id, second = runs[1].id, third = runs[2].id;
    // Click: hide; click again: show.
    QTest::mouseClick(legend, Qt::LeftButton, Qt::NoModifier, legend->entryRect(second).center());
    QVERIFY(!chart.runVisible(second));
    QVERIFY(chart.runVisible(first) && chart.runVisible(third));
    QTest::mouseClick(legend, Qt::LeftButton, Qt::NoModifier, legend->entryRect(second).center());
    QVERIFY(chart.runVisible(second));
    // Double click: only that run; double click again: all.
    QTest::mouseDClick(legend, Qt::LeftButton, Qt::NoModifier, legend->entryRect(third).center());
    QVERIFY(chart.runVisible(third));
    QVERIFY(!chart.runVisible(first) && !chart.runVisible(second));
    QCOMPARE(chart.crosshairLines(20.0).size(), 2);
    QTest::mouseDClick(legend, Qt::LeftButton, Qt::NoModifier, legend->entryRect(third).center());
    QVERIFY(chart.runVisible(first) && chart.runVisible(second) && chart.runVisible(third));
    // A user's double click is a click (press, release: that toggles) and then
    // the double click: soloed, and the same again restores every run.
    auto userDoubleClick = [&](qint64 run) {
      const QPoint at = legend->entryRect(run).center();
      QTest::mouseClick(legend, Qt::LeftButton, Qt::NoModifier, at);
      QTest::mouseDClick(legend, Qt::LeftButton, Qt::NoModifier, at);
      QTest::mouseRelease(legend, Qt::LeftButton, Qt::NoModifier, at);
    };
    userDoubleClick(second);
    QVERIFY(chart.runVisible(second));
    QVERIFY(!chart.runVisible(first) && !chart.runVisible(third));
    userDoubleClick(second);
    QVERIFY(chart.runVisible(first) && chart.runVisible(second) && chart.runVisible(third));
    // Hovering a hidden run's entry dims nothing.
    QTest::mouseClick(legend, Qt::LeftButton, Qt::NoModifier, legend->entryRect(second).center());
    QVERIFY(!chart.runVisible(second));
    QTest::mouseMove(legend, legend->entryRect(second).center());
    QTest::qWait(50);
    QCOMPARE(chart.highlightedRun(), qint64{0});
    QTest::mouseClick(legend, Qt::LeftButton, Qt::NoModifier, legend->entryRect(second).center());
    QVERIFY(chart.runVisible(second));
    // Hover: that run's curves highlighted, the others dimmed; leaving ends it.
    QTest::mouseMove(legend, legend->entryRect(first).center());
    QTRY_COMPARE(chart.highlightedRun(), first);
    QTest::mouseMove(legend, QPoint(legend->width() - 2, legend->height() - 2));
    QTRY_COMPARE(chart.highlightedRun(), qint64{0});
  }

  void runsGroupedByAConfigFieldDrawTheirMeanAndBand() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    QVector<ChartRun> runs;
    for (const char* strategy : {"high", "2-norm"}) {
      for (int seed = 1; seed <= 3; ++seed) {
        const std::string spec = std::string("{\"conversion\":{\"rope_strategy\":\"") + strategy +
                                 "\"},\"seed\":" + std::to_string(seed) + "}";
        const std::string name = std::string(strategy) + " seed " + std::to_string(seed);
        const qint64 id = store->createRun(std::nullopt, name, "convert-finetune", spec, "cpu");
        // Seeds 1..3 offset the loss by 0.1, 0.2, 0.3; the seed-2 run logs every other step.
        MetricWriter w = store->metricWriter(id);
        const double base = std::string(strategy) == "high" ? 5.0 : 4.0;
        for (int s = seed == 2 ? 2 : 1; s <= 100; s += seed == 2 ? 2 : 1)
          w.add("train/loss", s, s * 100, s, base + 0.1 * seed - 0.001 * s);
        runs.push_back({id, QString::fromStdString(name)});
      }
    }
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart));
    chart.setMetric(QStringLiteral("train/loss"));
    chart.setRuns(runs);
    QCOMPARE(chart.groupFields(), (QStringList{QStringLiteral("conversion.rope_strategy"), QStringLiteral("seed")}));
    QCOMPARE(chart.legend()->entries().size(), 6);
    // Choose the first field from the keyboard.
    QComboBox* group = nullptr;
    for (QComboBox* box : chart.findChildren<QComboBox*>()) {
      if (box->toolTip().startsWith(QStringLiteral("Group"))) group = box;
    }
    QVERIFY(group != nullptr && group->isEnabled());
    group->setFocus();
    QTest::keyClick(group, Qt::Key_Down);
    QCOMPARE(chart.groupBy(), QStringLiteral("conversion.rope_strategy"));
    QCOMPARE(chart.legend()->entries().size(), 2);
    QCOMPARE(chart.curveLabels(), (QStringList{QStringLiteral("rope_strategy = high (3 runs)"),
                                               QStringLiteral("rope_strategy = 2-norm (3 runs)")}));
    // The mean of the three seeds (offset 0.2) and their band (0.1..0.3), at
    // every step the three cover, the seed-2 run interpolated between its rows.
    const auto high = chart.curveGroup(QStringLiteral("rope_strategy = high (3 runs)"));
    QCOMPARE(static_cast<int>(high.size()), 99);  // steps 2..100
    for (const GroupPoint& g : high) {
      const double s = static_cast<double>(g.at.step);
      QVERIFY(std::abs(g.at.value - (5.2 - 0.001 * s)) < 1e-9);
      QVERIFY(std::abs(g.lo - (5.1 - 0.001 * s)) < 1e-9 && std::abs(g.hi - (5.3 - 0.001 * s)) < 1e-9);
      QCOMPARE(g.members, 3);
    }
    // The y range holds both groups' bands; a legend click hides a group.
    QVERIFY2(chart.visibleY().first <= 4.1 && chart.visibleY().second >= 5.2,
             qPrintable(QStringLiteral("y %1..%2").arg(chart.visibleY().first).arg(chart.visibleY().second)));
    QTest::mouseClick(chart.legend(), Qt::LeftButton, Qt::NoModifier, chart.legend()->entryRect(runs[0].id).center());
    QVERIFY(!chart.runVisible(runs[0].id));
    QVERIFY(chart.visibleY().second < 4.6);  // only the 2-norm group (4.0-4.3) is left to fit
    // Back to one curve per run.
    QTest::keyClick(group, Qt::Key_Up);
    QCOMPARE(chart.groupBy(), QString());
    QCOMPARE(chart.legend()->entries().size(), 6);
  }

  void smallMultiplesShareXZoomAndCrosshair() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    QVector<ChartRun> runs;
    for (const char* name : {"a", "b"}) {
      const qint64 id = store->createRun(std::nullopt, name, "pretrain", "{}", "cpu");
      MetricWriter w = store->metricWriter(id);
      for (int s = 1; s <= 200; ++s) {
        w.add("train/loss", s, s * 100, s, 6.0 - 0.01 * s + 0.2 * std::sin(s));
        w.add("lr", s, s * 100, s, 1e-3 * std::min(1.0, s / 50.0));
        w.add("grad_norm", s, s * 100, s, 1.0 + 0.1 * std::cos(s));
        w.add("tokens_per_s", s, s * 100, s, 1000.0 + s);
        if (s % 50 == 0) w.add("val/loss", s, s * 100, s, 6.0 - 0.01 * s);
        w.add("kv/latent_norm", s, s * 100, s, 0.5);  // any metric the engine writes
      }
      runs.push_back({id, QString::fromLatin1(name)});
    }
    ChartView chart(store);
    QVERIFY(uitest::showChart(chart, 760, 480));
    chart.setRuns(runs);
    chart.setSmoothing(0.6);
    QCheckBox* gridBox = nullptr;
    for (QCheckBox* box : chart.findChildren<QCheckBox*>()) {
      if (box->text() == QStringLiteral("Grid")) gridBox = box;
    }
    QVERIFY(gridBox != nullptr);
    QTest::mouseClick(gridBox, Qt::LeftButton, Qt::NoModifier, QPoint(6, gridBox->height() / 2));
    QVERIFY(chart.grid());
    const auto cells = chart.cells();
    QStringList metrics;
    for (const ChartView* c : cells) metrics << c->metric();
    QCOMPARE(metrics, (QStringList{QStringLiteral("train/loss"), QStringLiteral("val/loss"), QStringLiteral("lr"),
                                   QStringLiteral("grad_norm"), QStringLiteral("tokens_per_s"),
                                   QStringLiteral("kv/latent_norm")}));
    QTest::qWait(50);
    for (const ChartView* c : cells) QVERIFY(c->isVisible() && c->seriesCount() > 0);
    // In a grid this small each cell still reads as a scale (3 y ticks or
    // more), its title at the widget's own size, and every cell spans the
    // same x (the validation cell, whose points start at step 50, too).
    for (const ChartView* c : cells) {
      QVERIFY2(c->yTickValues().size() >= 3,
               qPrintable(c->metric() + QStringLiteral(": %1 y ticks").arg(c->yTickValues().size())));
      QVERIFY2(c->canvas()->chart()->titleFont().pointSizeF() >= 0.9 * c->font().pointSizeF(),
               qPrintable(c->metric() +
                          QStringLiteral(": title %1 pt").arg(c->canvas()->chart()->titleFont().pointSizeF())));
      QCOMPARE(c->visibleX(), cells[0]->visibleX());
      QCOMPARE(c->xTickLabels(), cells[0]->xTickLabels());
    }
    // Each fits its own y: the learning rate's axis is not the loss axis.
    QVERIFY(cells[2]->visibleY().second < 0.01 && cells[0]->visibleY().first > 3.0);
    // The learning rate is never smoothed: the crosshair reads its exact value.
    QCOMPARE(cells[2]->crosshairLines(10.0).at(1),
             QStringLiteral("a: %1").arg(QString::number(1e-3 * 10 / 50.0, 'g', 5)));
    // A drag across the loss cell zooms every cell to the same steps.
    ChartCanvas* canvas = cells[0]->canvas();
    const QRectF plot = canvas->chart()->plotArea();
    const QPoint from(static_cast<int>(plot.left() + plot.width() * 0.25), static_cast<int>(plot.center().y()));
    const QPoint to(static_cast<int>(plot.left() + plot.width() * 0.5), static_cast<int>(plot.center().y()));
    QTest::mousePress(canvas->viewport(), Qt::LeftButton, Qt::NoModifier, from);
    QTest::mouseMove(canvas->viewport(), to);
    QTest::mouseRelease(canvas->viewport(), Qt::LeftButton, Qt::NoModifier, to);
    const auto zoomed = cells[0]->visibleX();
    QVERIFY(zoomed.second - zoomed.first < 100);
    for (const ChartView* c : cells) {
      QVERIFY(std::abs(c->visibleX().first - zoomed.first) < 1e-6 &&
              std::abs(c->visibleX().second - zoomed.second) < 1e-6);
    }
    // One crosshair: moving over the loss cell shows it at the same step in the others.
    QTest::mouseMove(canvas->viewport(), plot.center().toPoint());
    QVERIFY(canvas->crosshairVisible());
    const QString at = canvas->crosshairLines().first();
    for (std::size_t i = 1; i < cells.size(); ++i) {
      QVERIFY(cells[i]->canvas()->crosshairVisible());
      QCOMPARE(cells[i]->canvas()->crosshairLines().first(), at);
    }
    // A double click resets them all; hiding a run in the legend hides it everywhere.
    QTest::mouseDClick(canvas->viewport(), Qt::LeftButton, Qt::NoModifier, plot.center().toPoint());
    for (const ChartView* c : cells) QVERIFY(c->followsData());
    QTest::mouseClick(chart.legend(), Qt::LeftButton, Qt::NoModifier, chart.legend()->entryRect(runs[0].id).center());
    for (const ChartView* c : cells) QVERIFY(!c->runVisible(runs[0].id));
  }

  void thirtyRunsAcrossExperimentsGetDistinctStoredColours() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    {
      RunStore store(ws.dbPath().toStdString());
      for (int e = 0; e < 3; ++e) {
        const auto exp = store.createExperiment("sweep " + std::to_string(e), "");
        for (int r = 0; r < 10; ++r) store.createRun(exp, "run " + std::to_string(r), "pretrain", "{}", "cpu");
      }
    }
    const MainWindowOptions options = uitest::quietWindowOptions();
    QStringList stored;
    {
      MainWindow w(ws, options);
      w.show();
      QVERIFY(QTest::qWaitForWindowExposed(&w));
      QTreeView* tree = w.runsPanel()->view();
      tree->selectAll();
      QCOMPARE(w.runsPanel()->selectedRuns().size(), 30);
      QTRY_COMPARE(w.chart()->legend()->entries().size(), 30);
      std::vector<QColor> colours;
      for (const auto& e : w.chart()->legend()->entries()) colours.push_back(e.color);
      double closest = 1e9;
      for (std::size_t i = 0; i < colours.size(); ++i) {
        for (std::size_t k = i + 1; k < colours.size(); ++k)
          closest = std::min(closest, labDistance(colours[i], colours[k]));
      }
      QVERIFY2(closest > 12.0, qPrintable(QStringLiteral("closest pair: CIELAB distance %1").arg(closest)));
      for (const auto& e : w.chart()->legend()->entries()) stored << e.color.name();
    }
    // Stored with the runs: the same colours in a new session.
    RunStore store(ws.dbPath().toStdString());
    QStringList again;
    for (const RunRecord& r : store.listRuns()) again << QString::fromStdString(r.color);
    QCOMPARE(again, stored);
  }
};

QTEST_MAIN(TestChartAxes)
#include "test_chart_axes.moc"
