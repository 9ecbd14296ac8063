// Smoothing equals TensorBoard's debiased EMA on known inputs, and the chart
// exports valid PNG, SVG and CSV files.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QPushButton>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "charts/chart_view.h"
#include "charts/smoothing.h"
#include "latentlab/run_store.h"
#include "ui_test_support.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestSmoothingExport : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { uitest::isolateSettings(); }

  // Export… offers the workspace first (not the folder LatentLab was started
  // in), then the folder the last export went to.
  void exportOffersTheWorkspaceThenTheLastFolder() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 id = store->createRun(std::nullopt, "tiny", "pretrain", "{}", "cpu");
    {
      MetricWriter w = store->metricWriter(id);
      for (int s = 1; s <= 10; ++s) w.add("train/loss", s, s * 10, s, 5.0 - 0.1 * s);
    }
    const QString workspace = dir.filePath(QStringLiteral("ws")), elsewhere = dir.filePath(QStringLiteral("figures"));
    QVERIFY(QDir().mkpath(workspace) && QDir().mkpath(elsewhere));
    ChartView chart(store);
    chart.setExportFolder(workspace);
    QVERIFY(uitest::showChart(chart));
    chart.setRuns({{id, QStringLiteral("tiny")}});
    QPushButton* exportButton = nullptr;
    for (QPushButton* b : chart.findChildren<QPushButton*>())
      if (b->text().startsWith(QStringLiteral("Export"))) exportButton = b;
    QVERIFY(exportButton != nullptr);
    {
      uitest::DialogAnswerer answers({elsewhere + QStringLiteral("/loss.png")});
      QTest::mouseClick(exportButton, Qt::LeftButton);
      QTRY_COMPARE_WITH_TIMEOUT(answers.seen(), 1, 5000);
      QCOMPARE(QFileInfo(answers.offered().value(0)).absolutePath(), workspace);
    }
    QTRY_VERIFY(QFileInfo::exists(elsewhere + QStringLiteral("/loss.png")));
    {
      uitest::DialogAnswerer answers({});
      QTest::mouseClick(exportButton, Qt::LeftButton);
      QTRY_COMPARE_WITH_TIMEOUT(answers.seen(), 1, 5000);
      QCOMPARE(QFileInfo(answers.offered().value(0)).absolutePath(), elsewhere);
    }
  }

  void matchesTheDebiasedFormula() {
    const double w = 0.6;
    const std::vector<double> y = {1.0, 2.0, 4.0, 0.5};
    const auto s = smoothTensorBoard(y, w);
    // By hand: last_t = w*last + (1-w)*y_t, shown as last_t / (1 - w^t).
    double last = 0;
    for (std::size_t t = 0; t < y.size(); ++t) {
      last = w * last + (1 - w) * y[t];
      QVERIFY(std::abs(s[t] - last / (1 - std::pow(w, static_cast<double>(t + 1)))) < 1e-12);
    }
    QCOMPARE(s[0], 1.0);  // debiasing: the first point is the first value
    QVERIFY(std::abs(s[1] - (0.6 * 0.4 + 0.4 * 2.0) / 0.64) < 1e-12);
  }

  void liveCurveSmoothedInChunksEqualsTheWholeSeries() {
    std::vector<double> y;
    for (int i = 0; i < 200; ++i) y.push_back(std::sin(i * 0.3) + 5.0 / (1 + i));
    const auto whole = smoothTensorBoard(y, 0.8);
    TensorBoardSmoother s(0.8);
    for (std::size_t i = 0; i < y.size(); ++i) QCOMPARE(s.next(y[i]), whole[i]);
  }

  void constantSeriesIsUnchangedAndZeroWeightIsRaw() {
    const auto s = smoothTensorBoard(std::vector<double>(50, 3.25), 0.95);
    for (double v : s) QVERIFY(std::abs(v - 3.25) < 1e-12);
    const std::vector<double> y = {5, 1, 4};
    QCOMPARE(smoothTensorBoard(y, 0.0), y);
  }

  void nanPassesThroughWithoutPoisoningTheAverage() {
    const auto s = smoothTensorBoard({1.0, std::nan(""), 1.0, INFINITY, 1.0}, 0.9);
    QVERIFY(std::isnan(s[1]));
    QVERIFY(std::isinf(s[3]));
    QVERIFY(std::abs(s[0] - 1.0) < 1e-12 && std::abs(s[2] - 1.0) < 1e-12 && std::abs(s[4] - 1.0) < 1e-12);
  }

  void exportsValidPngSvgAndCsv() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const auto run = store->createRun(std::nullopt, "export", "pretrain", "{}", "cpu");
    {
      MetricWriter w = store->metricWriter(run);
      for (int i = 1; i <= 100; ++i) w.add("train/loss", i, i * 64, i * 0.1, 6.0 / std::sqrt(i));
      for (int i = 20; i <= 100; i += 20) w.add("val/loss", i, i * 64, i * 0.1, 5.0 / std::sqrt(i));
    }
    ChartView chart(store);
    chart.resize(800, 500);
    chart.show();
    chart.setRuns({{run, QStringLiteral("export \"quoted\"")}});
    QTRY_COMPARE_WITH_TIMEOUT(chart.pointCount(run, QStringLiteral("train/loss")), 100, 2000);
    const QString png = dir.filePath(QStringLiteral("c.png")), svg = dir.filePath(QStringLiteral("c.svg")),
                  csv = dir.filePath(QStringLiteral("c.csv"));
    QVERIFY(chart.exportPng(png));
    QImage img(png);
    QVERIFY(!img.isNull());
    QVERIFY(img.width() > 100 && img.height() > 100);
    QVERIFY(chart.exportSvg(svg));
    QFile s(svg);
    QVERIFY(s.open(QIODevice::ReadOnly));
    const QByteArray svgText = s.readAll();
    QVERIFY(svgText.contains("<svg"));
    QVERIFY(svgText.contains("</svg>"));
    QSvgRenderer renderer(svgText);
    QVERIFY(renderer.isValid());
    QVERIFY(renderer.defaultSize().width() > 100);
    QVERIFY(chart.exportCsv(csv));
    QFile c(csv);
    QVERIFY(c.open(QIODevice::ReadOnly | QIODevice::Text));
    const QList<QByteArray> lines = c.readAll().trimmed().split('\n');
    QCOMPARE(lines.size(), 1 + 100 + 5);
    QCOMPARE(lines[0], QByteArray("run_id,run,metric,step,tokens,wall_time,value"));
    QVERIFY(lines[1].startsWith(QByteArray::number(run) + ",\"export \"\"quoted\"\"\",train/loss,1,64,0.1,6"));
  }
};

QTEST_MAIN(TestSmoothingExport)
#include "test_smoothing_export.moc"
