// The trainer on real text: loss falls, resume reproduces the uninterrupted
// run bit for bit, NaN fails the run naming the step, grad accumulation is
// exact.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include <cmath>

#include "latentlab/error.h"
#include "latentlab/train.h"
#include "model/llama.h"
#include "model/weights.h"
#include "test_support.h"
#include "train/model_builder.h"
#include "train_test_util.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

struct Workspace {
  fs::path dir;
  RunStore store;
  explicit Workspace(const std::string& name) : dir(scratchDir(name)), store(dir / "runs.db") {}
  JobEnvironment env() const {
    JobEnvironment e;
    e.workspace = dir;
    return e;
  }
};

}  // namespace

TEST(Trainer, LossFallsOnRealText) {
  Workspace ws("loss-falls");
  RunSpec spec = tinyPretrainSpec(60);
  auto id = ws.store.createRun(std::nullopt, "tiny", spec.kind, runSpecToJson(spec), "cpu");
  NullProgress progress;
  CancelToken cancel;
  RunResult r = runJob(ws.store, id, ws.env(), progress, cancel);
  ASSERT_EQ(r.status, RunStatus::Completed) << r.errorText();
  auto loss = seriesValues(ws.store, id, "train/loss");
  ASSERT_EQ(loss.size(), 60u);
  double first = (loss[0] + loss[1] + loss[2]) / 3, last = (loss[57] + loss[58] + loss[59]) / 3;
  EXPECT_GT(first, 5.5);  // ~ln(512) = 6.24 at init
  EXPECT_LT(last, first - 0.8) << "first " << first << " last " << last;
  EXPECT_EQ(ws.store.run(id).status, RunStatus::Completed);
  ASSERT_TRUE(r.finalValLoss.has_value());
  EXPECT_EQ(seriesValues(ws.store, id, "lr").size(), 60u);
  EXPECT_EQ(seriesValues(ws.store, id, "grad_norm").size(), 60u);
  EXPECT_TRUE(fs::exists(r.finalModel / "model.safetensors"));
}

// Resume is exact for every precision: bf16-weight runs save their fp32
// masters, so the resumed run continues from the same master weights and
// AdamW state and its losses equal the uninterrupted run's bit for bit; and
// with ZeRO, whose checkpoint holds optimizer-rank*.pt shards instead.
TEST(Trainer, CancelThenResumeEqualsTheUninterruptedRun) {
  for (const auto& [precision, zeroStage] : {std::pair{"fp32", 0}, {"bf16", 0}, {"fp32", 2}}) {
    SCOPED_TRACE(std::string(precision) + " zero " + std::to_string(zeroStage));
    Workspace ws(std::string("resume-") + precision + std::to_string(zeroStage));
    RunSpec spec = tinyPretrainSpec(16);
    spec.precision = parseChoice<Precision>(precision, "test precision");
    spec.zeroStage = zeroStage;
    spec.data.validationShare = 0.0;
    NullProgress quiet;
    CancelToken never;
    auto full = ws.store.createRun(std::nullopt, "full", spec.kind, runSpecToJson(spec), "cpu");
    ASSERT_EQ(runJob(ws.store, full, ws.env(), quiet, never).status, RunStatus::Completed);

    auto split = ws.store.createRun(std::nullopt, "split", spec.kind, runSpecToJson(spec), "cpu");
    CancelToken cancel;
    // The trainer reports progress at step 1 and then at most every 200 ms, so
    // a later step is only seen when steps are slow: cancel at the first report.
    CancelAtStep stopper(cancel, 1);
    RunResult first = runJob(ws.store, split, ws.env(), stopper, cancel);
    ASSERT_EQ(first.status, RunStatus::Cancelled);
    EXPECT_EQ(ws.store.run(split).status, RunStatus::Cancelled);
    EXPECT_LT(first.steps, 16);
    EXPECT_GE(first.steps, 1);
    EXPECT_FALSE(first.lastCheckpoint.empty());
    EXPECT_EQ(fs::exists(first.lastCheckpoint / "optimizer-rank0.pt"), zeroStage > 0);
    ws.store.setStatus(split, RunStatus::Queued);
    RunResult second = runJob(ws.store, split, ws.env(), quiet, never);
    ASSERT_EQ(second.status, RunStatus::Completed) << second.errorText();
    auto a = seriesValues(ws.store, full, "train/loss");
    auto b = seriesValues(ws.store, split, "train/loss");
    ASSERT_EQ(a.size(), 16u);
    ASSERT_EQ(b.size(), 16u);
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;  // bit-identical on CPU
  }
}

