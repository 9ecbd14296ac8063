// Concurrency and crash safety: a reader on its own connection while one
// writer inserts (never busy, always a committed prefix), a writer process
// killed with SIGKILL mid-write (file intact, every committed batch present),
// and processes that open one new workspace at the same instant (as the ranks
// of a data-parallel run do).
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <csignal>
#include <thread>

#include "store_test_util.h"

namespace latentlab {
namespace {
namespace fs = std::filesystem;
using namespace latentlab::test;

// Every step 0..n-1 present exactly once with value == step.
::testing::AssertionResult isPrefix(const std::vector<MetricPoint>& rows) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].step != static_cast<std::int64_t>(i) || rows[i].value != static_cast<double>(i)) {
      return ::testing::AssertionFailure() << "row " << i << " has step " << rows[i].step;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(StoreConcurrency, ReaderSeesACommittedPrefixAndNeverBusy) {
  fs::path path = freshDbPath("concurrent");
  constexpr int kBatch = 100;
  constexpr int kRows = 20000;
  std::int64_t id = 0;
  { id = RunStore(path).createRun(std::nullopt, "r", "train", "{}", "cpu"); }

  std::atomic<bool> done{false};
  std::string readerError;
  int polls = 0;
  std::size_t maxSeen = 0;
  std::thread reader([&] {
    try {
      RunStore store(path);  // the reader's own connection
      std::vector<MetricPoint> held;
      while (true) {
        bool last = done.load();
        auto fresh = store.rowsSince(id, "loss", held.empty() ? -1 : held.back().step);
        held.insert(held.end(), fresh.begin(), fresh.end());
        auto series = store.series(id, "loss", 0, kRows, 400);
        if (!isPrefix(held) || held.size() % kBatch != 0) {
          readerError = "not a committed prefix at " + std::to_string(held.size()) + " rows";
          return;
        }
        if (!series.empty() && series.back().step >= static_cast<std::int64_t>(kRows)) {
          readerError = "series beyond the written rows";
          return;
        }
        maxSeen = held.size();
        ++polls;
        if (last) return;
      }
    } catch (const std::exception& e) {
      readerError = e.what();
    }
  });

  {
    RunStore store(path);
    MetricWriter w = store.metricWriter(id, {kBatch, std::chrono::hours(1)});
    for (int s = 0; s < kRows; ++s) w.add("loss", s, s, s * 0.01, s);
    EXPECT_EQ(w.committedBatches(), static_cast<std::uint64_t>(kRows / kBatch));
  }
  done = true;
  reader.join();
  EXPECT_EQ(readerError, "");
  EXPECT_EQ(maxSeen, static_cast<std::size_t>(kRows));
  EXPECT_GT(polls, 1);
}

// Child: writes batches of `batch` rows of "loss" starting after the last
// stored step, reporting each committed step count on `fd`, until killed.
[[noreturn]] void writeUntilKilled(const fs::path& path, std::int64_t runId, int batch, int fd) {
  try {
    RunStore store(path);
    std::int64_t step = store.lastStep(runId, "loss").value_or(-1) + 1;
    MetricWriter w = store.metricWriter(runId, {static_cast<std::size_t>(batch), std::chrono::hours(1)});
    for (;;) {
      w.add("loss", step, step, 0.0, static_cast<double>(step));
      ++step;
      if (w.pendingRows() == 0) {  // a batch just committed
        std::int64_t committed = step;
        if (::write(fd, &committed, sizeof committed) != sizeof committed) ::_exit(3);
      }
    }
  } catch (...) {
    ::_exit(2);
  }
}

TEST(StoreConcurrency, KillMinus9MidWriteKeepsEveryCommittedBatch) {
  fs::path path = freshDbPath("kill9");
  constexpr int kBatch = 64;
  std::int64_t id = 0;
  { id = RunStore(path).createRun(std::nullopt, "r", "train", "{}", "cpu"); }

  std::int64_t committed = 0;
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(fds[0]);
      writeUntilKilled(path, id, kBatch, fds[1]);
    }
    ::close(fds[1]);
    // Let it commit a good number of batches, then kill it wherever it is.
    std::int64_t reported = 0;
    int batches = 0;
    while (batches < 40 + 25 * round && ::read(fds[0], &reported, sizeof reported) == sizeof reported) ++batches;
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    std::int64_t more = 0;  // reports already in the pipe when it died
    while (::read(fds[0], &more, sizeof more) == sizeof more) reported = more;
    ::close(fds[0]);
    ASSERT_GT(reported, committed);
    committed = reported;

    RunStore store(path);
    EXPECT_EQ(store.integrityCheck(), "ok");
    auto rows = store.rowsSince(id, "loss", -1);
    EXPECT_TRUE(isPrefix(rows));
    EXPECT_GE(static_cast<std::int64_t>(rows.size()), committed);  // every reported batch is there
    EXPECT_EQ(rows.size() % kBatch, 0u);                           // and no half batch
    committed = static_cast<std::int64_t>(rows.size());
  }
}

// Several processes released at once onto a workspace file that does not exist
// yet: each one creates or joins it, switches it to WAL and migrates it. None
// may fail with "database is locked" (switching to WAL needs an exclusive lock,
// and SQLite answers a would-be deadlock at once, without the busy handler).
TEST(StoreConcurrency, ProcessesOpeningANewWorkspaceAtOnceAllSucceed) {
  constexpr int kProcesses = 6;
  for (int round = 0; round < 8; ++round) {
    const fs::path path = freshDbPath("open-at-once-" + std::to_string(round));
    int gate[2];
    ASSERT_EQ(::pipe(gate), 0);
    std::vector<pid_t> children;
    for (int i = 0; i < kProcesses; ++i) {
      pid_t child = ::fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        ::close(gate[1]);
        char c = 0;
        (void)::read(gate[0], &c, 1);  // returns when the parent closes the gate
        try {
          RunStore store(path);
          store.createRun(std::nullopt, "r" + std::to_string(i), "train", "{}", "cpu");
        } catch (const std::exception& e) {
          std::fprintf(stderr, "process %d: %s\n", i, e.what());
          ::_exit(1);
        }
        ::_exit(0);
      }
      children.push_back(child);
    }
    ::close(gate[0]);
    ::close(gate[1]);  // all children wake together
    int failed = 0;
    for (pid_t child : children) {
      int status = 0;
      ASSERT_EQ(::waitpid(child, &status, 0), child);
      failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(failed, 0) << "round " << round;
    RunStore store(path);
    EXPECT_EQ(store.listRuns({}).size(), static_cast<std::size_t>(kProcesses)) << "round " << round;
    EXPECT_EQ(store.integrityCheck(), "ok");
  }
}

}  // namespace
}  // namespace latentlab
