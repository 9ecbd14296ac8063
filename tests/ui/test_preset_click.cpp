// The workbench end to end: File › Load preset › "Scale-factor ablation — demo
// scale" creates the experiment with its six queued runs, and the job queue
// starts real engine processes on the CPU whose losses reach the window.
#include <QAction>
#include <QDir>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "jobs/job_controller.h"
#include "latentlab/run_store.h"
#include "main_window.h"
#include "panels/message_banner.h"
#include "panels/model_panel.h"
#include "panels/training_panel.h"
#include "ui_test_support.h"
#include "workspace.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestPresetClick : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { uitest::isolateSettings(); }

  void clickingTheDemoPresetRunsRealJobs() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    const MainWindowOptions options = uitest::quietWindowOptions();  // only the preset's runs
    MainWindow w(ws, options);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));

    QAction* action = nullptr;
    for (QAction* a : w.findChildren<QAction*>()) {
      if (a->text().contains(QStringLiteral("ablation"), Qt::CaseInsensitive) && a->text().contains(QStringLiteral("demo scale"))) action = a;
    }
    QVERIFY2(action != nullptr, "no 'demo scale' action for the scale-ablation preset in File › Load preset");
    QSignalSpy progress(w.jobs(), &JobController::progress);
    action->trigger();
    RunStore store(ws.dbPath().toStdString());   // a reader of the window's database

    // Six runs in one new experiment; one CPU job at a time.
    std::vector<RunRecord> runs = store.listRuns();
    std::vector<RunRecord> ablation;
    for (const RunRecord& r : runs) {
      if (r.experimentId && r.kind == "pretrain" && r.name.find("demo") != std::string::npos) ablation.push_back(r);
    }
    QCOMPARE(static_cast<int>(ablation.size()), 6);
    QCOMPARE(w.jobs()->runningCount(), 1);
    QCOMPARE(w.jobs()->activeCount(), 6);

    // A real engine process trains and reports losses.
    QVERIFY(progress.wait(120000));
    const qint64 runId = progress.last().at(0).toLongLong();
    QVERIFY(progress.last().at(4).toDouble() > 0);
    QTRY_VERIFY_WITH_TIMEOUT(store.lastStep(runId, "train/loss").has_value(), 30000);
    QVERIFY(w.jobs()->processId(runId) > 0);

    // Stop everything (the queued ones become cancelled without starting).
    QSignalSpy finished(w.jobs(), &JobController::finished);
    for (const RunRecord& r : ablation) w.jobs()->cancel(r.id);
    QTRY_COMPARE_WITH_TIMEOUT(w.jobs()->activeCount(), 0, 60000);
    QCOMPARE(store.run(runId).status, RunStatus::Cancelled);
  }

  // A demo preset loaded before the demo base exists queues its runs behind
  // the base's pre-training instead of refusing.
  void aDemoPresetWaitsForTheBasePretraining() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    qint64 base = 0;
    {
      RunStore store(ws.dbPath().toStdString());
      base = ensureDemoPretrainQueued(store, ws).value_or(0);
    }
    QVERIFY(base != 0);
    MainWindow w(ws, uitest::quietWindowOptions());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.jobs()->setCpuSlots(0);  // nothing starts in this test
    QAction* action = nullptr;
    for (QAction* a : w.findChildren<QAction*>()) {
      if (a->text().contains(QStringLiteral("RoPE strategies"), Qt::CaseInsensitive) && a->text().contains(QStringLiteral("demo scale"))) action = a;
    }
    QVERIFY2(action != nullptr, "no 'demo scale' action for the rope-strategies preset");
    action->trigger();
    RunStore store(ws.dbPath().toStdString());
    int waiting = 0;
    for (const RunRecord& r : store.listRuns()) {
      if (r.id == base) continue;
      const JobInfo* job = w.jobs()->job(r.id);
      QVERIFY(job != nullptr);
      QCOMPARE(job->status, QStringLiteral("queued"));
      QCOMPARE(job->after, base);
      ++waiting;
    }
    QVERIFY(waiting >= 3);
    QVERIFY(w.banner()->message().contains(QStringLiteral("waiting for run #%1").arg(base)));
  }

  // A folder that fails to open leaves no model on the Model tab, and Run
  // cannot start anything until a model opens again.
  void aFailedOpenOnTheModelTabCannotStartARun() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    const MainWindowOptions options = uitest::quietWindowOptions();
    MainWindow w(ws, options);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.rightTabs()->setCurrentIndex(0);
    ModelPanel* model = w.modelPanel();
    QLineEdit* path = model->findChild<QLineEdit*>();
    QPushButton* open = nullptr;
    for (QPushButton* b : model->findChildren<QPushButton*>()) {
      if (b->text() == QStringLiteral("Open")) open = b;
    }
    QVERIFY(path != nullptr && open != nullptr);
    QVERIFY(!model->fieldText(QStringLiteral("Architecture")).isEmpty());  // the demo base is shown
    QVERIFY(w.trainingPanel()->runButton()->isEnabled());
    // Type a folder without a model and press Open.
    const QString broken = dir.filePath(QStringLiteral("not-a-model"));
    QVERIFY(QDir().mkpath(broken));
    path->clear();
    QTest::keyClicks(path, broken);
    QTest::mouseClick(open, Qt::LeftButton);
    QVERIFY(model->fieldText(QStringLiteral("Architecture")).isEmpty());  // the old model is gone
    QVERIFY(!model->blockReason().isEmpty());
    w.rightTabs()->setCurrentIndex(2);
    QPushButton* run = w.trainingPanel()->runButton();
    QVERIFY(!run->isEnabled());
    RunStore store(ws.dbPath().toStdString());
    const std::size_t before = store.listRuns().size();
    QTest::mouseClick(run, Qt::LeftButton);
    QCOMPARE(store.listRuns().size(), before);  // nothing submitted
    // Choosing a model again (a built-in architecture) enables Run.
    w.rightTabs()->setCurrentIndex(0);
    QRadioButton* builtin = nullptr;
    for (QRadioButton* b : model->findChildren<QRadioButton*>()) {
      if (b->text().startsWith(QStringLiteral("Built-in"))) builtin = b;
    }
    QVERIFY(builtin != nullptr);
    QTest::mouseClick(builtin, Qt::LeftButton, Qt::NoModifier, QPoint(8, builtin->height() / 2));
    QVERIFY(model->blockReason().isEmpty());
    QVERIFY(!model->fieldText(QStringLiteral("Architecture")).isEmpty());
    QVERIFY(w.trainingPanel()->runButton()->isEnabled());
  }
};

QTEST_MAIN(TestPresetClick)
#include "test_preset_click.moc"