// A run the memory plan says cannot fit fails before anything is built or
// tokenized, with the plan's numbers; the workspace gets no run folder.
TEST(Trainer, ARunThatCannotFitFailsBeforeLoading) {
  Workspace ws("nofit");
  RunSpec spec = tinyPretrainSpec(5);
  spec.architecture = "llama-2-7b";
  spec.microBatch = 64;
  spec.data.seqLen = 4096;
  auto id = ws.store.createRun(std::nullopt, "7b", spec.kind, runSpecToJson(spec), "cpu");
  NullProgress progress;
  CancelToken cancel;
  RunResult r = runJob(ws.store, id, ws.env(), progress, cancel);
  EXPECT_EQ(r.status, RunStatus::Failed);
  EXPECT_NE(r.errorText().find("does not fit cpu"), std::string::npos) << r.errorText();
  EXPECT_NE(r.errorText().find("activations"), std::string::npos) << r.errorText();
  EXPECT_EQ(ws.store.run(id).status, RunStatus::Failed);
  EXPECT_FALSE(fs::exists(ws.dir / "runs" / std::to_string(id))) << "nothing was loaded or written";
  EXPECT_FALSE(fs::exists(ws.dir / "cache")) << "nothing was tokenized";
}

// ZeRO through the trainer's own run on one rank: the sharded optimiser
// trains as the plain one (fp32 and bf16 weights), and its checkpoints carry
// optimizer-rank*.pt shards instead of optimizer.pt (resume: above).
TEST(Trainer, ZeroStagesTrainAsThePlainOptimizer) {
  Workspace ws("zero");
  NullProgress quiet;
  CancelToken never;
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    std::vector<std::vector<double>> losses;
    for (int stage : {0, 1, 2}) {
      RunSpec spec = tinyPretrainSpec(12);
      spec.precision = parseChoice<Precision>(precision, "test precision");
      spec.zeroStage = stage;
      spec.optimizer.weightDecay = 0.1;
      auto id = ws.store.createRun(std::nullopt, "zero" + std::to_string(stage), spec.kind, runSpecToJson(spec), "cpu");
      RunResult r = runJob(ws.store, id, ws.env(), quiet, never);
      ASSERT_EQ(r.status, RunStatus::Completed) << r.errorText();
      losses.push_back(seriesValues(ws.store, id, "train/loss"));
      const fs::path ckpt = r.lastCheckpoint;
      EXPECT_EQ(fs::exists(ckpt / "optimizer.pt"), stage == 0) << ckpt;
      EXPECT_EQ(fs::exists(ckpt / "optimizer-rank0.pt"), stage > 0) << ckpt;
      if (stage > 0) {
        const auto summary = nlohmann::json::parse(ws.store.run(id).summaryJson);
        EXPECT_EQ(summary.at("zero").at("stage"), stage);
      }
    }
    // fp32: float reassociation only. bf16: the masters agree as closely, but
    // a master within that distance of a bf16 rounding boundary rounds the
    // other way (bf16 resolves 1 part in 256), so the losses agree to 2e-3.
    const double tolerance = std::string(precision) == "fp32" ? 1e-5 : 2e-3;
    for (int stage : {1, 2}) {
      ASSERT_EQ(losses[static_cast<std::size_t>(stage)].size(), 12u);
      for (std::size_t i = 0; i < 12; ++i)
        EXPECT_NEAR(losses[static_cast<std::size_t>(stage)][i], losses[0][i], tolerance)
            << "stage " << stage << " step " << i + 1;
    }
  }
}

TEST(Trainer, NonFiniteLossFailsTheRunNamingTheStep) {
  Workspace ws("nan");
  RunSpec spec = tinyPretrainSpec(5);
  spec.initStd = 1e30;  // overflows the logits
  auto id = ws.store.createRun(std::nullopt, "nan", spec.kind, runSpecToJson(spec), "cpu");
  NullProgress progress;
  CancelToken cancel;
  RunResult r = runJob(ws.store, id, ws.env(), progress, cancel);
  EXPECT_EQ(r.status, RunStatus::Failed);
  RunRecord rec = ws.store.run(id);
  EXPECT_EQ(rec.status, RunStatus::Failed);
  EXPECT_NE(rec.error.find("non-finite"), std::string::npos) << rec.error;
  EXPECT_NE(rec.error.find("step 1"), std::string::npos) << rec.error;
  EXPECT_NE(rec.error.find("last good checkpoint"), std::string::npos) << rec.error;
}

