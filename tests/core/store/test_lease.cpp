// Run ownership in the store: one live engine per run (a second is refused
// naming the first), a dead engine's lease is taken over and recorded, readers
// derive "crashed" from the lease, a writer rides out a long foreign lock, and
// readers never create a database.
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <thread>

#include "store/run_store_impl.h"
#include "store/sqlite_db.h"
#include "store_test_util.h"

namespace latentlab {
namespace {
namespace fs = std::filesystem;
using namespace latentlab::test;

// Runs `body` in a child process that exits without releasing anything (as a
// killed engine would), and waits for it.
void inChildThatDies(const std::function<void()>& body) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      body();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
}

TEST(RunLease, ASecondOwnerIsRefusedNamingTheFirst) {
  fs::path path = freshDbPath("lease-second");
  RunStore store(path);
  auto id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  EXPECT_TRUE(store.acquireRun(id).empty());
  RunRecord r = store.run(id);
  ASSERT_TRUE(r.pid.has_value());
  EXPECT_EQ(*r.pid, static_cast<std::int64_t>(::getpid()));
  EXPECT_EQ(r.ownerHost, ProcessIdentity::current().host);
  EXPECT_EQ(checkLease(r, storeNow()).state, LeaseState::Live);
  EXPECT_TRUE(store.acquireRun(id).empty()) << "the owner may take its own lease again";

  // Another process (a second engine) is refused while this one lives, and
  // the run is left exactly as it was.
  inChildThatDies([&] {
    RunStore other(path);
    const Error e = storeErrorOf([&] { other.acquireRun(id); });
    if (!contains(e.message(), "already being run by engine pid " + std::to_string(::getppid()))) ::_exit(4);
  });
  EXPECT_EQ(store.run(id).pid, r.pid);
  EXPECT_TRUE(store.listEvents(id).empty());
  store.releaseRun(id);
  EXPECT_FALSE(store.run(id).pid.has_value());
  EXPECT_EQ(checkLease(store.run(id), storeNow()).state, LeaseState::Free);
}

TEST(RunLease, ADeadOwnersLeaseIsTakenOverAndRecorded) {
  fs::path path = freshDbPath("lease-dead");
  RunStore store(path);
  auto id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  std::int64_t deadPid = 0;
  {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      RunStore child(path);
      child.acquireRun(id);
      child.setStatus(id, RunStatus::Running);
      ::_exit(0);  // as kill -9 would: no release, no outcome
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    deadPid = pid;
  }
  RunRecord r = store.run(id);
  ASSERT_EQ(r.pid, deadPid);
  EXPECT_EQ(r.status, RunStatus::Running);
  const LeaseCheck lease = checkLease(r, storeNow());
  EXPECT_EQ(lease.state, LeaseState::Stale);
  EXPECT_TRUE(contains(lease.reason, "process " + std::to_string(deadPid) + " is not running")) << lease.reason;
  EXPECT_EQ(observedStatus(r, storeNow()), RunStatus::Crashed);

  const std::string taken = store.acquireRun(id);
  EXPECT_TRUE(contains(taken, "engine pid " + std::to_string(deadPid))) << taken;
  EXPECT_EQ(store.run(id).pid, static_cast<std::int64_t>(::getpid()));
  EXPECT_EQ(observedStatus(store.run(id), storeNow()), RunStatus::Running);
  auto events = store.listEvents(id);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "lease");
  EXPECT_TRUE(contains(events[0].message, "not running")) << events[0].message;
}

TEST(RunLease, AnotherHostsOwnerIsLiveUntilItsHeartbeatIsOld) {
  fs::path path = freshDbPath("lease-host");
  RunStore store(path);
  auto id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  SqliteDb& db = RunStoreAccess::db(store);
  auto setOwner = [&](double heartbeatAgo) {
    Statement st(db,
                 "UPDATE runs SET status = 'running', pid = 42, owner_host = 'node-17', owner_start = 'x', "
                 "heartbeat_at = ? WHERE id = ?",
                 "test");
    st.bind(1, storeNow() - heartbeatAgo).bind(2, id).run();
  };
  setOwner(5);
  EXPECT_EQ(checkLease(store.run(id), storeNow()).state, LeaseState::Live);
  EXPECT_EQ(observedStatus(store.run(id), storeNow()), RunStatus::Running);
  EXPECT_TRUE(contains(storeErrorOf([&] { store.acquireRun(id); }).message(), "engine pid 42 on host node-17"));
  setOwner(kLeaseTimeoutSeconds + 15);
  const LeaseCheck old = checkLease(store.run(id), storeNow());
  EXPECT_EQ(old.state, LeaseState::Stale);
  EXPECT_TRUE(contains(old.reason, "no heartbeat for")) << old.reason;
  EXPECT_EQ(observedStatus(store.run(id), storeNow()), RunStatus::Crashed);
  EXPECT_TRUE(contains(store.acquireRun(id), "node-17"));
}

