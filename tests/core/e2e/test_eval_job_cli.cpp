// Evaluation jobs (run spec kind "eval") through the engine binary: a model
// scored on a task and the passkey grid, every figure in the store under the
// run it evaluates; the same figures as `eval --task`; a job stopped midway
// (cancelled or killed) keeps what it scored, marked partial; a bad spec or task line registers no run.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <chrono>
#include <csignal>
#include <nlohmann/json.hpp>
#include <thread>

#include "data/token_shard.h"
#include "engine_test_util.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"
#include "model/model_test_util.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

const char* kHaystack = "/usr/share/doc/python3.11/html/_sources/tutorial/controlflow.rst.txt";

fs::path textModel() {
  static const fs::path dir = [] {
    const fs::path d = scratchDir("eval-job-model") / "model";
    writeSmallTextModel(d, /*maxPositions=*/512);
    return d;
  }();
  return dir;
}

// `n` items of two or three choices with contexts of varying length.
void writeTask(const fs::path& path, int n) {
  std::ofstream out(path);
  const char* stems[] = {"The for statement", "A list comprehension is a concise way to create lists, and",
                         "Functions are defined with", "Python"};
  for (int i = 0; i < n; ++i) {
    nlohmann::json item = {{"context", std::string(stems[i % 4]) + " (" + std::to_string(i) + ")"},
                           {"choices", i % 3 == 0 ? std::vector<std::string>{" def", " class", " lambda"}
                                                  : std::vector<std::string>{" range", " while loops"}},
                           {"gold", i % 2}};
    out << item.dump() << "\n";
  }
}

RunSpec evalSpec(const fs::path& task) {
  RunSpec s;
  s.name = "eval of the small model";
  s.kind = RunKind::Eval;
  s.modelDir = textModel().string();
  EvalTaskSpec t;
  t.name = "toy";
  t.file = task.string();
  s.evalTasks.push_back(t);
  return s;
}

// A pre-training run of `steps` steps registered in the store at `db` (the
// run an evaluation job stores its figures under).
std::int64_t registerTrainedRun(const fs::path& db, int steps) {
  RunStore store(db);
  RunSpec pre;
  pre.kind = RunKind::Pretrain;
  pre.architecture = "demo-gqa";
  pre.steps = steps;
  return store.createRun(std::nullopt, "a trained run", "pretrain", runSpecToJson(pre), "cpu");
}

std::vector<EvaluationRecord> rowsOf(const fs::path& db, std::int64_t run, const std::string& task) {
  RunStore store(db);
  std::vector<EvaluationRecord> out;
  for (const auto& e : store.listEvaluations(run))
    if (e.task == task) out.push_back(e);
  return out;
}

// The task's rows of `run` once the job has written some (empty after 180 s).
std::vector<EvaluationRecord> waitForRows(const fs::path& db, std::int64_t run) {
  std::vector<EvaluationRecord> rows;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  while (std::chrono::steady_clock::now() < deadline && rows.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (fs::exists(db)) rows = rowsOf(db, run, "toy");
  }
  return rows;
}

// A job cut short: both of the task's rows are there, marked partial, with
// some but not all of the 60,000 items.
void expectPartialRows(const fs::path& db, std::int64_t run) {
  const auto rows = rowsOf(db, run, "toy");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& e : rows) {
    EXPECT_TRUE(e.partial);
    EXPECT_GT(e.items, 0);
    EXPECT_LT(e.items, 60000);
  }
}

}  // namespace

