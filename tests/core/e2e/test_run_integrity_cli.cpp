// The engine binary keeps runs whole: one engine per run (a second refuses,
// naming the first; a killed one's lease is taken over and `runs list` calls
// its run crashed meanwhile), numbers are never truncated or wrapped, a spec
// that cannot run writes nothing, readers never create databases, and a full
// disk is an error message, not an abort.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include "../train/train_test_util.h"
#include "engine_test_util.h"
#include "latentlab/run_store.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {
bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string engine(const std::string& args) {
  return shellQuote(kEngine) + " " + args;
}

// Waits until run `id` has a train/loss row at step >= `step`.
bool waitForStep(const fs::path& db, std::int64_t id, std::int64_t step) {
  RunStore store(db);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    auto last = store.lastStep(id, "train/loss");
    if (last && *last >= step) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int waitExit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}
}  // namespace

TEST(RunIntegrityCli, OneEngineAtATimeAndAKilledEnginesLeaseIsTakenOver) {
  fs::path dir = scratchDir("two-engines");
  RunSpec spec = tinyPretrainSpec(100000);
  spec.data.validationShare = 0.0;
  writeFile(dir / "spec.json", runSpecToJson(spec));
  const fs::path db = dir / "runs.db";
  std::string out;
  ASSERT_EQ(runCommand(engine("runs list --db " + shellQuote(db.string())), &out), 1);  // no database yet
  pid_t first = spawnEngine({"run", (dir / "spec.json").string(), "--quiet", "--db", db.string()}, dir / "first.log");
  ASSERT_TRUE(waitForStep(db, 1, 5));

  // A second engine on the same run is refused and changes nothing.
  ASSERT_EQ(runCommand(engine("run --quiet --db " + shellQuote(db.string()) + " --run 1"), &out), 1) << out;
  EXPECT_TRUE(contains(out, "already being run by engine pid " + std::to_string(first))) << out;
  EXPECT_TRUE(contains(out, "error: run 1 not started:")) << out;  // refused, not failed
  EXPECT_FALSE(contains(out, "run 1 failed")) << out;
  {
    RunStore store(db);
    EXPECT_EQ(store.run(1).pid, static_cast<std::int64_t>(first));
    EXPECT_EQ(store.run(1).status, RunStatus::Running);
    for (const auto& e : store.listEvents(1)) EXPECT_NE(e.kind, "resume");
  }
  ASSERT_EQ(runCommand(engine("runs list --db " + shellQuote(db.string())), &out), 0) << out;
  EXPECT_TRUE(contains(out, "running")) << out;

  // kill -9: the CLI derives "crashed" from the dead lease, as the GUI does.
  ::kill(first, SIGKILL);
  EXPECT_EQ(waitExit(first), -SIGKILL);
  ASSERT_EQ(runCommand(engine("runs list --db " + shellQuote(db.string())), &out), 0) << out;
  EXPECT_TRUE(contains(out, "crashed")) << out;
  EXPECT_FALSE(contains(out, "running")) << out;
  ASSERT_EQ(runCommand(engine("runs show 1 --db " + shellQuote(db.string())), &out), 0) << out;
  EXPECT_TRUE(contains(out, "\"status\": \"crashed\"")) << out;
  EXPECT_TRUE(contains(out, "is not running")) << out;
  EXPECT_TRUE(contains(out, "\"journal\": \"wal\"")) << out;  // a local disk

  // A new engine takes the stale lease over, records it, and resumes.
  pid_t third = spawnEngine({"run", "--db", db.string(), "--run", "1"}, dir / "third.log");
  std::int64_t before = 0;
  {
    RunStore store(db);
    before = store.lastStep(1, "train/loss").value_or(0);
  }
  ASSERT_TRUE(waitForStep(db, 1, before + 3));
  ::kill(third, SIGTERM);  // cancel: checkpoint and exit 2
  EXPECT_EQ(waitExit(third), 2);
  RunStore store(db);
  bool takeover = false;
  for (const auto& e : store.listEvents(1)) takeover |= e.kind == "lease" && contains(e.message, std::to_string(first));
  EXPECT_TRUE(takeover);
  EXPECT_EQ(store.run(1).status, RunStatus::Cancelled);
  EXPECT_FALSE(store.run(1).pid.has_value());
  EXPECT_EQ(store.integrityCheck(), "ok");
}

