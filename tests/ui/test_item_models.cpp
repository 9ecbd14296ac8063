// QAbstractItemModelTester on every item model: the experiments/runs tree
// (inserts, updates, resets) and the job table (jobs added, updated, cleared).
#include <QAbstractItemModelTester>
#include <QTemporaryDir>
#include <QtTest>

#include "jobs/job_controller.h"
#include "latentlab/run_store.h"
#include "models/job_table_model.h"
#include "models/run_tree_model.h"
#include "ui_test_support.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestItemModels : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void runTreeModelPassesTheTesterThroughChanges() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const auto e1 = store->createExperiment("rope strategies", "rope-strategies");
    const auto r1 = store->createRun(e1, "S_low", "convert-finetune", "{}", "cpu");
    RunTreeModel model(store);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(model.rowCount(model.index(0, 0)), 1);

    store->createRun(e1, "S_high", "convert-finetune", "{}", "cpu");  // appended: insert path
    const auto e2 = store->createExperiment("d_kv sweep");
    store->createRun(e2, "d_kv 8", "convert-finetune", "{}", "cpu");
    store->createRun(std::nullopt, "loose run", "pretrain", "{}", "cpu");
    QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
    model.refresh();
    QVERIFY(inserted.count() >= 2);
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.rowCount(model.index(0, 0)), 2);
    QCOMPARE(model.index(2, 0).data(RunTreeModel::NameRole).toString(), QStringLiteral("(no experiment)"));
    QCOMPARE(model.index(2, 0).data().toString(), QStringLiteral("(no experiment) · 1 run(s)"));

    store->setStatus(r1, RunStatus::Running);  // update path
    {
      auto w = store->metricWriter(r1);
      for (int s = 1; s <= 5; ++s) w.add("train/loss", s, s * 100, s, 6.0 - s * 0.1);
    }
    model.refresh();
    const QModelIndex run = model.indexOfRun(r1);
    QCOMPARE(run.siblingAtColumn(RunTreeModel::StatusColumn).data().toString(), QStringLiteral("running"));
    QCOMPARE(run.siblingAtColumn(RunTreeModel::StepColumn).data().toLongLong(), 5);
    QCOMPARE(run.siblingAtColumn(RunTreeModel::LossColumn).data().toString(), QStringLiteral("5.500"));
    QCOMPARE(run.data(RunTreeModel::RunIdRole).toLongLong(), r1);
    QVERIFY(run.siblingAtColumn(RunTreeModel::StatusColumn).data(Qt::ForegroundRole).isValid());

    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    store->deleteExperiment(e1);  // removal: reset path
    model.refresh();
    QCOMPARE(reset.count(), 1);
    QCOMPARE(model.rowCount(), 2);
    QVERIFY(!model.indexOfRun(r1).isValid());
  }

  void jobTableModelPassesTheTester() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    JobController jobs(store, dir.path(), QStringLiteral("/nonexistent/latentlab-engine"));
    JobTableModel model(&jobs);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const auto a = store->createRun(std::nullopt, "a", "pretrain", "{}", "cpu");
    const auto b = store->createRun(std::nullopt, "b", "pretrain", "{}", "cpu");
    QSignalSpy finished(&jobs, &JobController::finished);
    jobs.enqueue(a);
    jobs.enqueue(b);
    QCOMPARE(model.rowCount(), 2);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 10000);  // the engine cannot start: both fail, neither hangs
    QCOMPARE(model.index(0, JobTableModel::StatusColumn).data().toString(), QStringLiteral("failed"));
    QCOMPARE(QString::fromLatin1(runStatusName(store->run(a).status)), QStringLiteral("failed"));
    QVERIFY(QString::fromStdString(store->run(a).error).contains(QStringLiteral("cannot start the engine")));
    QCOMPARE(model.runIdAt(1), b);
    jobs.clearFinished();
    QCOMPARE(model.rowCount(), 0);
  }
};

QTEST_MAIN(TestItemModels)
#include "test_item_models.moc"
