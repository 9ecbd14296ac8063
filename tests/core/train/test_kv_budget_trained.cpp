// A KV budget spread over layers on a trained base of the demo's shape
// (demo-gqa trained on the Python tutorial): at the bytes per token of d_kv 8
// everywhere, the conversion whose layers take their d_kv from their spectra
// keeps at least the uniform one's total share of the spectra (what the
// allocation maximises) and loses held-out loss right after conversion within
// 5% of what the uniform one loses (the share is a proxy for the loss, not the
// loss: when the fp32 training kernels changed how the base trains, the
// allocated conversion lost 0.1320 here against the uniform one's 0.1313),
// through the `convert` pipeline the CLI and the GUI run.
#include <gtest/gtest.h>

#include <fstream>

#include "latentlab/convert.h"
#include "latentlab/model_config.h"
#include "latentlab/train.h"
#include "test_support.h"
#include "train_test_util.h"

namespace latentlab::test {
namespace fs = std::filesystem;

TEST(KvBudgetTrained, AllocatedConversionKeepsMoreSpectrumAndLosesWithinFivePercentOfUniform) {
  const fs::path dir = scratchDir("kv-budget-trained");
  const RunResult trained = trainTinyBase(dir, 400);
  const RunSpec spec = tinyPretrainSpec(400);
  NullProgress progress;
  CancelToken cancel;
  ASSERT_EQ(trained.status, RunStatus::Completed) << trained.errorText();

  // Calibration on the tutorial the base was trained on; held out: the
  // library reference's built-in functions page, which it never saw.
  const fs::path calib = dir / "tutorial.txt";
  {
    std::ofstream out(calib);
    for (const auto& e : fs::directory_iterator(spec.data.corpus)) {
      std::ifstream in(e.path());
      out << in.rdbuf() << "\n";
    }
  }
  ConvertSpec c;
  c.modelDir = trained.finalModel;
  c.outDir = dir / "allocated";
  c.ropeStrategy = RopeStrategy::TwoNorm;
  c.ropePairs = 2;
  c.kvBudget = "d_kv:8";
  c.calibration.dataFile = calib;
  c.calibration.format = TokenFormat::Text;
  c.calibration.numSequences = 32;
  c.calibration.seqLen = 128;
  c.heldOutText = "/usr/share/doc/python3.11/html/_sources/library/functions.rst.txt";
  const ConvertReport r = convert(c, progress, cancel);
  ASSERT_TRUE(r.allocation);
  const KvAllocation& a = *r.allocation;
  EXPECT_EQ(a.limits.uniformDKv, 8);
  EXPECT_EQ(a.bytesPerToken, a.limits.budgetBytes) << "d_kv:8 is a whole number of steps";
  EXPECT_EQ(r.after.bytesPerToken, a.limits.budgetBytes) << "the saved model's cache is the budget";
  EXPECT_EQ(a.uniformBytesPerToken, a.limits.budgetBytes);
  std::string dkv;
  for (int d : a.layerDKv) dkv += " " + std::to_string(d);
  std::printf("d_kv per layer:%s; held-out loss: original %.4f, uniform d_kv 8 %.4f, allocated %.4f\n", dkv.c_str(),
              r.heldOutLossBefore, r.heldOutLossUniform, r.heldOutLossAfter);
  EXPECT_NE(a.layerDKv, std::vector<int>(4, 8)) << "the spectra differ between layers";
  EXPECT_GT(r.heldOutLossUniform, r.heldOutLossBefore);
  double kept = 0, uniformKept = 0;
  for (double k : a.kept) kept += k;
  for (double k : a.uniformKept) uniformKept += k;
  EXPECT_GE(kept, uniformKept) << "the allocation keeps the largest total share the budget pays for";
  EXPECT_LE(r.heldOutLossAfter - r.heldOutLossBefore, 1.05 * (r.heldOutLossUniform - r.heldOutLossBefore));

  // A convert-finetune run with the same budget: the preview the Conversion
  // tab shows (planRunKvBudget) is what the run then does, its split in the
  // run's notes and its validation loss the run's first val/loss.
  RunSpec run;
  run.name = "budget";
  run.kind = RunKind::ConvertFinetune;
  run.modelDir = trained.finalModel.string();
  run.data = spec.data;
  run.data.tokenizer.clear();
  run.steps = 1;
  run.microBatch = 4;
  run.evalEvery = 1;
  run.evalBatches = 3;
  run.checkpointEvery = 0;
  run.seed = 7;
  run.conversion.enabled = true;
  run.conversion.ropeStrategy = RopeStrategy::TwoNorm;
  run.conversion.ropePairs = 2;
  run.conversion.kvBudget = "d_kv:8";
  run.conversion.calibSequences = 8;
  run.conversion.calibSeqLen = 32;
  const KvAllocation planned = planRunKvBudget(run, dir, progress, cancel);
  EXPECT_EQ(planned.limits.uniformDKv, 8);
  ASSERT_GE(planned.heldOutLoss, 0);
  ASSERT_GE(planned.uniformHeldOutLoss, 0);
  RunStore store(dir / "runs.db");
  const auto runId = store.createRun(std::nullopt, run.name, run.kind, runSpecToJson(run), "cpu");
  JobEnvironment env;
  env.workspace = dir;
  const RunResult done = runJob(store, runId, env, progress, cancel);
  ASSERT_EQ(done.status, RunStatus::Completed) << done.errorText();
  const auto val = store.series(runId, "val/loss");
  ASSERT_FALSE(val.empty());
  EXPECT_EQ(val.front().step, 0);
  EXPECT_NEAR(val.front().value, planned.heldOutLoss, 1e-9);
  EXPECT_EQ(readHfConfig(done.finalModel / "config.json").mla->layerDKv, planned.layerDKv);
}

}  // namespace latentlab::test
