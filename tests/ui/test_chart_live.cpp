// A live chart over a real engine job: the job controller runs the engine
// binary, which commits metric rows to the store; each progress event makes
// the chart read the new rows. The train curve grows while the job runs, ends
// with every step, and the redraws stay within 25 a second.
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include "charts/chart_view.h"
#include "jobs/engine_path.h"
#include "jobs/job_controller.h"
#include "latentlab/run_store.h"
#include "ui_test_support.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestChartLive : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { uitest::isolateSettings(); }

  void seriesGrowsWhileTheEngineWritesAndRedrawsStayBounded() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    JobController jobs(store, dir.path(), engineExecutablePath());
    ChartView chart(store);
    chart.resize(900, 500);
    chart.show();
    connect(&jobs, &JobController::progress, &chart, [&chart](qint64 runId) { chart.pollStore(runId); });
    connect(&jobs, &JobController::statusChanged, &chart, [&chart](qint64 runId) { chart.pollStore(runId); });

    const int steps = 150;
    RunSpec spec = uitest::tinySpec("live", steps);
    spec.evalEvery = 50;
    const qint64 id = store->createRun(std::nullopt, spec.name, spec.kind, runSpecToJson(spec), "cpu");
    chart.setRuns({{id, QStringLiteral("live")}});  // a queued run: an empty curve, filled live
    QCOMPARE(chart.pointCount(id, QStringLiteral("train/loss")), 0);
    QSignalSpy finished(&jobs, &JobController::finished);
    const int before = chart.redrawCount();
    QElapsedTimer t;
    t.start();
    jobs.enqueue(id);
    QList<int> seen;  // the curve's sizes as the job runs
    while (finished.isEmpty() && t.elapsed() < 110000) {
      QTest::qWait(50);
      const int n = chart.pointCount(id, QStringLiteral("train/loss"));
      if (seen.isEmpty() || seen.last() != n) seen << n;
    }
    QVERIFY2(!finished.isEmpty(), qPrintable(QStringLiteral("the engine job did not finish: status %1, curve sizes %2")
                                                 .arg(QString::fromLatin1(runStatusName(jobs.job(id)->status)))
                                                 .arg(seen.size())));
    QCOMPARE(finished.at(0).at(1).toInt(), 0);
    QTRY_COMPARE_WITH_TIMEOUT(chart.pointCount(id, QStringLiteral("train/loss")), steps, 3000);
    const double seconds = static_cast<double>(t.elapsed()) / 1000.0;
    const int redraws = chart.redrawCount() - before;
    qInfo("sizes seen while running: %s; %d redraws in %.1f s", qPrintable([&] {
            QStringList s;
            for (int n : seen) s << QString::number(n);
            return s.join(QLatin1Char(' '));
          }()),
          redraws, seconds);
    // Grew in several steps while the job ran (not in one read at the end).
    int partial = 0;
    for (int n : seen) partial += (n > 0 && n < steps) ? 1 : 0;
    QVERIFY2(partial >= 2, "the curve did not grow while the job ran");
    for (int i = 1; i < seen.size(); ++i) QVERIFY(seen[i] > seen[i - 1]);
    QVERIFY(redraws >= 2);
    QVERIFY2(redraws <= static_cast<int>(25 * seconds) + 2, qPrintable(QString::number(redraws)));
    QVERIFY(chart.pointCount(id, QStringLiteral("val/loss")) >= 3);  // evals at 50, 100 and the end
  }
};

QTEST_MAIN(TestChartLive)
#include "test_chart_live.moc"