TEST(EvalJob, ScoresTasksAndThePasskeyGridIntoTheStoreUnderTheEvaluatedRun) {
  const fs::path dir = scratchDir("eval-job");
  writeTask(dir / "toy.jsonl", 40);
  const fs::path db = dir / "runs.db";
  const std::int64_t trained = registerTrainedRun(db, 300);  // the step evaluated below is one it has
  RunSpec spec = evalSpec(dir / "toy.jsonl");
  spec.passkey.file = kHaystack;
  spec.passkey.lengths = {128, 256};
  spec.passkey.depths = {0.0, 1.0};
  spec.passkey.trials = 2;
  spec.evaluatesRun = trained;
  spec.evaluatesStep = 300;
  writeFile(dir / "eval.json", runSpecToJson(spec));
  std::string out;
  ASSERT_EQ(runCommand(shellQuote(kEngine) + " run " + shellQuote((dir / "eval.json").string()) + " --db " +
                           shellQuote(db.string()),
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("\"event\":\"eval_task\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"event\":\"progress\""), std::string::npos) << out;
  RunStore store(db);
  const auto runs = store.listRuns();
  ASSERT_EQ(runs.size(), 2u);
  const std::int64_t job = runs[0].id == trained ? runs[1].id : runs[0].id;
  EXPECT_EQ(store.run(job).status, RunStatus::Completed);
  EXPECT_EQ(store.run(job).kind, "eval");
  EXPECT_TRUE(store.listEvaluations(job).empty());  // stored under the evaluated run

  // The task: acc and acc_norm over all 40 items, complete, at the checkpoint's step,
  // equal to the eval verb's figures.
  const auto toy = rowsOf(db, trained, "toy");
  ASSERT_EQ(toy.size(), 2u);
  ASSERT_EQ(runCommand(shellQuote(kEngine) + " eval " + shellQuote(textModel().string()) + " --quiet --json --task " +
                           shellQuote("toy=" + (dir / "toy.jsonl").string()),
                       &out),
            0)
      << out;
  const auto verb = nlohmann::json::parse(out.substr(out.find('{')));
  for (const auto& e : toy) {
    EXPECT_EQ(e.step, 300);
    EXPECT_EQ(e.items, 40);
    EXPECT_FALSE(e.partial);
    EXPECT_DOUBLE_EQ(e.value, verb.at(e.metric).get<double>()) << e.metric;
    EXPECT_DOUBLE_EQ(e.stderrValue, verb.at(e.metric + "_stderr").get<double>()) << e.metric;
  }
  // The passkey grid: one row per cell, each the share of its trials answered.
  const auto cells = rowsOf(db, trained, "passkey");
  ASSERT_EQ(cells.size(), 4u);
  std::set<std::string> names;
  for (const auto& e : cells) {
    names.insert(e.metric);
    EXPECT_EQ(e.items, 2);
    EXPECT_TRUE(e.value == 0.0 || e.value == 0.5 || e.value == 1.0) << e.value;
  }
  EXPECT_EQ(names, (std::set<std::string>{"len=128,depth=0", "len=128,depth=1", "len=256,depth=0", "len=256,depth=1"}));
  const auto summary = nlohmann::json::parse(store.run(job).summaryJson);
  EXPECT_EQ(summary.at("passkey").size(), 4u);
  EXPECT_EQ(summary.at("eval_tasks").at("toy").at("items"), 40);
}

TEST(EvalJob, AStoppedJobKeepsWhatItScoredMarkedPartial) {
  const fs::path dir = scratchDir("eval-job-stop");
  writeTask(dir / "big.jsonl", 60000);
  const fs::path db = dir / "runs.db";
  RunSpec spec = evalSpec(dir / "big.jsonl");
  writeFile(dir / "eval.json", runSpecToJson(spec));
  const pid_t pid = spawnEngine({"run", (dir / "eval.json").string(), "--quiet", "--db", db.string()}, dir / "job.log");
  // Wait for the first partial figures (written every 2 s), then stop the job as the workbench does.
  std::vector<EvaluationRecord> rows = waitForRows(db, 1);
  ASSERT_FALSE(rows.empty()) << "no partial figures were written";
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);  // cancelled
  RunStore store(db);
  EXPECT_EQ(store.integrityCheck(), "ok");
  EXPECT_EQ(store.run(1).status, RunStatus::Cancelled);
  expectPartialRows(db, 1);

  // Killed outright (SIGKILL): the figures last written stay, marked partial,
  // and the run is left running with a dead lease (shown crashed).
  const pid_t victim =
      spawnEngine({"run", (dir / "eval.json").string(), "--quiet", "--db", db.string()}, dir / "killed.log");
  std::vector<EvaluationRecord> killedRows = waitForRows(db, 2);
  ASSERT_FALSE(killedRows.empty()) << "no partial figures were written";
  ::kill(victim, SIGKILL);
  ::waitpid(victim, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  RunStore after(db);
  EXPECT_EQ(after.integrityCheck(), "ok");
  EXPECT_EQ(after.run(2).status, RunStatus::Running);
  expectPartialRows(db, 2);
}

TEST(EvalJob, BadSpecsAndTaskFilesRegisterNoRun) {
  const fs::path dir = scratchDir("eval-job-bad");
  const fs::path db = dir / "runs.db";
  std::ofstream(dir / "bad.jsonl")
      << "{\"context\": \"a\", \"choices\": [\" b\", \" c\"], \"gold\": 0}\n{\"context\": 1}\n";
  std::string out;
  auto runSpec = [&](const RunSpec& s) {
    writeFile(dir / "spec.json", runSpecToJson(s));
    return runCommand(shellQuote(kEngine) + " run " + shellQuote((dir / "spec.json").string()) + " --quiet --db " +
                          shellQuote(db.string()),
                      &out);
  };
  RunSpec noTasks = evalSpec(dir / "bad.jsonl");
  noTasks.evalTasks.clear();
  EXPECT_EQ(runSpec(noTasks), 1);
  EXPECT_NE(out.find("eval_tasks"), std::string::npos) << out;
  RunSpec missing = evalSpec(dir / "absent.jsonl");
  EXPECT_EQ(runSpec(missing), 1);
  EXPECT_NE(out.find("absent.jsonl"), std::string::npos) << out;
  RunSpec depth = evalSpec(dir / "bad.jsonl");
  depth.passkey.file = kHaystack;
  depth.passkey.depths = {0.5, 1.5};
  EXPECT_EQ(runSpec(depth), 1);
  EXPECT_NE(out.find("passkey.depths"), std::string::npos) << out;
  // A malformed line names the file and the line.
  EXPECT_EQ(runSpec(evalSpec(dir / "bad.jsonl")), 1);
  EXPECT_NE(out.find("bad.jsonl:2"), std::string::npos) << out;
  // Found before registration: a run that is not there, a passkey length past
  // the 512-token context, more trials than any cell takes.
  std::ofstream(dir / "good.jsonl") << "{\"context\": \"a\", \"choices\": [\" b\", \" c\"], \"gold\": 0}\n";
  RunSpec absentRun = evalSpec(dir / "good.jsonl");
  absentRun.evaluatesRun = 999;
  EXPECT_EQ(runSpec(absentRun), 1);
  EXPECT_NE(out.find("evaluates.run 999"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(db)) << "a refused spec creates no database";
  RunSpec tooLong = evalSpec(dir / "good.jsonl");
  tooLong.passkey.file = kHaystack;
  tooLong.passkey.lengths = {256, 600};
  EXPECT_EQ(runSpec(tooLong), 1);
  EXPECT_NE(out.find("passkey.lengths[1]"), std::string::npos) << out;
  RunSpec manyTrials = evalSpec(dir / "good.jsonl");
  manyTrials.passkey.file = kHaystack;
  manyTrials.passkey.trials = 10000000;
  EXPECT_EQ(runSpec(manyTrials), 1);
  EXPECT_NE(out.find("passkey.trials"), std::string::npos) << out;
  RunStore store(db, StoreOpen::CreateIfMissing);
  EXPECT_TRUE(store.listRuns().empty());
  // Scores go under a step the evaluated run has.
  RunSpec trained;
  trained.architecture = "demo-gqa";
  trained.steps = 12;
  const std::int64_t target = store.createRun(std::nullopt, "trained", trained.kind, runSpecToJson(trained), "cpu");
  RunSpec pastTheEnd = evalSpec(dir / "good.jsonl");
  pastTheEnd.evaluatesRun = target;
  pastTheEnd.evaluatesStep = 999999;
  EXPECT_EQ(runSpec(pastTheEnd), 1);
  EXPECT_NE(out.find("evaluates.step 999999 is not a step of run"), std::string::npos) << out;
  EXPECT_EQ(store.listRuns().size(), 1u);
  // run --check judges a training run's out_dir as registration does.
  RunSpec rooted = trained;
  rooted.outDir = "/";
  writeFile(dir / "spec.json", runSpecToJson(rooted));
  EXPECT_EQ(runCommand(shellQuote(kEngine) + " run " + shellQuote((dir / "spec.json").string()) + " --check", &out), 1)
      << out;
  EXPECT_NE(out.find("out_dir"), std::string::npos) << out;
  // run --check plans an eval job as inference.
  writeFile(dir / "spec.json", runSpecToJson(evalSpec(dir / "good.jsonl")));
  EXPECT_EQ(runCommand(shellQuote(kEngine) + " run " + shellQuote((dir / "spec.json").string()) + " --check", &out), 0)
      << out;
  EXPECT_NE(out.find("inference"), std::string::npos) << out;
  EXPECT_EQ(out.find("optimizer"), std::string::npos) << out;
  EXPECT_EQ(out.find("micro"), std::string::npos) << out;  // no training words for an inference plan
}

// Held-out loss over several caches in one job, of a run's newest checkpoint
// found when the job starts: one "held-out" row per cache under that run at
// that checkpoint's step, each equal to `eval --text` with the same cache.
// The validation tail of a corpus is the other text a job can read.
TEST(EvalJob, HeldOutLossOverSeveralCachesOfARunsNewestCheckpoint) {
  const fs::path dir = scratchDir("eval-job-held-out");
  const fs::path db = dir / "runs.db";
  const std::int64_t trained = registerTrainedRun(db, 100);
  {
    RunStore store(db);
    // An older checkpoint whose folder is gone: choosing it would fail the job.
    store.addArtifact(trained, "checkpoint", (dir / "gone").string(), 10, 0);
    store.addArtifact(trained, "checkpoint", textModel().parent_path().string(), 20, 0);  // a checkpoint's model/
  }
  RunSpec spec;
  spec.name = "held-out over three caches";
  spec.kind = RunKind::Eval;
  spec.evaluatesRun = trained;
  spec.heldOut.text = kHaystack;
  spec.heldOut.seqLen = 128;
  spec.heldOut.maxTokens = 600;
  spec.heldOut.chunk = 32;
  for (const int bits : {0, 8, 4}) spec.kvCaches.push_back(KvQuantSettings{bits, 16, 32});
  writeFile(dir / "eval.json", runSpecToJson(spec));
  std::string out;
  ASSERT_EQ(runCommand(shellQuote(kEngine) + " run " + shellQuote((dir / "eval.json").string()) + " --quiet --db " +
                           shellQuote(db.string()),
                       &out),
            0)
      << out;
  RunStore store(db);
  const auto rows = store.listEvaluations(trained);
  ASSERT_EQ(rows.size(), 3u);
  std::map<std::string, double> loss;
  for (const auto& e : rows) {
    EXPECT_EQ(e.step, 20);
    EXPECT_EQ(e.metric, "loss");
    EXPECT_EQ(e.items, 600);
    EXPECT_FALSE(e.partial);
    loss[e.task] = e.value;
  }
  const std::map<std::string, std::string> flags = {
      {"held-out", ""},
      {"held-out (int8 cache, group 16, window 32)", " --kv-quant int8 --kv-group 16 --kv-residual 32 --kv-chunk 32"},
      {"held-out (int4 cache, group 16, window 32)", " --kv-quant int4 --kv-group 16 --kv-residual 32 --kv-chunk 32"}};
  for (const auto& [task, extra] : flags) {
    ASSERT_TRUE(loss.count(task)) << task;
    ASSERT_EQ(runCommand(shellQuote(kEngine) + " eval " + shellQuote(textModel().string()) + " --quiet --json --text " +
                             shellQuote(kHaystack) + " --seq-len 128 --max-tokens 600" + extra,
                         &out),
              0)
        << out;
    EXPECT_DOUBLE_EQ(loss[task], nlohmann::json::parse(out.substr(out.find('{'))).at("loss").get<double>()) << task;
  }
  EXPECT_NE(loss["held-out"], loss["held-out (int4 cache, group 16, window 32)"]);
  const std::int64_t job =
      store.listRuns().front().id == trained ? store.listRuns().back().id : store.listRuns().front().id;
  const auto summary = nlohmann::json::parse(store.run(job).summaryJson);
  EXPECT_EQ(summary.at("evaluates").at("step"), 20);
  EXPECT_EQ(summary.at("model"), textModel().string());
  EXPECT_EQ(summary.at("kv_caches").size(), 3u);

  // The validation tail of a corpus (the tutorial folder), tokenized with the model's tokenizer.
  RunSpec val;
  val.name = "held-out on the validation tail";
  val.kind = RunKind::Eval;
  val.modelDir = textModel().string();
  val.data.corpus = fs::path(kHaystack).parent_path().string();
  val.data.validationShare = 0.05;
  val.heldOut.text = "validation";
  val.heldOut.seqLen = 256;
  writeFile(dir / "val.json", runSpecToJson(val));
  ASSERT_EQ(runCommand(shellQuote(kEngine) + " run " + shellQuote((dir / "val.json").string()) + " --quiet --db " +
                           shellQuote(db.string()),
                       &out),
            0)
      << out;
  std::int64_t valJob = 0;
  for (const auto& r : store.listRuns())
    if (r.name == val.name) valJob = r.id;
  const auto tail = store.listEvaluations(valJob);
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].task, "held-out");
  EXPECT_TRUE(std::isfinite(tail[0].value));
  // Every token of the tail after its first is predicted once: 5% of the corpus's tokens.
  std::uint64_t corpusTokens = 0;
  for (const auto& f : fs::directory_iterator(dir / "cache"))
    if (f.path().filename().string().rfind("tokens-", 0) == 0) corpusTokens = TokenShard::open(f.path()).size();
  ASSERT_GT(corpusTokens, 0u);
  EXPECT_EQ(tail[0].items, static_cast<std::int64_t>(std::floor(corpusTokens * 0.05)) - 1);

  // A run with no checkpoint: refused, naming the run.
  RunSpec none = spec;
  {
    RunStore s(db);
    none.evaluatesRun = s.createRun(std::nullopt, "never saved", "pretrain", runSpecToJson(RunSpec{}), "cpu");
  }
  writeFile(dir / "none.json", runSpecToJson(none));
  EXPECT_NE(runCommand(shellQuote(kEngine) + " run " + shellQuote((dir / "none.json").string()) + " --quiet --db " +
                           shellQuote(db.string()),
                       &out),
            0);
  EXPECT_NE(out.find("('never saved') has no checkpoint to evaluate"), std::string::npos) << out;
}

