// The job controller with the real engine binary: a tiny pre-training run goes
// queued -> running -> completed (a second one waits for the single CPU slot);
// cancel stops a run with exit 2 and status cancelled; a SIGKILLed child is
// marked crashed; a dead run found on reopening is marked crashed.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>
#include <csignal>

#include "jobs/engine_path.h"
#include "jobs/engine_process.h"
#include "jobs/job_controller.h"
#include "latentlab/run_store.h"
#include "models/job_table_model.h"
#include "panels/jobs_panel.h"
#include "ui_test_support.h"

using namespace latentlab;
using namespace latentlab::ui;

namespace {

QStringList statusesOf(const QSignalSpy& spy, qint64 runId) {
  QStringList out;
  for (const auto& args : spy) {
    if (args.at(0).toLongLong() == runId) out << QString::fromLatin1(runStatusName(args.at(1).value<RunStatus>()));
  }
  return out;
}

qint64 addRun(RunStore& store, const RunSpec& spec) {
  return store.createRun(std::nullopt, spec.name, spec.kind, runSpecToJson(spec), "cpu");
}

}  // namespace

class TestJobController : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    uitest::isolateSettings();
    qInfo("engine: %s", qPrintable(engineExecutablePath()));
  }

  void tinyRunsCompleteOneAtATimeOnTheCpu() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    JobController jobs(store, dir.path(), engineExecutablePath());
    QCOMPARE(jobs.cpuSlots(), 1);
    QSignalSpy status(&jobs, &JobController::statusChanged);
    QSignalSpy progress(&jobs, &JobController::progress);
    QSignalSpy finished(&jobs, &JobController::finished);
    const qint64 a = addRun(*store, uitest::tinySpec("tiny a"));
    const qint64 b = addRun(*store, uitest::tinySpec("tiny b", 10));
    jobs.enqueue(a);
    jobs.enqueue(b);
    QCOMPARE(jobs.job(a)->status, RunStatus::Running);
    QCOMPARE(jobs.job(b)->status, RunStatus::Queued);  // one CPU job at a time
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.at(0).at(0).toLongLong(), a);
    QCOMPARE(finished.at(0).at(1).toInt(), 0);
    QCOMPARE(statusesOf(status, a),
             (QStringList{QStringLiteral("queued"), QStringLiteral("running"), QStringLiteral("completed")}));
    QCOMPARE(store->run(a).status, RunStatus::Completed);
    QVERIFY(progress.count() >= 1);
    const auto& last = progress.last();
    QCOMPARE(last.at(1).toLongLong(), 30);  // step
    QCOMPARE(last.at(2).toLongLong(), 30);  // steps
    QVERIFY(last.at(4).toDouble() > 0);     // loss
    QCOMPARE(jobs.job(a)->step, 30);
    QVERIFY(store->lastStep(a, "train/loss").value_or(0) == 30);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
    QCOMPARE(statusesOf(status, b),
             (QStringList{QStringLiteral("queued"), QStringLiteral("running"), QStringLiteral("completed")}));
    QCOMPARE(store->run(b).status, RunStatus::Completed);
  }

  // Jobs that ask for "cuda" are placed by the memory plan on a device list
  // given to the controller (this machine has no GPU: the list is made up,
  // and the engines then fail at start, which this test does not look at):
  // the first goes to the GPU with the most free memory, the second to the
  // other one, a third waits while both are busy.
  void cudaJobsArePlacedOnTheFreeGpuWithTheMostMemory() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    JobController jobs(store, dir.path(), engineExecutablePath());
    const std::uint64_t gib = std::uint64_t{1} << 30;
    jobs.setDevices({DeviceInfo{"cpu", "CPU", 16 * gib, 8 * gib}, DeviceInfo{"cuda:0", "small", 8 * gib, 2 * gib},
                     DeviceInfo{"cuda:1", "large", 24 * gib, 20 * gib}});
    std::vector<qint64> ids;
    for (const char* name : {"gpu a", "gpu b", "gpu c"}) {
      RunSpec spec = uitest::tinySpec(name);
      spec.device = "cuda";
      ids.push_back(store->createRun(std::nullopt, spec.name, spec.kind, runSpecToJson(spec), "cuda"));
    }
    for (qint64 id : ids) jobs.enqueue(id);
    QCOMPARE(jobs.job(ids[0])->device, QStringLiteral("cuda:1"));
    QCOMPARE(jobs.job(ids[1])->device, QStringLiteral("cuda:0"));
    QCOMPARE(jobs.job(ids[2])->status, RunStatus::Queued);
    QCOMPARE(jobs.job(ids[2])->device, QStringLiteral("cuda"));
    QTRY_COMPARE_WITH_TIMEOUT(jobs.activeCount(), 0, 60000);  // the engines end (no CUDA here)
  }

  // Two single-GPU jobs and one two-GPU job on a simulated pool of two GPUs
  // (the engines run as real CPU runs): every job completes, and at no moment
  // do the running jobs hold a GPU twice or more than the pool has.
  void aSimulatedPoolOfTwoGpusIsNeverOversubscribed() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    JobController jobs(store, dir.path(), engineExecutablePath());
    const std::uint64_t gib = std::uint64_t{1} << 30;
    jobs.setDevices({DeviceInfo{"cpu", "CPU", 16 * gib, 8 * gib}, DeviceInfo{"cuda:0", "sim", 24 * gib, 22 * gib},
                     DeviceInfo{"cuda:1", "sim", 24 * gib, 20 * gib}},
                    QStringLiteral("cpu"));
    auto add = [&](const char* name, const char* device, int steps) {
      RunSpec spec = uitest::tinySpec(name, steps);
      spec.device = device;
      return store->createRun(std::nullopt, spec.name, spec.kind, runSpecToJson(spec), device);
    };
    const qint64 a = add("one gpu a", "cuda", 20), pair = add("two gpus", "cuda:0,cuda:1", 10),
                 b = add("one gpu b", "cuda", 20);
    // Every change of status: the GPUs the running jobs hold.
    QStringList violations;
    int mostHeld = 0;
    bool pairRan = false;
    connect(&jobs, &JobController::statusChanged, this, [&](qint64, RunStatus) {
      QHash<QString, int> held;
      for (qint64 id : {a, pair, b}) {
        const JobInfo* j = jobs.job(id);
        if (j == nullptr || j->status != RunStatus::Running) continue;
        if (id == pair) pairRan = true;
        for (const QString& d : JobController::rankDevices(j->device)) held[d] += 1;
      }
      int total = 0;
      for (auto it = held.cbegin(); it != held.cend(); ++it) {
        total += it.value();
        if (it.value() > 1 || !it.key().startsWith(QLatin1String("cuda:"))) violations << it.key();
      }
      mostHeld = std::max(mostHeld, total);
    });
    QSignalSpy finished(&jobs, &JobController::finished);
    for (qint64 id : {a, pair, b}) jobs.enqueue(id);
    QCOMPARE(jobs.job(a)->device, QStringLiteral("cuda:0"));  // the most free memory
    QCOMPARE(jobs.job(pair)->status, RunStatus::Queued);      // needs both
    QCOMPARE(jobs.job(b)->device, QStringLiteral("cuda:1"));  // the other one
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 3, 180000);
    for (qint64 id : {a, pair, b}) QCOMPARE(store->run(id).status, RunStatus::Completed);
    QVERIFY2(violations.isEmpty(), qPrintable(violations.join(QStringLiteral(", "))));
    QVERIFY(pairRan);
    QCOMPARE(mostHeld, 2);
    const auto summary = QJsonDocument::fromJson(QByteArray::fromStdString(store->run(pair).summaryJson)).object();
    QCOMPARE(summary.value(QStringLiteral("data_parallel")).toObject().value(QStringLiteral("world_size")).toInt(), 2);
  }

  void cancelStopsTheRunWithExitCode2() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    JobController jobs(store, dir.path(), engineExecutablePath());
    QSignalSpy status(&jobs, &JobController::statusChanged);
    QSignalSpy progress(&jobs, &JobController::progress);
    QSignalSpy finished(&jobs, &JobController::finished);
    const qint64 id = addRun(*store, uitest::tinySpec("long", 100000));
    jobs.enqueue(id);
    QVERIFY(progress.wait(60000));
    jobs.cancel(id);
    QVERIFY(finished.wait(30000));
    QCOMPARE(finished.at(0).at(1).toInt(), 2);
    QCOMPARE(statusesOf(status, id).last(), QStringLiteral("cancelled"));
    QCOMPARE(store->run(id).status, RunStatus::Cancelled);
    QVERIFY(!store->run(id).pid.has_value());
  }

  void killedChildIsMarkedCrashed() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    JobController jobs(store, dir.path(), engineExecutablePath());
    QSignalSpy status(&jobs, &JobController::statusChanged);
    QSignalSpy progress(&jobs, &JobController::progress);
    QSignalSpy finished(&jobs, &JobController::finished);
    const qint64 id = addRun(*store, uitest::tinySpec("doomed", 100000));
    jobs.enqueue(id);
    QVERIFY(progress.wait(60000));
    const qint64 pid = jobs.processId(id);
    QVERIFY(pid > 0);
    QCOMPARE(::kill(static_cast<pid_t>(pid), SIGKILL), 0);
    QVERIFY(finished.wait(30000));
    QCOMPARE(finished.at(0).at(1).toInt(), -SIGKILL);
    QCOMPARE(statusesOf(status, id).last(), QStringLiteral("crashed"));
    const RunRecord r = store->run(id);
    QCOMPARE(r.status, RunStatus::Crashed);
    QCOMPARE(QString::fromStdString(r.error), QStringLiteral("engine process ended unexpectedly (signal 9)"));
  }

  void dataParallelCpuJobRunsTwoGlooRanks() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    JobController jobs(store, dir.path(), engineExecutablePath());
    QSignalSpy finished(&jobs, &JobController::finished);
    const RunSpec spec = uitest::tinySpec("two ranks", 8);
    const qint64 id = store->createRun(std::nullopt, spec.name, spec.kind, runSpecToJson(spec), "cpu,cpu");
    jobs.enqueue(id);
    QCOMPARE(jobs.rankProcessIds(id).size(), 2);
    QVERIFY(finished.wait(90000));
    QCOMPARE(finished.at(0).at(1).toInt(), 0);
    const RunRecord r = store->run(id);
    QCOMPARE(r.status, RunStatus::Completed);
    const QJsonObject summary = QJsonDocument::fromJson(QByteArray::fromStdString(r.summaryJson)).object();
    QCOMPARE(summary.value(QStringLiteral("data_parallel")).toObject().value(QStringLiteral("world_size")).toInt(), 2);
    // Global batch: 2 ranks x 4 rows x 32 tokens per step.
    QCOMPARE(store->rowsSince(id, "train/loss", -1).back().tokens, 8 * 2 * 4 * 32);
    QVERIFY(jobs.job(id)->log.join(QLatin1Char('\n')).contains(QStringLiteral("data parallel: 2 ranks")));
  }

  void aDeadRankStopsTheWholeJob() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    JobController jobs(store, dir.path(), engineExecutablePath());
    QSignalSpy progress(&jobs, &JobController::progress);
    QSignalSpy finished(&jobs, &JobController::finished);
    const RunSpec spec = uitest::tinySpec("rank dies", 100000);
    const qint64 id = store->createRun(std::nullopt, spec.name, spec.kind, runSpecToJson(spec), "cpu,cpu");
    jobs.enqueue(id);
    QVERIFY(progress.wait(90000));
    const QList<qint64> pids = jobs.rankProcessIds(id);
    QCOMPARE(pids.size(), 2);
    QCOMPARE(::kill(static_cast<pid_t>(pids[1]), SIGKILL), 0);
    QVERIFY(finished.wait(30000));  // not the 300 s collective timeout: the controller stops rank 0
    const RunRecord r = store->run(id);
    QCOMPARE(r.status, RunStatus::Crashed);
    QVERIFY2(QString::fromStdString(r.error).contains(QStringLiteral("rank 1 ended unexpectedly (signal 9)")),
             r.error.c_str());
  }

  void deadRunFoundOnReopeningIsMarkedCrashed() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 id = addRun(*store, uitest::tinySpec("orphan"));
    store->setStatus(id, RunStatus::Running);
    store->setPid(id, 999999999);  // no such process
    JobController jobs(store, dir.path(), engineExecutablePath());
    jobs.reattach(false);
    QCOMPARE(store->run(id).status, RunStatus::Crashed);
  }

  // The workbench and `runs list` judge a running run by the same lease: a
  // live owner (here this process, as another engine would be) is followed,
  // not marked crashed; once the lease is gone the run is crashed.
  void aRunWithALiveLeaseIsFollowedAndCrashedWhenTheLeaseGoes() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 id = addRun(*store, uitest::tinySpec("owned elsewhere"));
    store->acquireRun(id);
    store->setStatus(id, RunStatus::Running);
    JobController jobs(store, dir.path(), engineExecutablePath());
    jobs.reattach(false);
    QCOMPARE(store->run(id).status, RunStatus::Running);
    QVERIFY(jobs.job(id) != nullptr);
    QCOMPARE(jobs.job(id)->status, RunStatus::Running);
    QSignalSpy finished(&jobs, &JobController::finished);
    store->releaseRun(id);  // the owner is gone without recording an outcome
    QVERIFY(finished.wait(10000));
    QCOMPARE(store->run(id).status, RunStatus::Crashed);
    QCOMPARE(jobs.job(id)->status, RunStatus::Crashed);
  }

  // A run whose engine holds it from another host (a cluster node sharing the
  // workspace) is followed by its heartbeat; Cancel signals nothing here,
  // where its pid names some other process, and says where it runs.
  void cancellingARunOwnedOnAnotherHostSignalsNothingHere() {
    QTemporaryDir dir;
    const QString db = dir.filePath(QStringLiteral("runs.db"));
    auto store = std::make_shared<RunStore>(db.toStdString());
    const qint64 id = addRun(*store, uitest::tinySpec("owned on a node"));
    store->acquireRun(id);
    store->setStatus(id, RunStatus::Running);
    QProcess bystander;  // a process of this host whose pid the remote engine happens to have
    bystander.start(QStringLiteral("sleep"), {QStringLiteral("60")});
    QVERIFY(bystander.waitForStarted());
    QCOMPARE(QProcess::execute(QStringLiteral("sqlite3"),
                               {db, QStringLiteral("update runs set owner_host='node-elsewhere', pid=%1 where id=%2")
                                        .arg(bystander.processId())
                                        .arg(id)}),
             0);
    store->heartbeat(id);
    JobController jobs(store, dir.path(), engineExecutablePath());
    jobs.reattach(false);
    QVERIFY(jobs.job(id) != nullptr);
    QCOMPARE(jobs.job(id)->status, RunStatus::Running);
    jobs.cancel(id);
    QVERIFY(!bystander.waitForFinished(500));
    QCOMPARE(bystander.state(), QProcess::Running);
    QCOMPARE(jobs.job(id)->log.back(), QStringLiteral("the engine runs on host node-elsewhere: stop it there"));
    QVERIFY(!jobs.job(id)->cancelRequested);
    bystander.kill();
    bystander.waitForFinished();
  }

  // A job followed from the store (started by an earlier session) shows what
  // a launched one shows: progress, step, speed and an ETA at the pace of its
  // newest rows (wall time of training, not since the run was first started).
  void aReattachedJobShowsProgressSpeedAndEtaFromTheStore() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    RunSpec spec = uitest::tinySpec("followed", 100);
    const qint64 id = addRun(*store, spec);
    store->acquireRun(id);
    store->setStatus(id, RunStatus::Running);
    {
      MetricWriter w = store->metricWriter(id);
      for (int s = 1; s <= 30; ++s) {
        w.add("train/loss", s, s * 512, 100.0 + s * 0.5, 6.0 - 0.01 * s);  // 2 steps a second
        w.add("tokens_per_s", s, s * 512, 100.0 + s * 0.5, 1024.0);
      }
    }
    JobController jobs(store, dir.path(), engineExecutablePath());
    JobTableModel table(&jobs);
    QElapsedTimer clock;
    clock.start();
    jobs.reattach(false);
    QCOMPARE(table.rowCount(), 1);
    auto cell = [&](int column) { return table.index(0, column).data(); };
    QTRY_VERIFY_WITH_TIMEOUT(cell(JobTableModel::ProgressColumn).toInt() > 0, 2000);
    QVERIFY(clock.elapsed() < 2000);
    QCOMPARE(cell(JobTableModel::ProgressColumn).toInt(), 30);
    QCOMPARE(cell(JobTableModel::StepColumn).toString(), QStringLiteral("30 / 100"));
    QCOMPARE(cell(JobTableModel::SpeedColumn).toString(), QStringLiteral("1024 tok/s"));
    const double eta = jobs.job(id)->etaSeconds();
    QVERIFY2(std::isfinite(eta) && std::abs(eta - 35.0) < 1.0, qPrintable(QString::number(eta)));  // 70 steps at 2/s
    QVERIFY(cell(JobTableModel::EtaColumn).toString() != QStringLiteral("–"));
    store->releaseRun(id);
  }

  // A run queued after another waits for it (two CPU slots free or not),
  // starts once it completed, and is cancelled when what it waits for is.
  void aRunQueuedAfterAnotherWaitsForIt() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 base = addRun(*store, uitest::tinySpec("base", 20));
    const qint64 next = addRun(*store, uitest::tinySpec("next", 10));
    JobController jobs(store, dir.path(), engineExecutablePath());
    jobs.setCpuSlots(2);
    JobTableModel table(&jobs);
    jobs.enqueue(base);
    jobs.enqueue(next, base);
    QCOMPARE(jobs.job(next)->status, RunStatus::Queued);
    QCOMPARE(table.index(1, JobTableModel::StatusColumn).data().toString(), QStringLiteral("waits for #%1").arg(base));
    QCOMPARE(store->tags(next), std::vector<std::string>{"after:" + std::to_string(base)});
    QTRY_COMPARE_WITH_TIMEOUT(jobs.activeCount(), 0, 120000);
    QCOMPARE(store->run(base).status, RunStatus::Completed);
    QCOMPARE(store->run(next).status, RunStatus::Completed);
    QVERIFY(*store->run(next).startedAt >= *store->run(base).finishedAt);
    // What it waits for is cancelled: it is cancelled too, saying why.
    const qint64 other = addRun(*store, uitest::tinySpec("other", 10));
    const qint64 after = addRun(*store, uitest::tinySpec("after other", 10));
    jobs.setCpuSlots(0);  // nothing starts: both stay queued
    jobs.enqueue(other);
    jobs.enqueue(after, other);
    jobs.cancel(other);
    QCOMPARE(store->run(after).status, RunStatus::Cancelled);
    QVERIFY(QString::fromStdString(store->run(after).error).contains(QStringLiteral("run %1").arg(other)));
  }

  // "waits for #N" lasts while run N is queued or running: once it completed,
  // a run without a free slot reads queued, and the table says so at once.
  void aWaitingRunSaysSoOnlyUntilWhatItWaitsForEnds() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    const qint64 base = addRun(*store, uitest::tinySpec("base", 10));
    const qint64 next = addRun(*store, uitest::tinySpec("next", 10));
    JobController jobs(store, dir.path(), engineExecutablePath());
    jobs.setCpuSlots(2);
    JobTableModel table(&jobs);
    jobs.enqueue(base);
    jobs.enqueue(next, base);
    QTRY_COMPARE_WITH_TIMEOUT(jobs.job(base)->status, RunStatus::Running, 30000);
    jobs.setCpuSlots(0);  // no slot for `next` when `base` ends
    const QModelIndex status = table.index(1, JobTableModel::StatusColumn);
    QCOMPARE(status.data().toString(), QStringLiteral("waits for #%1").arg(base));
    QSignalSpy changed(&table, &QAbstractItemModel::dataChanged);
    QTRY_COMPARE_WITH_TIMEOUT(jobs.job(base)->status, RunStatus::Completed, 120000);
    QCOMPARE(jobs.job(next)->status, RunStatus::Queued);
    QCOMPARE(status.data().toString(), QStringLiteral("queued"));
    bool repainted = false;
    for (const auto& args : changed) {
      const auto from = args.at(0).value<QModelIndex>(), to = args.at(1).value<QModelIndex>();
      repainted = repainted || (from.row() <= 1 && to.row() >= 1 && from.column() <= JobTableModel::StatusColumn &&
                                to.column() >= JobTableModel::StatusColumn);
    }
    QVERIFY2(repainted, "the waiting run's status cell is refreshed when what it waited for ends");
    jobs.setCpuSlots(2);
    QTRY_COMPARE_WITH_TIMEOUT(jobs.activeCount(), 0, 120000);
    QCOMPARE(store->run(next).status, RunStatus::Completed);
  }

  // The Jobs table follows the job that starts running, far down a queue.
  void theJobsTableFollowsTheRunningJob() {
    QTemporaryDir dir;
    auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());
    JobController jobs(store, dir.path(), engineExecutablePath());
    jobs.setCpuSlots(0);
    JobTableModel table(&jobs);
    JobsPanel panel(&jobs, &table);
    panel.resize(700, 140);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    std::vector<qint64> ids;
    for (int i = 0; i < 30; ++i) {
      ids.push_back(addRun(*store, uitest::tinySpec("queued " + std::to_string(i), 5)));
      jobs.enqueue(ids.back());
    }
    for (int i = 0; i < 25; ++i) jobs.cancel(ids[static_cast<std::size_t>(i)]);  // the queue's head is gone
    QTableView* view = panel.view();
    view->scrollToTop();
    const qint64 next = ids[25];
    jobs.setCpuSlots(1);
    QTRY_COMPARE_WITH_TIMEOUT(jobs.job(next)->status, RunStatus::Running, 20000);
    QTest::qWait(50);  // the panel scrolls once the view has laid out the rows
    const QRect row = view->visualRect(table.index(table.rowOf(next), JobTableModel::RunColumn));
    QVERIFY2(view->viewport()->rect().intersects(row),
             qPrintable(QStringLiteral("row %1 at y %2, viewport %3 high, scroll %4 of %5")
                            .arg(table.rowOf(next))
                            .arg(row.y())
                            .arg(view->viewport()->height())
                            .arg(view->verticalScrollBar()->value())
                            .arg(view->verticalScrollBar()->maximum())));
    for (qint64 id : ids) jobs.cancel(id);
    QTRY_COMPARE_WITH_TIMEOUT(jobs.activeCount(), 0, 60000);
  }

  // After a resume the ETA follows the pace seen since, not the whole run's.
  // A job's engine.log: opened at its first line, closed when the job ends;
  // a run whose log folder was removed meanwhile gets it back on its next line.
  void aJobLogIsWrittenAgainAfterItsFolderWasRemoved() {
    QTemporaryDir dir;
    JobLogFiles logs(dir.path());
    const QString folder = dir.filePath(QStringLiteral("runs/7"));
    logs.append(7, QStringLiteral("first"));
    logs.append(7, QStringLiteral("second"));
    auto read = [&] {
      QFile f(folder + QStringLiteral("/engine.log"));
      return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QStringLiteral("<missing>");
    };
    QCOMPARE(read(), QStringLiteral("first\nsecond\n"));  // flushed line by line
    logs.close(7);
    QVERIFY(QDir(folder).removeRecursively());
    logs.append(7, QStringLiteral("retried"));
    QCOMPARE(read(), QStringLiteral("retried\n"));
  }

  void etaFollowsTheRecentPace() {
    JobInfo j;
    j.status = RunStatus::Running;
    j.steps = 200;
    j.startedAt = QDateTime::currentDateTime().addSecs(-1000);  // the run's first start, long ago
    j.observe(100, 0);                                          // resumed at step 100
    j.observe(110, 5000);                                       // 2 steps/s since
    j.step = 110;
    QCOMPARE(j.etaSeconds(), 45.0);
    j.observe(50, 6000);  // restarted from an earlier checkpoint: the pace starts again
    j.step = 50;
    QCOMPARE(j.etaSeconds(), -1.0);
  }
};

QTEST_MAIN(TestJobController)  // widgets too: the Jobs table follows the running job
#include "test_job_controller.moc"
