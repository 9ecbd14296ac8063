// Distillation (train/distillation.h, spec "distill"): the loss of one
// micro-batch against the same formula on transformers' logits of both
// models; alpha 0 trains as the plain run, bit for bit; a distilled run
// resumed equals the uninterrupted one; a teacher that reads other tokens is
// refused naming both files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "common/file_util.h"
#include "latentlab/error.h"
#include "latentlab/memory_plan.h"
#include "latentlab/train.h"
#include "model/weights.h"
#include "test_support.h"
#include "train/distillation.h"
#include "train_test_util.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

fs::path hfModel(const fs::path& dir, int seed, int vocab) {
  std::string log;
  EXPECT_EQ(runPython("hf_llama.py",
                      {"make", dir.string(), "--vocab", std::to_string(vocab), "--std", "0.2", "--seed",
                       std::to_string(seed)},
                      &log),
            0)
      << log;
  return dir;
}

// A trained base with its tokenizer: a short pre-training run's final model.
fs::path trainedBase(RunStore& store, const fs::path& workspace) {
  RunSpec spec = tinyPretrainSpec(30);
  const auto id = store.createRun(std::nullopt, "base", spec.kind, runSpecToJson(spec), "cpu");
  JobEnvironment env;
  env.workspace = workspace;
  NullProgress quiet;
  CancelToken never;
  const RunResult r = runJob(store, id, env, quiet, never);
  EXPECT_EQ(r.status, RunStatus::Completed) << r.errorText();
  return r.finalModel;
}

RunSpec convertFinetune(const fs::path& base, int steps) {
  RunSpec s = tinyPretrainSpec(steps);
  s.kind = RunKind::ConvertFinetune;
  s.architecture.clear();
  s.modelDir = base.string();
  s.conversion.enabled = true;
  s.conversion.ropeStrategy = RopeStrategy::High;
  s.conversion.ropePairs = 1;
  s.conversion.dKv = 4;
  s.optimizer.lr = 1e-3;
  s.data.validationShare = 0.0;
  return s;
}

// A workspace with a trained base (a short pre-training's final model), per test.
class DistilledRun : public ::testing::Test {
 protected:
  fs::path ws = scratchDir(std::string("distill-") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  RunStore store{ws / "runs.db"};
  JobEnvironment env = [this] {
    JobEnvironment e;
    e.workspace = ws;
    return e;
  }();
  fs::path base = trainedBase(store, ws);
  NullProgress quiet;
  CancelToken never;
};

}  // namespace

TEST(Distillation, LossEqualsTheFormulaOnTransformersLogits) {
  ASSERT_TRUE(pythonHas("transformers"));
  const fs::path root = scratchDir("distill-loss");
  const fs::path teacherDir = hfModel(root / "teacher", 1, 200), studentDir = hfModel(root / "student", 2, 200);
  Distillation d;
  d.teacher = loadModel(teacherDir, torch::kCPU, torch::kFloat32);
  d.teacher->eval();
  const auto student = loadModel(studentDir, torch::kCPU, torch::kFloat32);
  torch::manual_seed(3);
  const auto windows = torch::randint(0, 200, {3, 25}, torch::kInt64);
  const fs::path ids = root / "ids.bin", out = root / "loss.json";
  {
    std::ofstream f(ids, std::ios::binary);
    f.write(reinterpret_cast<const char*>(windows.data_ptr<std::int64_t>()),
            static_cast<std::streamsize>(windows.numel() * 8));
  }
  for (const double T : {1.0, 2.0}) {
    for (const double a : {0.0, 0.5, 1.0}) {
      SCOPED_TRACE("T " + std::to_string(T) + " alpha " + std::to_string(a));
      d.alpha = a;
      d.temperature = T;
      const DistillationLoss ours = distillationLoss(*student, d, windows);
      std::string log;
      ASSERT_EQ(runPython("hf_llama.py",
                          {"distill", teacherDir.string(), studentDir.string(), ids.string(), out.string(), "--shape",
                           "3,25", "--alpha", std::to_string(a), "--temperature", std::to_string(T)},
                          &log),
                0)
          << log;
      const auto ref = nlohmann::json::parse(readTextFile(out));
      for (const auto& [name, value] : {std::pair{"total", ours.total}, {"ce", ours.ce}, {"kd", ours.kd}}) {
        const double want = ref[name].get<double>();
        EXPECT_NEAR(value.item<double>(), want, 1e-6 * std::max(1.0, std::abs(want))) << name;
      }
      EXPECT_GT(ours.kd.item<double>(), 0.01);  // two different models: the KL is not zero
      student->zero_grad();
      ours.total.backward();  // a gradient only through the student
      EXPECT_TRUE(student->parameters().front().grad().defined());
    }
  }
}