// Stopped and resumed, and stopped again sooner: the stored partial figures
// never shrink (the earlier, larger partial stays until more items are scored).
TEST(EvalJob, AResumedJobNeverShrinksItsStoredPartial) {
  const fs::path dir = scratchDir("eval-job-resume");
  writeTask(dir / "big.jsonl", 60000);
  const fs::path db = dir / "runs.db";
  writeFile(dir / "eval.json", runSpecToJson(evalSpec(dir / "big.jsonl")));
  const pid_t first = spawnEngine({"run", (dir / "eval.json").string(), "--quiet", "--db", db.string()}, dir / "a.log");
  std::vector<EvaluationRecord> rows = waitForRows(db, 1);
  ASSERT_FALSE(rows.empty());
  // Let it score some more (two more writes), then stop it.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  ::kill(first, SIGTERM);
  int status = 0;
  ::waitpid(first, &status, 0);
  const std::int64_t before = rowsOf(db, 1, "toy").at(0).items;
  ASSERT_GT(before, 0);
  // The same run again, stopped at its first write.
  const pid_t second = spawnEngine({"run", "--db", db.string(), "--run", "1", "--quiet"}, dir / "b.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ::kill(second, SIGTERM);
  ::waitpid(second, &status, 0);
  for (const auto& e : rowsOf(db, 1, "toy")) {
    EXPECT_GE(e.items, before) << e.metric << ": a smaller partial replaced a larger one";
    EXPECT_TRUE(e.partial);
  }
}

}  // namespace latentlab::test
