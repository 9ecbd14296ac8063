// Every attention variant trains from scratch through the real trainer: the
// loss falls on real text, and the trained folder reloads as the same variant.
#include <gtest/gtest.h>

#include <cmath>

#include "latentlab/engine.h"
#include "latentlab/run_store.h"
#include "latentlab/train.h"
#include "test_support.h"
#include "train/train_test_util.h"

namespace latentlab::test {
namespace fs = std::filesystem;

TEST(LatentTraining, EveryVariantsLossFallsOnRealText) {
  const fs::path dir = scratchDir("variant-training");
  RunStore store(dir / "runs.db");
  JobEnvironment env;
  env.workspace = dir;  // one workspace: the tokenizer is trained once and cached
  for (const std::string variant : {"mha", "gqa", "mla", "gla-2", "mlra-2", "mlra-4"}) {
    RunSpec spec = tinyPretrainSpec(60);
    spec.name = variant;
    spec.attention = variant;
    spec.zeroInitOutput = true;  // the MLRA recipe
    auto id = store.createRun(std::nullopt, variant, spec.kind, runSpecToJson(spec), "cpu");
    NullProgress progress;
    CancelToken cancel;
    RunResult r = runJob(store, id, env, progress, cancel);
    ASSERT_EQ(r.status, RunStatus::Completed) << variant << ": " << r.errorText();
    auto loss = seriesValues(store, id, "train/loss");
    ASSERT_EQ(loss.size(), 60u) << variant;
    const double first = (loss[0] + loss[1] + loss[2]) / 3, last = (loss[57] + loss[58] + loss[59]) / 3;
    // From about ln(512) = 6.24 at init to the unigram level and below in 60 steps.
    EXPECT_LT(last, first - 0.6) << variant << ": first " << first << " last " << last;
    EXPECT_LT(last, std::log(512.0) - 0.7) << variant << ": last " << last;
    ModelSummary s = inspectModel(r.finalModel);
    if (variant == "mha" || variant == "gqa") {
      EXPECT_FALSE(s.config.latent.has_value()) << variant;
      EXPECT_EQ(s.config.numKvHeads, variant == "mha" ? 4 : 2);
    } else {
      ASSERT_TRUE(s.config.latent.has_value()) << variant;
      EXPECT_EQ(s.config.latent->name(), variant);
    }
  }
}

}  // namespace latentlab::test
