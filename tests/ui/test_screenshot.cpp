// Renders the main window over a workspace holding one completed tiny run and
// saves it as a PNG in the build folder (its path is printed).
#include <QDir>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "charts/chart_view.h"
#include "latentlab/run_store.h"
#include "main_window.h"
#include "panels/runs_panel.h"
#include "ui_test_support.h"
#include "workspace.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestScreenshot : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { uitest::isolateSettings(); }

  void mainWindowWithACompletedRun() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    RunSpec spec = uitest::tinySpec("tiny demo-gqa", 60);
    spec.evalEvery = 20;
    QString out;
    QVERIFY2(uitest::runEngineBlocking(ws.dir, spec, &out), qPrintable(out));

    const MainWindowOptions options = uitest::quietWindowOptions();
    MainWindow w(ws, options);
    w.resize(1440, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCOMPARE(w.runsPanel()->selectedRuns().size(), 1);  // the newest run is shown
    QTRY_VERIFY_WITH_TIMEOUT(w.chart()->pointCount(1, QStringLiteral("train/loss")) == 60, 3000);
    QVERIFY(w.chart()->pointCount(1, QStringLiteral("val/loss")) >= 2);
    QTest::qWait(200);
    const QString path = QStringLiteral(LATENTLAB_TEST_BUILD_DIR "/latentlab-main-window.png");
    QVERIFY(w.grab().save(path));
    qInfo("screenshot: %s", qPrintable(path));
    // The conversion and training tabs, for review.
    for (int tab : {1, 2}) {
      w.rightTabs()->setCurrentIndex(tab);
      QTest::qWait(50);
      const QString tabPath = QStringLiteral(LATENTLAB_TEST_BUILD_DIR "/latentlab-tab-%1.png").arg(tab);
      QVERIFY(w.rightTabs()->grab().save(tabPath));
      qInfo("screenshot: %s", qPrintable(tabPath));
    }
  }
};

QTEST_MAIN(TestScreenshot)
#include "test_screenshot.moc"