// A run with activation recompute trains exactly as one without: the same
// loss at every step through the trainer's own run.
TEST(Trainer, RecomputeTrainsExactlyAsKeepingActivations) {
  Workspace ws("recompute");
  std::vector<std::vector<double>> losses;
  for (bool recompute : {false, true}) {
    RunSpec spec = tinyPretrainSpec(12);
    spec.recompute = recompute;
    auto id = ws.store.createRun(std::nullopt, recompute ? "recompute" : "kept", spec.kind, runSpecToJson(spec), "cpu");
    NullProgress progress;
    CancelToken cancel;
    RunResult r = runJob(ws.store, id, ws.env(), progress, cancel);
    ASSERT_EQ(r.status, RunStatus::Completed) << r.errorText();
    losses.push_back(seriesValues(ws.store, id, "train/loss"));
  }
  ASSERT_EQ(losses[0].size(), 12u);
  for (std::size_t i = 0; i < losses[0].size(); ++i) EXPECT_NEAR(losses[0][i], losses[1][i], 1e-6) << "step " << i + 1;
}

// Both bf16 paths through the trainer's own run on CPU: bf16-mixed (fp32
// weights, bf16 autocast) and bf16 (bf16 weights and gradients, fp32 masters
// in the optimiser). Over 50 steps on real text the loss falls and tracks the
// fp32 run's: the mean of the last five steps within 0.15 nats (each run's
// loss falls by about 0.8 over those steps); validation runs under the
// same precision and stays as close. The bf16 run's checkpoint holds the fp32
// masters, not the rounded weights.
TEST(Trainer, Bf16RunsTrackTheFp32Run) {
  Workspace ws("bf16");
  std::vector<std::vector<double>> train, val;
  std::vector<fs::path> models;
  for (const char* precision : {"fp32", "bf16-mixed", "bf16"}) {
    RunSpec spec = tinyPretrainSpec(50);
    spec.precision = parseChoice<Precision>(precision, "test precision");
    spec.evalEvery = 25;
    auto id = ws.store.createRun(std::nullopt, precision, spec.kind, runSpecToJson(spec), "cpu");
    NullProgress progress;
    CancelToken cancel;
    RunResult r = runJob(ws.store, id, ws.env(), progress, cancel);
    ASSERT_EQ(r.status, RunStatus::Completed) << precision << ": " << r.errorText();
    train.push_back(seriesValues(ws.store, id, "train/loss"));
    val.push_back(seriesValues(ws.store, id, "val/loss"));
    models.push_back(r.finalModel);
  }
  auto tail = [](const std::vector<double>& v) { return (v[45] + v[46] + v[47] + v[48] + v[49]) / 5; };
  for (std::size_t k = 1; k < train.size(); ++k) {
    SCOPED_TRACE(k == 1 ? "bf16-mixed" : "bf16");
    ASSERT_EQ(train[k].size(), 50u);
    EXPECT_LT(tail(train[k]), (train[k][0] + train[k][1]) / 2 - 0.5) << "the loss falls";
    EXPECT_NEAR(tail(train[k]), tail(train[0]), 0.15) << "tracks fp32 (mean of the last five steps)";
    EXPECT_NE(train[k], train[0]) << "the precision took effect";
    ASSERT_EQ(val[k].size(), val[0].size());
    ASSERT_GE(val[k].size(), 2u);
    EXPECT_NEAR(val[k].back(), val[0].back(), 0.15);
  }
  // fp32 masters in the bf16 run's model folder: some weight is not a bf16 value.
  auto loaded = loadModel(models[2], torch::kCPU, torch::kFloat32);
  bool finerThanBf16 = false;
  for (const auto& p : loaded->parameters())
    finerThanBf16 = finerThanBf16 || !torch::equal(p, p.to(torch::kBFloat16).to(torch::kFloat32));
  EXPECT_TRUE(finerThanBf16);
}

TEST(Trainer, GradientAccumulationEqualsOneLargerBatch) {
  ModelConfig cfg;
  cfg.vocabSize = 64;
  cfg.hiddenSize = 32;
  cfg.intermediateSize = 48;
  cfg.numLayers = 2;
  cfg.numHeads = 4;
  cfg.numKvHeads = 2;
  cfg.headDim = 8;
  torch::manual_seed(3);
  auto windows = torch::randint(0, 64, {8, 17}, torch::kInt64);
  auto gradsOf = [&](int micro) {
    torch::manual_seed(1);
    CausalLm m(cfg);
    m.to(torch::kFloat64);
    initializeWeights(m, 0.1, false);
    const int rows = 8 / micro;
    for (int i = 0; i < micro; ++i) (languageModelLoss(m, windows.narrow(0, i * rows, rows)) / micro).backward();
    std::vector<torch::Tensor> g;
    for (auto& p : m.parameters()) g.push_back(p.grad().clone());
    return g;
  };
  auto one = gradsOf(1), four = gradsOf(4);
  ASSERT_EQ(one.size(), four.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_LT((one[i] - four[i]).abs().max().item<double>(), 1e-14) << i;
  }
}

