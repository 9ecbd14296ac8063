// A run never reports another run's results: run folders belong to one run of
// one database, a full disk fails the run cleanly and leaves it resumable,
// resume needs only the run's own checkpoint, a tokenizer the model cannot
// embed is refused up front, and a long foreign lock on the database loses
// nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "common/file_util.h"
#include "latentlab/architectures.h"
#include "latentlab/engine.h"
#include "latentlab/train.h"
#include "store/sqlite_db.h"
#include "test_support.h"
#include "train_test_util.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Every file below `dir` with its size and modification time: equal snapshots
// mean nothing was written, removed or replaced.
std::map<std::string, std::pair<std::uintmax_t, fs::file_time_type>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<std::uintmax_t, fs::file_time_type>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = {e.file_size(), e.last_write_time()};
  }
  return out;
}

std::uintmax_t fileSize(const fs::path& p) {
  return fs::file_size(p);
}

std::string latestName(const fs::path& runDir) {
  std::string s = readTextFile(runDir / "checkpoints" / "latest");
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

bool anyPartial(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (contains(e.path().filename().string(), ".partial-") || contains(e.path().filename().string(), ".tmp."))
      return true;
  }
  return false;
}

struct Workspace {
  fs::path dir;
  RunStore store;
  explicit Workspace(const std::string& name, const std::string& db = "runs.db")
      : dir(scratchDir(name)), store(dir / db) {}
  JobEnvironment env() const {
    JobEnvironment e;
    e.workspace = dir;
    return e;
  }
  std::int64_t add(const RunSpec& spec) {
    return store.createRun(std::nullopt, spec.name, spec.kind, runSpecToJson(spec), "cpu");
  }
  RunResult run(std::int64_t id) {
    NullProgress quiet;
    CancelToken never;
    return runJob(store, id, env(), quiet, never);
  }
  fs::path runDir(std::int64_t id) const { return dir / "runs" / std::to_string(id); }
  // Runs `id` and cancels it as soon as its first checkpoint is written.
  RunStatus runToFirstCheckpoint(std::int64_t id) {
    CancelToken cancel;
    JobEnvironment e = env();
    e.lines = [&](const std::string& line) {
      if (line.find("\"event\":\"checkpoint\"") != std::string::npos) cancel.request();
    };
    NullProgress quiet;
    return runJob(store, id, e, quiet, cancel).status;
  }
};

RunSpec smallRun(int steps, int checkpointEvery) {
  RunSpec s = tinyPretrainSpec(steps);
  s.data.validationShare = 0.0;
  s.checkpointEvery = checkpointEvery;
  return s;
}

// Turns the disk-full injection off however a test ends.
struct WriteBudget {
  explicit WriteBudget(long long bytes) { setWriteBudgetForTesting(bytes); }
  ~WriteBudget() { setWriteBudgetForTesting(-1); }
};

}  // namespace

TEST(RunIntegrity, AnOutDirHoldingAnotherRunIsRefusedAndLeftUntouched) {
  Workspace ws("foreign-outdir");
  const auto a = ws.add(smallRun(6, 3));
  ASSERT_EQ(ws.run(a).status, RunStatus::Completed);
  const auto before = snapshot(ws.runDir(a));

  RunSpec thief = smallRun(6, 3);
  thief.optimizer.lr = 1e-3;
  thief.seed = 99;
  thief.outDir = ws.runDir(a).string();
  // The CLI refuses it before registering anything ...
  try {
    preflightRunSpec(thief, "thief.json", ws.dir);
    ADD_FAILURE() << "preflight accepted another run's folder";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.message(), "out_dir belongs to run " + std::to_string(a))) << e.message();
  }
  // ... and the engine refuses it for a run registered some other way.
  const auto b = ws.add(thief);
  RunResult r = ws.run(b);
  EXPECT_EQ(r.status, RunStatus::Failed);
  EXPECT_TRUE(contains(r.errorText(), "belongs to another run")) << r.errorText();
  EXPECT_TRUE(contains(r.errorText(), "run " + std::to_string(a) + " of")) << r.errorText();
  EXPECT_EQ(ws.store.metricCount(b), 0u);
  EXPECT_EQ(snapshot(ws.runDir(a)), before);
  EXPECT_EQ(ws.store.run(a).status, RunStatus::Completed);
}

