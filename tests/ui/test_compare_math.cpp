// The compare view's arithmetic, checked directly: interpolation and run −
// baseline on unequal step grids (aligned by tokens), preset pairs matched to
// run names, the chart's series type (ranges kept as rows arrive, windows
// by binary search, both against a scan), refinement decisions for the visible range, and the spec diff
// listing exactly the fields that differ.
#include <QtTest>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "charts/compare_math.h"
#include "charts/metric_series.h"
#include "charts/range_refine.h"
#include "charts/thinning.h"
#include "models/spec_diff.h"

using namespace latentlab;
using namespace latentlab::ui;

namespace {

// Rows every `every` steps from `first` to `last`, `tokensPerStep` tokens a
// step, value f(tokens).
template <typename F>
std::vector<MetricPoint> rows(int first, int last, int every, int tokensPerStep, F f) {
  std::vector<MetricPoint> out;
  for (int s = first; s <= last; s += every) {
    const std::int64_t tokens = static_cast<std::int64_t>(s) * tokensPerStep;
    out.push_back({s, tokens, s * 0.5, f(static_cast<double>(tokens))});
  }
  return out;
}

}  // namespace

class TestCompareMath : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void interpolatesLinearlyBetweenNeighboursAndNotOutside() {
    const std::vector<CurvePoint> c = {{0, 1}, {10, 3}, {10, 5}, {20, 5}};
    QCOMPARE(*interpolateAt(c, 0), 1.0);
    QCOMPARE(*interpolateAt(c, 5), 2.0);
    QCOMPARE(*interpolateAt(c, 10), 5.0);  // repeated x: the last row
    QCOMPARE(*interpolateAt(c, 15), 5.0);
    QCOMPARE(*interpolateAt(c, 20), 5.0);
    QVERIFY(!interpolateAt(c, -0.5));
    QVERIFY(!interpolateAt(c, 20.5));
    QVERIFY(!interpolateAt({}, 1));
    QVERIFY(!interpolateAt({{0, 1}, {2, std::nan("")}}, 1));
  }

  void differenceToBaselineOnUnequalStepGridsIsAlignedByTokens() {
    // The run logs every 3 steps at 96 tokens a step; the baseline every 5
    // steps at 64 tokens a step. Both are linear in tokens, so the exact
    // difference at any token count is known: (2 - 1e-4 t) - (3 - 2e-4 t).
    const auto run = rows(3, 300, 3, 96, [](double t) { return 2.0 - 1e-4 * t; });
    const auto base = rows(5, 500, 5, 64, [](double t) { return 3.0 - 2e-4 * t; });
    const auto d = differenceByTokens(run, base);
    QVERIFY(!d.empty());
    for (const MetricPoint& p : d) {
      QVERIFY(p.tokens >= base.front().tokens && p.tokens <= base.back().tokens);
      const double t = static_cast<double>(p.tokens);
      QVERIFY2(std::abs(p.value - (-1.0 + 1e-4 * t)) < 1e-12, qPrintable(QString::number(p.step)));
      QCOMPARE(p.step % 3, 0);  // the run's own rows
    }
    // Rows of the run before the baseline's first token count are left out:
    // base starts at 320 tokens, run rows at 288 (step 3) are outside.
    QCOMPARE(d.front().step, 6);
    QCOMPARE(d.back().step, 300);  // 28800 tokens, inside the baseline's 32000
    QCOMPARE(static_cast<int>(d.size()), 99);
  }

  void differenceSkipsNonFiniteRowsOnEitherSide() {
    auto run = rows(1, 10, 1, 10, [](double) { return 1.0; });
    auto base = rows(1, 10, 1, 10, [](double) { return 0.25; });
    run[2].value = std::nan("");
    base[5].value = std::nan("");  // interpolated over from its neighbours
    const auto d = differenceByTokens(run, base);
    QCOMPARE(static_cast<int>(d.size()), 9);
    for (const auto& p : d) QCOMPARE(p.value, 0.75);
  }

  void presetPairsMatchRunsByNameOrScaleSuffix() {
    QVERIFY(runMatchesLabel("demo mla", "mla"));
    QVERIFY(runMatchesLabel("mla", "mla"));
    QVERIFY(!runMatchesLabel("demo mla-noscale", "mla"));
    QVERIFY(!runMatchesLabel("demo gmla", "mla"));
    QVERIFY(!runMatchesLabel("demo mlra-2", "gla-2"));
    const std::vector<NamedRun> runs = {{1, "demo mla"},           {2, "demo mla-noscale"}, {3, "demo gla-2"},
                                        {4, "demo gla-2-noscale"}, {5, "demo mlra-2"},      {6, "paper mlra-2"}};
    std::vector<std::string> unmatched;
    const auto pairs = matchPairs(
        runs, {{"mla-noscale", "mla"}, {"gla-2-noscale", "gla-2"}, {"mlra-2-noscale", "mlra-2"}}, &unmatched);
    QCOMPARE(static_cast<int>(pairs.size()), 2);
    QCOMPARE(pairs[0].minuend, 2);
    QCOMPARE(pairs[0].subtrahend, 1);
    QCOMPARE(QString::fromStdString(pairs[0].label), QStringLiteral("mla-noscale \u2212 mla"));
    QCOMPARE(pairs[1].minuend, 4);
    QCOMPARE(pairs[1].subtrahend, 3);
    // mlra-2-noscale is missing and mlra-2 is ambiguous (two runs).
    QCOMPARE(unmatched, (std::vector<std::string>{"mlra-2-noscale", "mlra-2"}));
  }

  void legendNamesDropTheWordsAllRunsShare() {
    using V = std::vector<std::string>;
    QCOMPARE(withoutCommonWords({"demo-gqa d_kv 8", "demo-gqa d_kv 16", "demo-gqa base fine-tune"}),
             (V{"d_kv 8", "d_kv 16", "base fine-tune"}));
    QCOMPARE(withoutCommonWords({"demo-gqa rope S_low", "demo-gqa rope S_high"}), (V{"S_low", "S_high"}));
    QCOMPARE(withoutCommonWords({"run 1", "run 12"}), (V{"1", "12"}));
    QCOMPARE(withoutCommonWords({"demo mla", "demo"}), (V{"demo mla", "demo"}));  // one would be empty
    QCOMPARE(withoutCommonWords({"alpha", "alps"}), (V{"alpha", "alps"}));        // no whole word shared
    QCOMPARE(withoutCommonWords({"only run"}), V{"only run"});
  }

  void aSeriesKeepsItsRangesAsRowsArriveAndFindsWindowsLikeAScan() {
    // Values with NaN, zero and negatives among them; x in step order.
    std::vector<MetricPoint> all;
    for (int s = 1; s <= 500; ++s) {
      double v = 3.0 * std::sin(s * 0.7) + 0.5;
      if (s % 37 == 0) v = std::numeric_limits<double>::quiet_NaN();
      if (s % 53 == 0) v = 0.0;
      all.push_back({s, s * 100LL, s * 0.25, v});
    }
    MetricSeries grown;
    for (std::size_t n = 0; n < all.size(); ++n) {
      grown.push_back(all[n]);
      double lo = INFINITY, hi = -INFINITY, plo = INFINITY, phi = -INFINITY;
      for (std::size_t i = 0; i <= n; ++i) {
        const double v = all[i].value;
        if (!std::isfinite(v)) continue;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        if (v > 0) {
          plo = std::min(plo, v);
          phi = std::max(phi, v);
        }
      }
      QCOMPARE(grown.values().empty(), !std::isfinite(lo));
      if (std::isfinite(lo)) {
        QCOMPARE(grown.values().lo, lo);
        QCOMPARE(grown.values().hi, hi);
      }
      if (std::isfinite(plo)) {
        QCOMPARE(grown.positiveValues().lo, plo);
        QCOMPARE(grown.positiveValues().hi, phi);
      }
    }
    // Assigned at once: the same ranges as grown row by row.
    const MetricSeries assigned(all);
    QCOMPARE(assigned.values().lo, grown.values().lo);
    QCOMPARE(assigned.positiveValues().hi, grown.positiveValues().hi);
    for (const ChartXAxis axis : {ChartXAxis::Step, ChartXAxis::Tokens, ChartXAxis::WallTime}) {
      QVERIFY(assigned.ordered(axis));
      for (const auto& [x0, x1] : std::vector<std::pair<double, double>>{
               {0, 1e9}, {10, 20}, {2500, 2600}, {12.25, 12.25}, {-5, 0}, {600, 700}, {30.5, 31.5}, {1000, 999}}) {
        const double scale = axis == ChartXAxis::Tokens ? 100.0 : axis == ChartXAxis::WallTime ? 0.25 : 1.0;
        const double a = x0 * scale, b = x1 * scale;
        std::size_t first = all.size(), count = 0;
        for (std::size_t i = 0; i < all.size(); ++i) {
          const double x = xOf(all[i], axis);
          if (x < a || x > b) continue;
          first = std::min(first, i);
          ++count;
        }
        const auto [i0, i1] = assigned.within(axis, a, b);
        QCOMPARE(i1 - i0, count);
        if (count > 0) QCOMPARE(i0, first);
      }
    }
  }

  void aSeriesWhoseTokensRestartIsScannedWhole() {
    // A run restarted its token count (an x that goes back): binary search
    // would miss rows, so the series hands every row to the caller.
    MetricSeries s;
    s.push_back({1, 100, 1.0, 2.0});
    s.push_back({2, 200, 2.0, 1.5});
    QVERIFY(s.ordered(ChartXAxis::Tokens));
    s.push_back({3, 50, 3.0, 1.2});
    QVERIFY(!s.ordered(ChartXAxis::Tokens));
    QVERIFY(s.ordered(ChartXAxis::Step));
    QVERIFY(s.ordered(ChartXAxis::WallTime));
    QCOMPARE(s.within(ChartXAxis::Tokens, 40, 60), (std::pair<std::size_t, std::size_t>{0, 3}));
    QCOMPARE(s.within(ChartXAxis::Step, 2, 3), (std::pair<std::size_t, std::size_t>{1, 3}));
    s.assign({{1, 100, 1.0, 2.0}});
    QVERIFY(s.ordered(ChartXAxis::Tokens));  // assign starts afresh
  }

  void refinementReadsTheVisibleWindowOnlyWhenTheLoadedBucketsAreTooCoarse() {
    // 100k steps read with a 4000-point budget: buckets of 50 steps.
    LoadedWindow full{0, kLastStep, 1, 100000, 4000, 4000};
    // Whole range visible: nothing to do.
    QVERIFY(!refineFor(full, 0, 100000, 100000, 4000).read);
    // Zoomed to half: buckets of 25 would do, 50 is within a factor 2.
    QVERIFY(!refineFor(full, 0, 50000, 100000, 4000).read);
    // Zoomed to 1000 steps: read [500, 2500] (half the span either side).
    const RefineDecision d = refineFor(full, 1000, 2000, 100000, 4000);
    QVERIFY(d.read);
    QCOMPARE(d.stepMin, 500);
    QCOMPARE(d.stepMax, 2500);
    // That window is read raw: zooming further inside it reads nothing.
    LoadedWindow raw{500, 2500, 500, 2500, 4000, 2001};
    QVERIFY(!refineFor(raw, 1200, 1300, 100000, 4000).read);
    // Panning past its edge reads again; a window reaching the newest step
    // stays open so live rows keep appending.
    const RefineDecision pan = refineFor(raw, 2400, 3400, 100000, 4000);
    QVERIFY(pan.read);
    const RefineDecision tail = refineFor(raw, 99000, 100000, 100000, 4000);
    QVERIFY(tail.read);
    QCOMPARE(tail.stepMax, kLastStep);
    // A run without rows: nothing to read.
    QVERIFY(!refineFor(LoadedWindow{}, 0, 10, -1, 4000).read);
  }

  void thinningKeepsEachColumnsLowestAndHighestPoint() {
    QList<QPointF> pts;
    for (int i = 0; i < 10000; ++i)
      pts.push_back({static_cast<double>(i), std::sin(i * 0.01) + (i == 4321 ? 5.0 : 0.0)});
    const QList<QPointF> all = thinToColumns(pts, 0, 9999, 100);
    QVERIFY(all.size() <= 202 && all.size() >= 100);
    QVERIFY(std::is_sorted(all.begin(), all.end(), [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); }));
    QVERIFY(all.contains(QPointF(4321, std::sin(43.21) + 5.0)));  // the spike survives
    for (int col = 0; col < 100; ++col) {                         // each column: its own min and max
      double lo = 1e9, hi = -1e9, tlo = 1e9, thi = -1e9;
      for (const QPointF& p : pts) {
        if (std::min(99, static_cast<int>(p.x() * 100 / 9999)) != col) continue;
        lo = std::min(lo, p.y());
        hi = std::max(hi, p.y());
      }
      for (const QPointF& p : all) {
        if (std::min(99, static_cast<int>(p.x() * 100 / 9999)) != col) continue;
        tlo = std::min(tlo, p.y());
        thi = std::max(thi, p.y());
      }
      QCOMPARE(tlo, lo);
      QCOMPARE(thi, hi);
    }
    // A zoomed range: the nearest point outside on each side stays.
    const QList<QPointF> mid = thinToColumns(pts, 2500.5, 7500.5, 100);
    QCOMPARE(mid.front().x(), 2500.0);
    QCOMPARE(mid.back().x(), 7501.0);
    QVERIFY(mid.size() <= 202);
    // Short curves are returned as they are.
    const QList<QPointF> few = pts.mid(0, 150);
    QCOMPARE(thinToColumns(few, 0, 149, 100), few);
  }

  void visibleXMapsToTheBracketingSteps() {
    const auto r = rows(10, 100, 10, 7, [](double) { return 1.0; });
    std::vector<double> xs;
    for (const auto& p : r) xs.push_back(xOf(p, ChartXAxis::Tokens));
    QCOMPARE(stepAtOrBelow(r, xs, 75.0), 10);  // 70 tokens at step 10
    QCOMPARE(stepAtOrAbove(r, xs, 75.0), 20);  // 140 tokens at step 20
    QCOMPARE(stepAtOrBelow(r, xs, 1.0), 10);   // clamped
    QCOMPARE(stepAtOrAbove(r, xs, 1e9), 100);  // clamped
    QCOMPARE(xOf(r[1], ChartXAxis::WallTime), 10.0);
  }

  void specDiffListsExactlyTheFieldsThatDiffer() {
    auto a = flattenJson(QStringLiteral(R"({"name":"a","steps":100,"optimizer":{"lr":0.001,"clip":1},
                                                "mla":{"d_kv":16,"rope":"S_low"},"tags":["x","y"],"data":{}})"));
    auto b = flattenJson(QStringLiteral(R"({"name":"b","steps":100,"optimizer":{"lr":0.002,"clip":1},
                                                "mla":{"d_kv":16,"rope":"S_low"},"tags":["x","z"],"data":{}})"));
    auto c = flattenJson(QStringLiteral(R"({"name":"c","steps":100,"optimizer":{"lr":0.001,"clip":1},
                                                "mla":{"d_kv":8,"rope":"S_low","scale":true},"tags":["x","y"],"data":{}})"));
    QCOMPARE(a.value(QStringLiteral("optimizer.lr")), QStringLiteral("0.001"));
    QCOMPARE(a.value(QStringLiteral("mla.rope")), QStringLiteral("\"S_low\""));
    QCOMPARE(a.value(QStringLiteral("tags[1]")), QStringLiteral("\"y\""));
    QCOMPARE(a.value(QStringLiteral("data")), QStringLiteral("{}"));
    QCOMPARE(differingFields({a, b, c}, {QStringLiteral("name")}),
             (QStringList{QStringLiteral("mla.d_kv"), QStringLiteral("mla.scale"), QStringLiteral("optimizer.lr"),
                          QStringLiteral("tags[1]")}));
    QCOMPARE(differingFields({a, a}), QStringList{});
    QCOMPARE(differingFields({a, b}),
             (QStringList{QStringLiteral("name"), QStringLiteral("optimizer.lr"), QStringLiteral("tags[1]")}));
    QCOMPARE(differingFields({a, b}, {QStringLiteral("optimizer"), QStringLiteral("tags"), QStringLiteral("name")}),
             QStringList{});
    QCOMPARE(flattenJson(QStringLiteral("not json")).value(QString()), QStringLiteral("not json"));
    // A run without the whole "mla" object (an unconverted base): only the
    // mla fields that differ among the runs that have it, plus what chose it.
    const auto base =
        flattenJson(QStringLiteral(R"({"name":"base","kind":"finetune","steps":100,"optimizer":{"lr":0.001,"clip":1},
                                                   "tags":["x","y"],"data":{}})"));
    for (auto* s : {&a, &b, &c}) s->insert(QStringLiteral("kind"), QStringLiteral("\"convert\""));
    QCOMPARE(differingFields({a, c, base}, {QStringLiteral("name")}),
             (QStringList{QStringLiteral("kind"), QStringLiteral("mla.d_kv"), QStringLiteral("mla.scale")}));
  }
};

QTEST_APPLESS_MAIN(TestCompareMath)
#include "test_compare_math.moc"
