// The workbench's Slurm back end on a real Slurm, started by
// tests/slurm/slurm_test.sh, which runs this test with the workspace (its
// clusters/local.json profile: one node, 2 CPU ranks) and the specs, and
// afterwards compares the runs' losses with local runs of the same specs.
// Everything is done as a user does it: "Run on" chosen with the keyboard,
// Run, Cancel and Retry clicked, the Jobs table's cells read as shown. The
// last test adds a profile whose engine the node does not have.
#include <QComboBox>
#include <QHeaderView>
#include <QProcess>
#include <QPushButton>
#include <QTableView>
#include <QtTest>
#include <memory>

#include "jobs/job_controller.h"
#include "latentlab/run_store.h"
#include "latentlab/slurm.h"
#include "main_window.h"
#include "models/job_table_model.h"
#include "panels/jobs_panel.h"
#include "panels/training_panel.h"
#include "ui_test_support.h"
#include "workspace.h"

using namespace latentlab;
using namespace latentlab::ui;

namespace {

QString env(const char* name) {
  return qEnvironmentVariable(name);
}

QTableView* jobsTable(MainWindow& w) {
  return w.findChild<JobsPanel*>()->findChild<QTableView*>();
}

QPushButton* jobsButton(MainWindow& w, const QString& text) {
  for (QPushButton* b : w.findChild<JobsPanel*>()->findChildren<QPushButton*>()) {
    if (b->text() == text) return b;
  }
  return nullptr;
}

QString cell(MainWindow& w, qint64 runId, int column) {
  QTableView* table = jobsTable(w);
  auto* model = static_cast<JobTableModel*>(table->model());
  return model->index(model->rowOf(runId), column).data().toString();
}

// Clicks the job's row in the Jobs table, as a user picks it.
void clickRow(MainWindow& w, qint64 runId) {
  QTableView* table = jobsTable(w);
  auto* model = static_cast<JobTableModel*>(table->model());
  const QModelIndex at = model->index(model->rowOf(runId), JobTableModel::RunColumn);
  table->scrollTo(at);
  QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualRect(at).center());
}

// The Where cells shown while waiting for `done` (one entry per change), up to `ms`.
QStringList watchPlacement(MainWindow& w, qint64 runId, const std::function<bool()>& done, int ms) {
  QStringList seen;
  QElapsedTimer t;
  t.start();
  while (t.elapsed() < ms && !done()) {
    const QString now = cell(w, runId, JobTableModel::PlacementColumn);
    if (seen.isEmpty() || seen.back() != now) seen << now;
    QTest::qWait(50);
  }
  const QString now = cell(w, runId, JobTableModel::PlacementColumn);
  if (seen.isEmpty() || seen.back() != now) seen << now;
  return seen;
}

bool anyMatches(const QStringList& seen, const QString& pattern) {
  const QRegularExpression re(pattern);
  for (const QString& s : seen) {
    if (re.match(s).hasMatch()) return true;
  }
  return false;
}

qint64 newestRun(const Workspace& ws) {
  RunStore store(ws.dbPath().toStdString());
  return store.listRuns().back().id;
}

// Runs the spec from the Training tab on the profile "local": "Run on" set
// with the keyboard, Run clicked. Returns the run's id.
qint64 runOnCluster(MainWindow& w, const Workspace& ws, const QString& specFile,
                    const QString& profile = QStringLiteral("local")) {
  TrainingPanel* training = w.trainingPanel();
  w.rightTabs()->setCurrentWidget(training);
  if (!training->loadSpecFile(specFile)) return 0;
  QComboBox* on = training->placementBox();
  uitest::reveal(on);
  on->setFocus();
  while (training->cluster() != profile && on->currentIndex() + 1 < on->count()) QTest::keyClick(on, Qt::Key_Down);
  if (training->cluster() != profile) return 0;
  uitest::reveal(training->runButton());
  QTest::mouseClick(training->runButton(), Qt::LeftButton);
  return newestRun(ws);
}