TEST(RunIntegrityCli, NumbersAreRangeCheckedNeverTruncated) {
  fs::path dir = scratchDir("numbers");
  std::string out;
  ASSERT_EQ(runCommand(engine("init --arch demo-gqa --out " + shellQuote((dir / "m").string())), &out), 0) << out;
  const std::string m = shellQuote((dir / "m").string());
  struct Case {
    std::string args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"eval " + m + " --tokens x.u16 --seq-len 4294967297", "--seq-len is out of range: 4294967297"},
      {"eval " + m + " --tokens x.u16 --seq-len 12abc", "--seq-len must be a whole number"},
      {"convert --model " + m + " --out " + shellQuote((dir / "c").string()) + " --dkv 4294967304",
       "--dkv is out of range: 4294967304"},
      {"inspect " + m + " --tp 4294967297", "--tp is out of range: 4294967297"},
      {"init --arch demo-gqa --out " + shellQuote((dir / "v0").string()) + " --vocab 0", "--vocab is out of range: 0"},
      {"init --arch demo-gqa --out " + shellQuote((dir / "v5").string()) + " --vocab -5",
       "--vocab is out of range: -5"},
      {"init --arch demo-gqa --out " + shellQuote((dir / "s").string()) + " --seed -1", "--seed is out of range: -1"},
      {"runs show 1x --db " + shellQuote((dir / "none.db").string()), "no such workspace database"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(runCommand(engine(c.args), &out), 1) << c.args << "\n" << out;
    EXPECT_TRUE(contains(out, c.expect)) << c.args << "\n" << out;
  }
  EXPECT_FALSE(fs::exists(dir / "c"));
  EXPECT_FALSE(fs::exists(dir / "v0"));
  EXPECT_FALSE(fs::exists(dir / "v5"));
  EXPECT_FALSE(fs::exists(dir / "none.db"));

  // Spec fields: a seed of -1 is no uint64, 1e999 is no double; the file is named.
  writeFile(dir / "seed.json", R"({"kind":"pretrain","architecture":"demo-gqa","seed":-1})");
  EXPECT_EQ(runCommand(engine("run " + shellQuote((dir / "seed.json").string()) + " --db " +
                              shellQuote((dir / "runs.db").string())),
                       &out),
            1);
  EXPECT_TRUE(contains(out, "seed.json")) << out;
  EXPECT_TRUE(contains(out, "seed must be an integer from 0 to 18446744073709551615")) << out;
  writeFile(dir / "lr.json", R"({"kind":"pretrain","architecture":"demo-gqa","optimizer":{"lr":1e999}})");
  EXPECT_EQ(runCommand(engine("run " + shellQuote((dir / "lr.json").string()) + " --db " +
                              shellQuote((dir / "runs.db").string())),
                       &out),
            1);
  EXPECT_TRUE(contains(out, "lr.json: invalid JSON")) << out;
  writeFile(dir / "steps.json", R"({"kind":"pretrain","architecture":"demo-gqa","steps":4294967297})");
  EXPECT_EQ(runCommand(engine("run " + shellQuote((dir / "steps.json").string()) + " --db " +
                              shellQuote((dir / "runs.db").string())),
                       &out),
            1);
  EXPECT_TRUE(contains(out, "steps must be an integer from")) << out;
  EXPECT_FALSE(fs::exists(dir / "runs.db")) << "no spec that failed validation touched the database";
}

TEST(RunIntegrityCli, ASpecThatCannotRunWritesNothing) {
  fs::path dir = scratchDir("preflight");
  std::string out;
  ASSERT_EQ(runCommand(engine("init --arch demo-gqa --out " + shellQuote((dir / "m").string())), &out), 0) << out;
  const fs::path db = dir / "ws" / "runs.db";
  struct Case {
    std::string spec;
    std::vector<std::string> expect;
  };
  const std::string corpus = tinyPretrainSpec(1).data.corpus;
  const std::vector<Case> cases = {
      {R"({"kind":"finetune","model_dir":")" + (dir / "gone").string() + R"(","data":{"corpus":")" + corpus + R"("}})",
       {"model_dir", "gone", "is not a folder"}},
      {R"({"kind":"convert-finetune","model_dir":")" + (dir / "m").string() +
           R"(","conversion":{"d_kv":100000},"data":{"corpus":")" + corpus + R"("}})",
       {"conversion", "d_kv = 100000"}},
      {R"({"kind":"pretrain","architecture":"gpt-5"})", {"architecture", "gpt-5", "not a built-in architecture"}},
      {R"({"kind":"pretrain","architecture":"demo-gqa","data":{"corpus":")" + (dir / "no-corpus").string() + R"("}})",
       {"data.corpus", "does not exist"}},
  };
  int k = 0;
  for (const auto& c : cases) {
    const fs::path spec = dir / ("spec" + std::to_string(k++) + ".json");
    writeFile(spec, c.spec);
    EXPECT_EQ(runCommand(engine("run " + shellQuote(spec.string()) + " --db " + shellQuote(db.string())), &out), 1)
        << c.spec << "\n"
        << out;
    for (const auto& e : c.expect) EXPECT_TRUE(contains(out, e)) << e << " not in: " << out;
    EXPECT_TRUE(contains(out, spec.string())) << out;
  }
  EXPECT_FALSE(fs::exists(dir / "ws")) << "validation happens before the database is created";
}