TEST(RunLease, ReadersNeverCreateADatabase) {
  fs::path dir = scratchDir("must-exist");
  const fs::path missing = dir / "typo" / "runs.db";
  const Error e = storeErrorOf([&] { RunStore store(missing, StoreOpen::MustExist); });
  EXPECT_TRUE(contains(e.message(), missing.string())) << e.message();
  EXPECT_TRUE(contains(e.message(), "no such workspace database")) << e.message();
  EXPECT_FALSE(fs::exists(dir / "typo"));
  { RunStore created(dir / "runs.db"); }
  RunStore reopened(dir / "runs.db", StoreOpen::MustExist);
  EXPECT_EQ(reopened.schemaVersion(), RunStore::latestSchemaVersion());
}

TEST(RunLease, StoreAndRunIdsAreRandomAndStable) {
  fs::path path = freshDbPath("ids");
  std::string storeId;
  std::int64_t a = 0;
  std::string uidA;
  {
    RunStore store(path);
    storeId = store.storeId();
    EXPECT_EQ(storeId.size(), 32u);
    a = store.createRun(std::nullopt, "a", "train", "{}", "cpu");
    uidA = store.run(a).uid;
    EXPECT_EQ(uidA.size(), 32u);
    // A deleted run's id may be given again; its uid never is.
    store.deleteRun(a);
    auto again = store.createRun(std::nullopt, "b", "train", "{}", "cpu");
    EXPECT_EQ(again, a);
    EXPECT_NE(store.run(again).uid, uidA);
  }
  EXPECT_EQ(RunStore(path).storeId(), storeId);
  EXPECT_NE(RunStore(freshDbPath("ids-other")).storeId(), storeId);
}

TEST(RunLease, PrunedArtifactsCanBeRemoved) {
  RunStore store(freshDbPath("artifacts"));
  auto id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  store.addArtifact(id, "checkpoint", "/w/runs/1/checkpoints/step-00000002", 2, 0);
  store.addArtifact(id, "checkpoint", "/w/runs/1/checkpoints/step-00000004", 4, 0);
  EXPECT_EQ(store.deleteArtifacts(id, "/w/runs/1/checkpoints/step-00000002"), 1);
  ASSERT_EQ(store.listArtifacts(id).size(), 1u);
  EXPECT_EQ(store.listArtifacts(id)[0].step, 4);
}

TEST(RunLease, MetricsRideOutAWriteLockHeldPastTheBusyTimeout) {
  fs::path path = freshDbPath("busy");
  RunStore store(path);
  auto id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  store.setBusyTimeout(std::chrono::milliseconds(300));
  MetricWriterOptions opts;
  opts.batchRows = 4;
  MetricWriter writer = store.metricWriter(id, opts);
  // Another connection takes the write lock and keeps it past the busy timeout.
  SqliteDb other(path);
  other.exec("BEGIN IMMEDIATE", "test");
  other.exec("INSERT INTO experiments(name, created_at) VALUES ('lock holder', 0)", "test");
  for (int step = 0; step < 40; ++step) writer.add("train/loss", step, step, 0, step);  // never throws
  EXPECT_EQ(writer.pendingRows(), 40u);
  EXPECT_EQ(writer.committedRows(), 0u);
  EXPECT_THROW(writer.flush(), StoreBusy);  // an explicit flush waits the timeout, then says busy
  EXPECT_EQ(writer.pendingRows(), 40u) << "nothing is lost on a busy database";
  other.exec("COMMIT", "test");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the writer's back-off
  for (int step = 40; step < 44; ++step) writer.add("train/loss", step, step, 0, step);
  writer.flush();
  EXPECT_EQ(writer.pendingRows(), 0u);
  auto rows = store.rowsSince(id, "train/loss", -1);
  ASSERT_EQ(rows.size(), 44u);
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].step, static_cast<std::int64_t>(i));
}

}  // namespace
}  // namespace latentlab