EvalTaskSpec taskSpec(const std::string& name, const std::string& file, std::int64_t limit = 0) {
  EvalTaskSpec t;
  t.name = name;
  t.file = file;
  t.limit = limit;
  return t;
}

// eval_tasks are scored on every checkpoint's model and at the end; the
// figures land in the store per step and task and in the summary.
TEST(Trainer, EvalTasksAreScoredAtEveryCheckpointAndStored) {
  Workspace ws("eval-tasks");
  const fs::path task = ws.dir / "toy.jsonl";
  std::ofstream(task) << R"({"context": "Python is a programming", "choices": [" language", " snake"], "gold": 0}
{"context": "A list is written with", "choices": [" square brackets", " curly braces"], "gold": 0}
{"context": "The tutorial", "choices": [" explains", " forgets", " eats"], "gold": 0}
)";
  RunSpec spec = tinyPretrainSpec(10);
  spec.checkpointEvery = 5;
  spec.evalTasks = {taskSpec("toy", task.string()), taskSpec("toy2", task.string(), 2)};
  const RunSpec parsed = parseRunSpec(runSpecToJson(spec), "spec");
  ASSERT_EQ(parsed.evalTasks.size(), 2u);
  EXPECT_EQ(parsed.evalTasks[1].limit, 2);
  auto id = ws.store.createRun(std::nullopt, "tasks", spec.kind, runSpecToJson(spec), "cpu");
  NullProgress progress;
  CancelToken cancel;
  RunResult r = runJob(ws.store, id, ws.env(), progress, cancel);
  ASSERT_EQ(r.status, RunStatus::Completed) << r.errorText();
  const auto evals = ws.store.listEvaluations(id);
  ASSERT_EQ(evals.size(), 8u);  // 2 tasks x 2 metrics x steps 5 and 10
  for (const auto& e : evals) {
    EXPECT_TRUE(e.step == 5 || e.step == 10) << e.step;
    EXPECT_GE(e.value, 0.0);
    EXPECT_LE(e.value, 1.0);
    EXPECT_EQ(e.items, e.task == "toy" ? 3 : 2);
    EXPECT_EQ(e.partial, e.task == "toy2");
    // acc of n items is a multiple of 1/n.
    EXPECT_NEAR(e.value * static_cast<double>(e.items), std::round(e.value * static_cast<double>(e.items)), 1e-9);
  }
  // The same figures as metric series over the steps (what the chart draws).
  const auto series = ws.store.series(id, "eval/toy/acc", 0, 1000, 100);
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].step, 5);
  EXPECT_EQ(series[1].step, 10);
  for (const auto& e : evals) {
    if (e.task == "toy" && e.metric == "acc") {
      EXPECT_EQ(series[e.step == 5 ? 0 : 1].value, e.value);
    }
  }
  EXPECT_EQ(ws.store.series(id, "eval/toy2/acc_norm", 0, 1000, 100).size(), 2u);
  const auto summary = nlohmann::json::parse(ws.store.run(id).summaryJson);
  EXPECT_EQ(summary.at("eval_tasks").at("toy").at("step").get<int>(), 10);
  EXPECT_EQ(summary.at("eval_tasks").at("toy").at("items").get<int>(), 3);
}

TEST(Trainer, BadEvalTasksNameTheField) {
  RunSpec spec = tinyPretrainSpec(10);
  spec.evalTasks = {taskSpec("a", "x.jsonl"), taskSpec("a", "y.jsonl")};
  try {
    parseRunSpec(runSpecToJson(spec), "s.json");
    ADD_FAILURE() << "a duplicate task name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("eval_tasks[1].name"), std::string::npos) << e.message();
  }
  spec.evalTasks = {taskSpec("a", "/no/such/file.jsonl")};
  try {
    preflightRunSpec(parseRunSpec(runSpecToJson(spec), "s.json"), "s.json", fs::temp_directory_path());
    ADD_FAILURE() << "a missing task file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("eval_tasks[0].file"), std::string::npos) << e.message();
  }
}

}  // namespace latentlab::test