// alpha 0 is the plain loss: the same losses and weights, bit for bit, with
// the KL kept as a reading (loss/ce, loss/kd).
TEST_F(DistilledRun, AlphaZeroTrainsAsThePlainRunAndReportsBothParts) {
  RunSpec plain = convertFinetune(base, 6);
  RunSpec distilled = plain;
  distilled.distill.enabled = true;
  distilled.distill.alpha = 0.0;
  distilled.distill.temperature = 2.0;
  const auto a = store.createRun(std::nullopt, "plain", plain.kind, runSpecToJson(plain), "cpu");
  const auto b = store.createRun(std::nullopt, "distilled", distilled.kind, runSpecToJson(distilled), "cpu");
  const RunResult ra = runJob(store, a, env, quiet, never);
  const RunResult rb = runJob(store, b, env, quiet, never);
  ASSERT_EQ(ra.status, RunStatus::Completed) << ra.errorText();
  ASSERT_EQ(rb.status, RunStatus::Completed) << rb.errorText();
  const auto la = seriesValues(store, a, "train/loss"), lb = seriesValues(store, b, "train/loss");
  ASSERT_EQ(la.size(), 6u);
  ASSERT_EQ(lb.size(), 6u);
  for (std::size_t i = 0; i < la.size(); ++i) EXPECT_EQ(la[i], lb[i]) << "step " << i + 1;
  EXPECT_TRUE(seriesValues(store, a, "loss/kd").empty());
  const auto ce = seriesValues(store, b, "loss/ce"), kd = seriesValues(store, b, "loss/kd");
  ASSERT_EQ(ce.size(), 6u);
  ASSERT_EQ(kd.size(), 6u);
  const auto total = seriesValues(store, b, "loss/total");
  ASSERT_EQ(total.size(), 6u);
  for (std::size_t i = 0; i < ce.size(); ++i) {
    EXPECT_EQ(ce[i], lb[i]);     // train/loss is the next-token loss
    EXPECT_EQ(total[i], lb[i]);  // which at alpha 0 is the objective
    EXPECT_GT(kd[i], 0.0);       // the converted student differs from the original
  }
  const auto wa = loadModel(ra.finalModel, torch::kCPU, torch::kFloat32);
  const auto wb = loadModel(rb.finalModel, torch::kCPU, torch::kFloat32);
  const auto pa = wa->named_parameters(), pb = wb->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
}

// A distilled run stopped and resumed (the teacher loaded again from the
// original folder) equals the uninterrupted run; and it stays closer to its
// teacher than the same run without the KL in its loss.
TEST_F(DistilledRun, AResumedDistilledRunEqualsTheUninterruptedRun) {
  RunSpec spec = convertFinetune(base, 12);
  spec.distill.enabled = true;
  spec.distill.alpha = 0.5;
  spec.distill.temperature = 2.0;
  const auto full = store.createRun(std::nullopt, "full", spec.kind, runSpecToJson(spec), "cpu");
  ASSERT_EQ(runJob(store, full, env, quiet, never).status, RunStatus::Completed);
  const auto split = store.createRun(std::nullopt, "split", spec.kind, runSpecToJson(spec), "cpu");
  CancelToken cancel;
  CancelAtStep stopper(cancel, 1);
  const RunResult first = runJob(store, split, env, stopper, cancel);
  ASSERT_EQ(first.status, RunStatus::Cancelled);
  ASSERT_LT(first.steps, 12);
  store.setStatus(split, RunStatus::Queued);
  const RunResult second = runJob(store, split, env, quiet, never);
  ASSERT_EQ(second.status, RunStatus::Completed) << second.errorText();
  for (const char* series : {"train/loss", "loss/ce", "loss/kd", "loss/total"}) {
    const auto a = seriesValues(store, full, series), b = seriesValues(store, split, series);
    ASSERT_EQ(a.size(), 12u) << series;
    ASSERT_EQ(b.size(), 12u) << series;
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << series << " step " << i + 1;
  }
  // The teacher pulls: at alpha 0 (the KL only read) the student drifts
  // further from the original model than with the KL in its loss.
  RunSpec free = spec;
  free.distill.alpha = 0.0;
  const auto undistilled = store.createRun(std::nullopt, "alpha 0", free.kind, runSpecToJson(free), "cpu");
  ASSERT_EQ(runJob(store, undistilled, env, quiet, never).status, RunStatus::Completed);
  // train/loss is the next-token loss; the objective adds half the T^2-scaled KL.
  const auto ce = seriesValues(store, full, "loss/ce"), kd = seriesValues(store, full, "loss/kd");
  const auto total = seriesValues(store, full, "loss/total"), loss = seriesValues(store, full, "train/loss");
  for (std::size_t i = 0; i < ce.size(); ++i) {
    EXPECT_EQ(loss[i], ce[i]);
    EXPECT_NEAR(total[i], 0.5 * 4.0 * kd[i] + 0.5 * ce[i], 1e-6 * std::abs(total[i]));  // summed in fp32
  }
  const double pulled = kd.back();
  const double drifted = seriesValues(store, undistilled, "loss/kd").back();
  EXPECT_LT(pulled, drifted * 0.8) << "KL after 12 steps with alpha 0.5: " << pulled << ", alpha 0: " << drifted;
}