TEST(RunIntegrityCli, AFullDiskIsAnErrorNotAnAbort) {
  fs::path dir = scratchDir("full-disk-cli");
  RunSpec spec = tinyPretrainSpec(4);
  writeFile(dir / "spec.json", runSpecToJson(spec));
  const fs::path db = dir / "runs.db";
  std::string out;
  // Room for the caches and the run folder's first files, not for a checkpoint.
  ASSERT_EQ(runCommand("LATENTLAB_FAULT_DISK_BYTES=200000 " +
                           engine("run --quiet " + shellQuote((dir / "spec.json").string()) + " --db " +
                                  shellQuote(db.string())),
                       &out),
            1)
      << out;
  EXPECT_TRUE(contains(out, "disk full")) << out;
  EXPECT_FALSE(contains(out, "terminate")) << out;
  RunStore store(db);
  const RunRecord r = store.run(1);
  EXPECT_EQ(r.status, RunStatus::Failed);
  EXPECT_TRUE(contains(r.error, "disk full")) << r.error;
  EXPECT_FALSE(r.pid.has_value());
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    EXPECT_FALSE(contains(e.path().string(), ".partial-")) << e.path();
  }
}

}  // namespace latentlab::test

namespace latentlab::test {

// The store on a filesystem that is read-only or full, and a damaged file:
// the reading verbs work read-only, a full disk is named a full disk, a
// damaged page is warned about. (A tmpfs is mounted where that is permitted.)
TEST(RunIntegrityCli, ReadOnlyFullAndDamagedStoresAreSaidAsSuch) {
  const fs::path dir = scratchDir("store-media");
  const fs::path mnt = dir / "media";
  fs::create_directories(mnt);
  if (std::system(("mount -t tmpfs -o size=1m tmpfs '" + mnt.string() + "' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "mounting a tmpfs is not permitted here";
  }
  const fs::path db = mnt / "runs.db";
  std::int64_t id = 0;
  {
    RunStore store(db);
    id = store.createRun(std::nullopt, "r", "pretrain", "{}", "cpu");
    auto w = store.metricWriter(id);
    for (int s = 0; s < 100; ++s) w.add("train/loss", s, s, s, 1.0);
    w.flush();
  }
  std::string out;
  // Full: metric rows until the 1 MiB filesystem has no room left.
  {
    RunStore store(db);
    auto w = store.metricWriter(id);
    std::string message;
    try {
      for (int s = 100; s < 2000000; ++s) {
        w.add("train/loss", s, s, s, 1.0);
        if (s % 5000 == 0) w.flush();
      }
    } catch (const Error& e) {
      message = e.message();
    }
    EXPECT_NE(message.find("full"), std::string::npos) << message;
    EXPECT_EQ(message.find("disk I/O error"), std::string::npos) << message;
  }
  // Read-only: list and show still answer.
  ASSERT_EQ(std::system(("mount -o remount,ro '" + mnt.string() + "'").c_str()), 0);
  EXPECT_EQ(runCommand(engine("runs list --db " + shellQuote(db.string())), &out), 0) << out;
  EXPECT_TRUE(contains(out, " r")) << out;
  EXPECT_EQ(runCommand(engine("runs show " + std::to_string(id) + " --db " + shellQuote(db.string())), &out), 0) << out;
  std::system(("umount '" + mnt.string() + "'").c_str());
  // Damaged: a page of a copy overwritten; the listing warns.
  const fs::path damaged = dir / "damaged.db";
  {
    RunStore store(damaged);
    const auto r = store.createRun(std::nullopt, "d", "pretrain", "{}", "cpu");
    auto w = store.metricWriter(r);
    for (int s = 0; s < 20000; ++s) w.add("train/loss", s, s, s, 1.0);
    w.flush();
  }
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 * 5);
    const std::string junk(4096, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  runCommand(engine("runs list --db " + shellQuote(damaged.string())), &out);
  EXPECT_TRUE(contains(out, "is damaged")) << out;
}

}  // namespace latentlab::test