// Shows the window, squeue asked every 250 ms; false if it never appeared.
bool showFollowing(MainWindow& w) {
  w.jobs()->setClusterPollInterval(250);
  w.show();
  return QTest::qWaitForWindowExposed(&w);
}

std::int64_t lossRows(const Workspace& ws, qint64 runId) {
  RunStore store(ws.dbPath().toStdString());
  return static_cast<std::int64_t>(store.rowsSince(runId, "train/loss", -1).size());
}

}  // namespace

class TestSlurmJobs : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    uitest::isolateSettings();
    if (env("LATENTLAB_SLURM_WORKSPACE").isEmpty())
      QSKIP("needs a Slurm: tests/slurm/slurm_test.sh starts one and runs this test");
  }

  // A 2-rank run placed on the cluster from the Training tab: the Jobs table
  // shows its Slurm job, state and node, and it completes.
  void aRunPlacedOnTheClusterIsFollowedToCompletion() {
    const Workspace ws = openWorkspace(env("LATENTLAB_SLURM_WORKSPACE"));
    MainWindow w(ws, uitest::quietWindowOptions());
    QVERIFY(showFollowing(w));
    QComboBox* on = w.trainingPanel()->placementBox();
    QCOMPARE(on->count(), 2);  // this machine, then the profile
    QCOMPARE(on->itemText(1), QStringLiteral("Slurm: local · 2 CPU ranks"));
    QElapsedTimer clock;
    clock.start();
    const qint64 run = runOnCluster(w, ws, env("LATENTLAB_SLURM_SPEC"));
    QVERIFY(run > 0);
    {
      RunStore store(ws.dbPath().toStdString());
      QCOMPARE(runCluster(store, run), std::string("local"));
      QCOMPARE(store.run(run).device, std::string("cpu"));
    }
    QVERIFY(w.jobs()->job(run) != nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(w.jobs()->job(run)->step > 0, 60000);
    qInfo("Run clicked to the first step in the Jobs table: %.1f s", static_cast<double>(clock.elapsed()) / 1000);
    const QStringList seen = watchPlacement(
        w, run, [&] { return w.jobs()->job(run)->status == RunStatus::Completed; }, 120000);
    qInfo("Where, as shown: %s", qPrintable(seen.join(QStringLiteral(" | "))));
    QCOMPARE(cell(w, run, JobTableModel::StatusColumn), QStringLiteral("completed"));
    const qint64 slurmJob = w.jobs()->job(run)->slurmJob;
    QVERIFY(slurmJob > 0);
    const QString host = QString::fromLocal8Bit(qgetenv("LATENTLAB_SLURM_NODE"));
    QVERIFY2(anyMatches(seen, QStringLiteral("^Slurm %1 · RUNNING · %2$").arg(slurmJob).arg(host)),
             qPrintable(seen.join(QStringLiteral(" | "))));
    QCOMPARE(seen.back(), QStringLiteral("Slurm %1 · ended · %2").arg(slurmJob).arg(host));
    QCOMPARE(cell(w, run, JobTableModel::StepColumn), QStringLiteral("8 / 8"));
    QVERIFY(QFile::exists(QStringLiteral("%1/runs/%2/slurm-%3.out").arg(ws.dir).arg(run).arg(slurmJob)));
  }

  // Cancel clicked on a running cluster job: scancel, the engine checkpoints
  // and the run ends cancelled; Retry clicked: a new Slurm job resumes it from
  // that checkpoint and it completes with one loss per step.
  void cancelledByScancelThenResubmittedAndResumed() {
    const Workspace ws = openWorkspace(env("LATENTLAB_SLURM_WORKSPACE"));
    MainWindow w(ws, uitest::quietWindowOptions());
    QVERIFY(showFollowing(w));
    const qint64 run = runOnCluster(w, ws, env("LATENTLAB_SLURM_LONG_SPEC"));
    QVERIFY(run > 0);
    QTRY_VERIFY_WITH_TIMEOUT(w.jobs()->job(run)->step >= 3, 90000);
    const qint64 first = w.jobs()->job(run)->slurmJob;
    clickRow(w, run);
    QPushButton* cancel = jobsButton(w, QStringLiteral("Cancel"));
    QVERIFY(cancel != nullptr && cancel->isEnabled());
    QElapsedTimer clock;
    clock.start();
    QTest::mouseClick(cancel, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(cell(w, run, JobTableModel::StatusColumn), QStringLiteral("cancelled"), 60000);
    qInfo("Cancel clicked to cancelled in the Jobs table: %.1f s", static_cast<double>(clock.elapsed()) / 1000);
    QVERIFY(cell(w, run, JobTableModel::PlacementColumn).startsWith(QStringLiteral("Slurm %1 · ended · ").arg(first)));
    QVERIFY(w.jobs()->job(run)->log.join(QLatin1Char('\n')).contains(QStringLiteral("scancel %1").arg(first)));
    std::int64_t checkpointStep = 0;
    {
      RunStore store(ws.dbPath().toStdString());
      for (const ArtifactRecord& a : store.listArtifacts(run)) {
        if (a.kind == "checkpoint" && a.step) checkpointStep = std::max(checkpointStep, *a.step);
      }
    }
    QVERIFY2(checkpointStep >= 3, "the cancelled run kept no checkpoint");
    qInfo("cancelled at step %lld with its checkpoint", static_cast<long long>(checkpointStep));
    // Retry / resume: a new submission of the same run.
    clickRow(w, run);
    QPushButton* retry = jobsButton(w, QStringLiteral("Retry / resume"));
    QVERIFY(retry != nullptr && retry->isEnabled());
    clock.restart();
    QTest::mouseClick(retry, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(w.jobs()->job(run)->slurmJob > first, 20000);
    QTRY_VERIFY_WITH_TIMEOUT(w.jobs()->job(run)->status == RunStatus::Running, 60000);
    qInfo("Retry clicked to running again: %.1f s", static_cast<double>(clock.elapsed()) / 1000);
    QTRY_COMPARE_WITH_TIMEOUT(cell(w, run, JobTableModel::StatusColumn), QStringLiteral("completed"), 120000);
    QVERIFY(cell(w, run, JobTableModel::PlacementColumn)
                .startsWith(QStringLiteral("Slurm %1 · ended · ").arg(w.jobs()->job(run)->slurmJob)));
    RunStore store(ws.dbPath().toStdString());
    bool resumed = false;
    for (const EventRecord& e : store.listEvents(run)) resumed = resumed || e.kind == "resume";
    QVERIFY2(resumed, "the resubmitted run did not resume from its checkpoint");
    QCOMPARE(lossRows(ws, run), 40);
  }

  // Requeued by Slurm mid-run (as a preemption does): the Jobs table shows
  // it pending again, then running; a workbench opened afresh follows it to
  // completion through Slurm, not through a process of its own.
  void requeuedMidRunAndFollowedByAReopenedWorkbench() {
    const Workspace ws = openWorkspace(env("LATENTLAB_SLURM_WORKSPACE"));
    auto w = std::make_unique<MainWindow>(ws, uitest::quietWindowOptions());
    QVERIFY(showFollowing(*w));
    const qint64 run = runOnCluster(*w, ws, env("LATENTLAB_SLURM_REQUEUE_SPEC"));
    QVERIFY(run > 0);
    QTRY_VERIFY_WITH_TIMEOUT(w->jobs()->job(run)->step >= 14, 90000);
    const qint64 slurmJob = w->jobs()->job(run)->slurmJob;
    QElapsedTimer clock;
    clock.start();
    QCOMPARE(QProcess::execute(QStringLiteral("scontrol"), {QStringLiteral("requeue"), QString::number(slurmJob)}), 0);
    const QStringList seen = watchPlacement(
        *w, run, [&] { return w->jobs()->job(run)->slurmState == QLatin1String("PENDING"); }, 30000);
    qInfo("Where, as shown: %s", qPrintable(seen.join(QStringLiteral(" | "))));
    QVERIFY2(seen.back().startsWith(QStringLiteral("Slurm %1 · PENDING").arg(slurmJob)),
             qPrintable(seen.join(QStringLiteral(" | "))));
    QCOMPARE(cell(*w, run, JobTableModel::StatusColumn), QStringLiteral("queued"));
    // The window closes; another opens on the workspace and follows the job.
    w.reset();
    MainWindow again(ws, uitest::quietWindowOptions());
    QVERIFY(showFollowing(again));
    // Its run says cancelled (the engine stopped), but squeue lists its job: followed.
    QTRY_VERIFY_WITH_TIMEOUT(again.jobs()->job(run) != nullptr, 10000);
    QCOMPARE(again.jobs()->job(run)->slurmJob, slurmJob);
    const QStringList after = watchPlacement(
        again, run, [&] { return again.jobs()->job(run)->status == RunStatus::Completed; }, 120000);
    qInfo("Where, as shown after reopening: %s", qPrintable(after.join(QStringLiteral(" | "))));
    QCOMPARE(cell(again, run, JobTableModel::StatusColumn), QStringLiteral("completed"));
    qInfo("requeue to completed: %.1f s", static_cast<double>(clock.elapsed()) / 1000);
    QVERIFY2(anyMatches(after, QStringLiteral("^Slurm %1 · RUNNING · ").arg(slurmJob)),
             qPrintable(after.join(QStringLiteral(" | "))));
    QCOMPARE(lossRows(ws, run), 40);
  }

  // A profile whose install prefix the nodes do not have: the job ends
  // before any engine starts, the run fails saying so with the job's own
  // last words, and the log has the end of its output file.
  void aJobThatEndsBeforeTheEngineStartsFailsWithItsOutput() {
    const Workspace ws = openWorkspace(env("LATENTLAB_SLURM_WORKSPACE"));
    QFile profile(ws.dir + QStringLiteral("/clusters/no-engine.json"));
    QVERIFY(profile.open(QIODevice::WriteOnly));
    profile.write(R"({"tasks_per_node": 2, "device": "cpu", "time": "00:05:00", "prefix": "/no/such/prefix"})");
    profile.close();
    MainWindow w(ws, uitest::quietWindowOptions());
    QVERIFY(showFollowing(w));
    const qint64 run = runOnCluster(w, ws, env("LATENTLAB_SLURM_SPEC"), QStringLiteral("no-engine"));
    QVERIFY(run > 0);
    QCOMPARE(w.trainingPanel()->cluster(), QStringLiteral("no-engine"));
    QTRY_COMPARE_WITH_TIMEOUT(cell(w, run, JobTableModel::StatusColumn), QStringLiteral("failed"), 60000);
    const JobInfo* job = w.jobs()->job(run);
    // The cause is the output's first error line: slurmstepd's execve error
    // when it reaches the file before the step is torn down, else srun's.
    QVERIFY2(job->error.startsWith(QStringLiteral("Slurm job %1 ended before the run started: ").arg(job->slurmJob)) &&
                 job->error.contains(QStringLiteral("error:")),
             qPrintable(job->error));
    const QString log = job->log.join(QLatin1Char('\n'));
    qInfo("%s", qPrintable(job->error));
    QVERIFY2(log.contains(QStringLiteral("slurm-%1.out ends:").arg(job->slurmJob)), qPrintable(log));
    RunStore store(ws.dbPath().toStdString());
    QCOMPARE(store.run(run).status, RunStatus::Failed);
    QCOMPARE(store.run(run).error, job->error.toStdString());
  }
};

QTEST_MAIN(TestSlurmJobs)
#include "test_slurm_jobs.moc"