// out_dir stays in its place: "/", /etc, the workspace itself and a folder
// holding it are refused before and after registration with nothing written;
// a relative out_dir lies inside the workspace, never the current folder; an
// empty folder made for the run is taken.
TEST(RunIntegrity, OutDirMustBeInsideTheRunsAreaOrAnEmptyFolder) {
  Workspace ws("outdir-bounds");
  const fs::path outside = scratchDir("outdir-bounds-outside");
  std::ofstream(outside / "keep.txt") << "keep me";
  for (const std::string& dir :
       {std::string("/"), std::string("/etc"), ws.dir.string(), ws.dir.parent_path().string(), outside.string()}) {
    RunSpec spec = smallRun(2, 1);
    spec.outDir = dir;
    try {
      preflightRunSpec(spec, "spec.json", ws.dir);
      ADD_FAILURE() << dir << " was accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.message(), "out_dir")) << e.message();
    }
    const auto id = ws.add(spec);
    const RunResult r = ws.run(id);
    EXPECT_EQ(r.status, RunStatus::Failed) << dir;
    EXPECT_TRUE(contains(r.errorText(), "out_dir")) << r.errorText();
    EXPECT_FALSE(fs::exists(fs::path(dir) / "owner.json")) << dir;
    EXPECT_FALSE(fs::exists(fs::path(dir) / "checkpoints")) << dir;
  }
  EXPECT_EQ(readTextFile(outside / "keep.txt"), "keep me");
  // Relative: inside the workspace's runs area.
  RunSpec relative = smallRun(2, 1);
  relative.outDir = "runs/named";
  const auto a = ws.add(relative);
  const RunResult ra = ws.run(a);
  ASSERT_EQ(ra.status, RunStatus::Completed) << ra.errorText();
  EXPECT_TRUE(fs::exists(ws.dir / "runs" / "named" / "owner.json"));
  // An empty folder outside, made for the run.
  const fs::path empty = scratchDir("outdir-bounds-empty");
  RunSpec elsewhere = smallRun(2, 1);
  elsewhere.outDir = empty.string();
  const auto b = ws.add(elsewhere);
  EXPECT_EQ(ws.run(b).status, RunStatus::Completed);
  EXPECT_TRUE(fs::exists(empty / "owner.json"));
}

TEST(RunIntegrity, TwoDatabasesSharingAWorkspaceNeverAdoptEachOthersCheckpoints) {
  Workspace ws("shared-workspace", "first.db");
  const auto first = ws.add(smallRun(6, 3));
  ASSERT_EQ(ws.run(first).status, RunStatus::Completed);
  const auto before = snapshot(ws.runDir(first));

  RunStore other(ws.dir / "second.db");
  RunSpec spec = smallRun(6, 3);
  spec.optimizer.lr = 1e-3;
  const auto second = other.createRun(std::nullopt, "other", spec.kind, runSpecToJson(spec), "cpu");
  ASSERT_EQ(second, first) << "the same run id in both databases is the case at stake";
  NullProgress quiet;
  CancelToken never;
  RunResult r = runJob(other, second, ws.env(), quiet, never);
  EXPECT_EQ(r.status, RunStatus::Failed);
  EXPECT_TRUE(contains(r.errorText(), "belongs to another database")) << r.errorText();
  EXPECT_TRUE(contains(r.errorText(), (ws.dir / "first.db").string())) << r.errorText();
  EXPECT_EQ(other.metricCount(second), 0u) << "no step of another run is reported as this run's";
  EXPECT_EQ(other.run(second).status, RunStatus::Failed);
  EXPECT_EQ(snapshot(ws.runDir(first)), before);
}