// A teacher with another vocabulary, or another tokenizer, is refused before
// the first step, naming the teacher's file and the run's.
TEST_F(DistilledRun, ATeacherReadingOtherTokensIsRefusedNamingBothFiles) {
  RunSpec spec = convertFinetune(base, 2);
  spec.distill.enabled = true;
  spec.distill.teacher = hfModel(ws / "other-vocab", 4, 300).string();
  auto id = store.createRun(std::nullopt, "vocab", spec.kind, runSpecToJson(spec), "cpu");
  RunResult r = runJob(store, id, env, quiet, never);
  ASSERT_EQ(r.status, RunStatus::Failed);
  EXPECT_NE(r.errorText().find("other-vocab/config.json"), std::string::npos) << r.errorText();
  EXPECT_NE(r.errorText().find("vocabulary (300"), std::string::npos) << r.errorText();

  // Same vocabulary size, another tokenizer file.
  const fs::path copy = ws / "other-tokenizer";
  fs::create_directories(copy);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(base / f, copy / f);
  std::string tok = readTextFile(base / "tokenizer.json");
  tok.insert(tok.rfind('}'), ",\"note\":1");
  std::ofstream(copy / "tokenizer.json") << tok;
  spec.distill.teacher = copy.string();
  id = store.createRun(std::nullopt, "tokenizer", spec.kind, runSpecToJson(spec), "cpu");
  r = runJob(store, id, env, quiet, never);
  ASSERT_EQ(r.status, RunStatus::Failed);
  EXPECT_NE(r.errorText().find("other-tokenizer/tokenizer.json differs from the run's tokenizer"), std::string::npos)
      << r.errorText();
}

// The memory plan counts the teacher's weights (the unconverted model's
// parameters for "original") and the two log-probability tensors of the KL.
TEST(Distillation, TheMemoryPlanCountsTheTeacher) {
  const fs::path dir = hfModel(scratchDir("distill-plan") / "m", 1, 200);
  RunSpec spec = convertFinetune(dir, 10);
  spec.precision = Precision::Fp32;
  std::int64_t source = 0;
  const ModelConfig cfg = plannedModelConfig(spec, &source);
  const MemoryPlan plain = planMemory(cfg, spec, 0, source);
  spec.distill.enabled = true;
  const MemoryPlan distilled = planMemory(cfg, spec, 0, source);
  std::int64_t teacher = -1;
  for (const MemoryItem& i : distilled.items)
    if (i.name == "teacher weights") teacher = i.bytes;
  EXPECT_EQ(teacher, 4 * source);
  ASSERT_EQ(plain.peakPhase, "start of backward");
  ASSERT_EQ(distilled.peakPhase, "start of backward");
  const std::int64_t tokens = static_cast<std::int64_t>(spec.microBatch) * spec.data.seqLen;
  EXPECT_EQ(distilled.peakBytes - plain.peakBytes, 4 * source + 2 * 4 * 200 * tokens);
}

}  // namespace latentlab::test
