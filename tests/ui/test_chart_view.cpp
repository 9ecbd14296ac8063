// The chart redraws at most 25 times a second however fast points arrive,
// and reads live rows from the store the same way it reads saved ones.
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include "charts/chart_view.h"
#include "latentlab/run_store.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestChartView : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void burstOfAThousandPointsIsOneRedraw() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const auto run = store->createRun(std::nullopt, "burst", "pretrain", "{}", "cpu");
    ChartView chart(store);
    chart.resize(800, 500);
    chart.show();
    chart.setRuns({{run, QStringLiteral("burst")}});
    QCOMPARE(chart.seriesCount(), 2);  // train/loss and val/loss
    const int before = chart.redrawCount();
    for (int i = 1; i <= 1000; ++i) {
      chart.appendPoints(run, QStringLiteral("train/loss"), {MetricPoint{i, i * 128, i * 0.01, 8.0 / std::sqrt(i)}});
    }
    QCOMPARE(chart.redrawCount(), before);  // nothing drawn synchronously
    QTRY_COMPARE_WITH_TIMEOUT(chart.pointCount(run, QStringLiteral("train/loss")), 1000, 2000);
    QCOMPARE(chart.redrawCount() - before, 1);
  }

  void sustainedStreamStaysAtOrBelow25Hz() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const auto run = store->createRun(std::nullopt, "stream", "pretrain", "{}", "cpu");
    ChartView chart(store);
    chart.resize(800, 500);
    chart.show();
    chart.setRuns({{run, QStringLiteral("stream")}});
    const int before = chart.redrawCount();
    QElapsedTimer t;
    t.start();
    int step = 0;
    while (t.elapsed() < 1000) {
      for (int k = 0; k < 5; ++k) {
        ++step;
        chart.appendPoints(run, QStringLiteral("train/loss"), {MetricPoint{step, step * 128, 0, 1.0 + 1.0 / step}});
      }
      QTest::qWait(1);
    }
    const double seconds = static_cast<double>(t.elapsed()) / 1000.0;
    QTest::qWait(ChartView::kRedrawDelayMs * 2);
    const int redraws = chart.redrawCount() - before;
    qInfo("%d points in %.2f s -> %d redraws", step, seconds, redraws);
    QVERIFY(redraws >= 1);
    QVERIFY2(redraws <= static_cast<int>(25 * seconds) + 2, qPrintable(QString::number(redraws)));
    QCOMPARE(chart.pointCount(run, QStringLiteral("train/loss")), step);
  }

  void savedAndLiveRowsShareOnePath() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const auto run = store->createRun(std::nullopt, "live", "pretrain", "{}", "cpu");
    {
      auto w = store->metricWriter(run);
      for (int s = 1; s <= 10; ++s) w.add("train/loss", s, s * 64, s, 5.0 - 0.1 * s);
      w.add("val/loss", 10, 640, 10, 4.2);
    }
    ChartView chart(store);
    chart.setRuns({{run, QStringLiteral("live")}});
    QCOMPARE(chart.pointCount(run, QStringLiteral("train/loss")), 10);  // saved rows
    QCOMPARE(chart.pointCount(run, QStringLiteral("val/loss")), 1);
    {
      auto w = store->metricWriter(run);
      for (int s = 11; s <= 25; ++s) w.add("train/loss", s, s * 64, s, 4.0 - 0.01 * s);
    }
    chart.pollStore(run);  // what a job's progress event triggers
    QTRY_COMPARE_WITH_TIMEOUT(chart.pointCount(run, QStringLiteral("train/loss")), 25, 2000);
    chart.setXAxis(ChartView::XAxis::Tokens);
    chart.setLogY(true);
    chart.setMetric(QStringLiteral("lr"));
    QCOMPARE(chart.seriesCount(), 1);
  }
};

QTEST_MAIN(TestChartView)
#include "test_chart_view.moc"