TEST(RunIntegrity, DiskFullWhileWritingTheOptimizerStateFailsCleanlyAndResumes) {
  Workspace ws("disk-full");
  const auto warm = ws.add(smallRun(6, 3));  // builds the tokenizer and token caches
  ASSERT_EQ(ws.run(warm).status, RunStatus::Completed);
  const auto warmBefore = snapshot(ws.runDir(warm));

  // A probe run measures every byte a run writes through the file layer.
  const auto probe = ws.add(smallRun(6, 3));
  long long probeBytes = 0;
  {
    const long long lots = 1LL << 50;
    WriteBudget budget(lots);
    ASSERT_EQ(ws.run(probe).status, RunStatus::Completed);
    probeBytes = lots - writeBudgetLeftForTesting();
  }
  const fs::path last = ws.runDir(probe) / "checkpoints" / "step-00000006";
  const long long optimizerBytes = static_cast<long long>(fileSize(last / "optimizer.pt"));
  const long long tail = static_cast<long long>(fileSize(last / "trainer_state.json") + fileSize(last / "spec.json") +
                                                fileSize(ws.runDir(probe) / "checkpoints" / "latest"));
  ASSERT_GT(optimizerBytes, 100000);

  // The same run on a disk that fills up half-way through the last optimizer.pt.
  const auto victim = ws.add(smallRun(6, 3));
  RunResult r(RunStatus::Queued);
  {
    WriteBudget budget(probeBytes - tail - optimizerBytes / 2);
    r = ws.run(victim);
  }
  ASSERT_EQ(r.status, RunStatus::Failed);
  EXPECT_TRUE(contains(r.errorText(), "optimizer.pt")) << r.errorText();
  EXPECT_TRUE(contains(r.errorText(), "disk full")) << r.errorText();
  RunRecord rec = ws.store.run(victim);
  EXPECT_EQ(rec.status, RunStatus::Failed);
  EXPECT_TRUE(contains(rec.error, "disk full")) << rec.error;
  EXPECT_FALSE(rec.pid.has_value()) << "the lease is given back";
  EXPECT_FALSE(anyPartial(ws.runDir(victim))) << "partial folders are removed";
  EXPECT_EQ(latestName(ws.runDir(victim)), "step-00000003");
  EXPECT_FALSE(fs::exists(ws.runDir(victim) / "checkpoints" / "step-00000006"));

  // With space again it resumes from its last complete checkpoint.
  RunResult again = ws.run(victim);
  ASSERT_EQ(again.status, RunStatus::Completed) << again.errorText();
  bool resumed = false;
  for (const auto& e : ws.store.listEvents(victim)) resumed |= e.kind == "resume" && contains(e.message, "step 3");
  EXPECT_TRUE(resumed);
  EXPECT_EQ(seriesValues(ws.store, victim, "train/loss"), seriesValues(ws.store, probe, "train/loss"));
  EXPECT_EQ(snapshot(ws.runDir(warm)), warmBefore);
}

TEST(RunIntegrity, ResumeNeedsOnlyTheCheckpointNotTheOriginalModelFolder) {
  Workspace ws("resume-without-model");
  const auto base = ws.add(smallRun(4, 0));
  RunResult pre = ws.run(base);
  ASSERT_EQ(pre.status, RunStatus::Completed) << pre.errorText();
  const fs::path modelDir = ws.dir / "base-model";
  fs::copy(pre.finalModel, modelDir, fs::copy_options::recursive);
  ASSERT_TRUE(fs::exists(modelDir / "tokenizer.json"));

  RunSpec ft = smallRun(8, 4);
  ft.kind = RunKind::Finetune;
  ft.architecture.clear();
  ft.modelDir = modelDir.string();
  const auto id = ws.add(ft);
  ASSERT_EQ(ws.runToFirstCheckpoint(id), RunStatus::Cancelled);

  fs::remove_all(modelDir);  // the original model folder is gone
  RunResult r = ws.run(id);
  ASSERT_EQ(r.status, RunStatus::Completed) << r.errorText();
  EXPECT_EQ(r.steps, 8);
  EXPECT_TRUE(fs::exists(r.finalModel / "tokenizer.json")) << "every checkpoint carries the tokenizer";
  EXPECT_EQ(seriesValues(ws.store, id, "train/loss").size(), 8u);

  // Running a completed run again changes nothing.
  const auto events = ws.store.listEvents(id).size();
  const auto files = snapshot(ws.runDir(id));
  RunResult third = ws.run(id);
  EXPECT_EQ(third.status, RunStatus::Completed);
  EXPECT_EQ(ws.store.run(id).status, RunStatus::Completed);
  EXPECT_EQ(ws.store.listEvents(id).size(), events);
  EXPECT_EQ(snapshot(ws.runDir(id)), files);
}

TEST(RunIntegrity, KilledWritersPartialsAreRemovedAndPrunedCheckpointsLeaveNoRows) {
  Workspace ws("partials");
  const auto id = ws.add(smallRun(8, 2));
  ASSERT_EQ(ws.runToFirstCheckpoint(id), RunStatus::Cancelled);
  // What a writer killed mid-checkpoint leaves behind.
  const fs::path leftover = ws.runDir(id) / "checkpoints" / "step-00000004.partial-999999";
  fs::create_directories(leftover / "model");
  std::ofstream(leftover / "model" / "model.safetensors") << "half a file";
  ASSERT_EQ(ws.run(id).status, RunStatus::Completed);
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_FALSE(anyPartial(ws.runDir(id)));
  const auto artifacts = ws.store.listArtifacts(id);
  ASSERT_EQ(artifacts.size(), 2u) << "keep = 2: the rows of pruned checkpoints are gone";
  for (const auto& a : artifacts) EXPECT_TRUE(fs::exists(a.path)) << a.path;
}

TEST(RunIntegrity, ATokenizerWithMoreIdsThanTheModelIsRefusedNamingBothFiles) {
  Workspace ws("vocab");
  const auto base = ws.add(smallRun(2, 0));
  RunResult pre = ws.run(base);
  ASSERT_EQ(pre.status, RunStatus::Completed) << pre.errorText();
  // A model with 300 embedding rows next to the 512-id tokenizer.
  const fs::path small = ws.dir / "small-vocab";
  initModel(builtinArchitecture("demo-gqa", 300), small, 1, DType::F32);
  fs::copy_file(pre.finalModel / "tokenizer.json", small / "tokenizer.json");

  RunSpec ft = smallRun(4, 0);
  ft.kind = RunKind::Finetune;
  ft.architecture.clear();
  ft.modelDir = small.string();
  const auto id = ws.add(ft);
  RunResult r = ws.run(id);
  EXPECT_EQ(r.status, RunStatus::Failed);
  for (const std::string& part : {(small / "tokenizer.json").string(), std::string("512 token ids"),
                                  (small / "config.json").string(), std::string("vocab_size 300")}) {
    EXPECT_TRUE(contains(r.errorText(), part)) << part << " not in: " << r.errorText();
  }
  EXPECT_EQ(ws.store.metricCount(id), 0u);

  const fs::path text = ws.dir / "text.txt";
  std::ofstream(text) << "The quick brown fox jumps over the lazy dog.\n";
  EvalOptions eval;
  eval.model = small;
  eval.textFile = text;
  NullProgress quiet;
  CancelToken never;
  try {
    evaluate(eval, quiet, never);
    ADD_FAILURE() << "eval accepted the mismatched tokenizer";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.message(), "vocab_size 300")) << e.message();
    EXPECT_TRUE(contains(e.message(), (small / "tokenizer.json").string())) << e.message();
  }
}

TEST(RunIntegrity, ARunRidesOutAForeignWriteLockLongerThanTheBusyTimeout) {
  Workspace ws("long-lock");
  const auto warm = ws.add(smallRun(2, 0));
  ASSERT_EQ(ws.run(warm).status, RunStatus::Completed);
  const auto id = ws.add(smallRun(40, 0));
  // At the first progress report another connection takes the write lock and
  // holds it for longer than the default busy timeout (5 s).
  std::mutex m;
  std::condition_variable cv;
  bool go = false;
  std::thread holder([&] {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return go; });
    SqliteDb other(ws.dir / "runs.db");
    other.exec("BEGIN IMMEDIATE", "hold the lock");
    std::this_thread::sleep_for(std::chrono::milliseconds(SqliteDb::kBusyTimeoutMs + 1500));
    other.exec("COMMIT", "release the lock");
  });
  JobEnvironment env = ws.env();
  env.lines = [&](const std::string& line) {
    if (contains(line, "\"event\":\"progress\"")) {
      std::lock_guard<std::mutex> lock(m);
      go = true;
      cv.notify_all();
    }
  };
  NullProgress quiet;
  CancelToken never;
  RunResult r = runJob(ws.store, id, env, quiet, never);
  {
    std::lock_guard<std::mutex> lock(m);
    go = true;
    cv.notify_all();
  }
  holder.join();
  ASSERT_EQ(r.status, RunStatus::Completed) << r.errorText();
  EXPECT_EQ(ws.store.run(id).status, RunStatus::Completed);
  EXPECT_EQ(seriesValues(ws.store, id, "train/loss").size(), 40u) << "no metric row is lost";
}

}  // namespace latentlab::test
