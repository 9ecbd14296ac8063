// The memory plan from the command line: `run SPEC --check` prints it and
// runs nothing; a spec the plan says does not fit is refused before any run is
// registered; an allocation that fails during a step fails the run as "out
// of memory at step N" and leaves the store intact.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine_test_util.h"
#include "latentlab/run_store.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {
std::string engine(const std::string& args) {
  return shellQuote(kEngine) + " " + args;
}
}  // namespace

TEST(MemoryCheckCli, CheckPrintsThePlanAndRunsNothing) {
  const fs::path dir = scratchDir("check");
  writeFile(dir / "demo.json",
            R"({"kind":"pretrain","architecture":"demo-gqa","steps":5,"micro_batch":8,"data":{"seq_len":128}})");
  std::string out;
  ASSERT_EQ(runCommand(engine("run " + shellQuote((dir / "demo.json").string()) + " --check"), &out), 0) << out;
  for (const char* word : {"weights", "optimizer state", "activations", "logits and loss", "peak", "fits"})
    EXPECT_NE(out.find(word), std::string::npos) << word << "\n" << out;
  ASSERT_EQ(runCommand(engine("run " + shellQuote((dir / "demo.json").string()) + " --check --json"), &out), 0) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  std::int64_t sum = 0;
  for (const auto& item : j.at("items")) sum += item.at("bytes").get<std::int64_t>();
  EXPECT_NEAR(static_cast<double>(sum), j.at("peak_bytes").get<double>(), 8.0);
  EXPECT_TRUE(j.at("fits").get<bool>());
  EXPECT_GE(j.at("largest_micro_batch").get<int>(), 8);
  EXPECT_EQ(j.at("precision").get<std::string>(), "fp32");
  EXPECT_GT(j.at("peak_bytes_with_recompute").get<std::int64_t>(), 0);
  EXPECT_FALSE(fs::exists(dir / "runs.db")) << "a check registers nothing";
  // For a machine one does not have: --available per device.
  EXPECT_EQ(runCommand(engine("run " + shellQuote((dir / "demo.json").string()) + " --check --available 1M"), &out), 4)
      << out;
  EXPECT_NE(out.find("1.00 MiB available"), std::string::npos) << out;
  EXPECT_EQ(runCommand(engine("run " + shellQuote((dir / "demo.json").string()) +
                              " --check --device cuda:0,cuda:1 --available 80G"),
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("2 ranks"), std::string::npos) << out;
  EXPECT_NE(out.find("80.0 GiB available"), std::string::npos) << out;
  EXPECT_EQ(runCommand(engine("run " + shellQuote((dir / "demo.json").string()) + " --check --available lots"), &out),
            1)
      << out;
  EXPECT_NE(out.find("--available"), std::string::npos) << out;
}

// A real run through the engine records the peak it held beside the plan's
// prediction in its summary; they agree within 15%.
TEST(MemoryCheckCli, ARunsSummaryHoldsItsMeasuredPeakBesideThePlan) {
  const fs::path dir = scratchDir("measured");
  writeFile(dir / "demo.json", R"({"kind":"pretrain","architecture":"demo-gqa","steps":6,"micro_batch":8,)"
                               R"("eval_every":0,"checkpoint_every":0,"data":{"seq_len":128}})");
  std::string out;
  ASSERT_EQ(runCommand(engine("run " + shellQuote((dir / "demo.json").string()) + " --db " +
                              shellQuote((dir / "runs.db").string()) + " --quiet"),
                       &out),
            0)
      << out;
  RunStore store(dir / "runs.db");
  const auto runs = store.listRuns();
  ASSERT_EQ(runs.size(), 1u);
  const auto summary = nlohmann::json::parse(store.run(runs.front().id).summaryJson);
  const auto& memory = summary.at("memory");
  ASSERT_TRUE(memory.at("peak_bytes").is_number()) << memory.dump();
  const double measured = memory.at("peak_bytes").get<double>(),
               planned = memory.at("planned_peak_bytes").get<double>();
  EXPECT_LT(std::abs(planned - measured) / measured, 0.15) << memory.dump();
}

// A 7B model with 64 x 4096-token micro-batches fits no machine's memory:
// --check says so (exit 4) and run refuses it before registering a run.
TEST(MemoryCheckCli, ASpecThatCannotFitIsRefusedBeforeAnyRunIsRegistered) {
  const fs::path dir = scratchDir("nofit");
  writeFile(dir / "big.json", R"({"kind":"pretrain","architecture":"llama-2-7b","steps":5,"micro_batch":64,)"
                              R"("precision":"bf16","data":{"seq_len":4096,"tokenizer_vocab":32000}})");
  std::string out;
  EXPECT_EQ(runCommand(engine("run " + shellQuote((dir / "big.json").string()) + " --check"), &out), 4) << out;
  EXPECT_NE(out.find("does not fit"), std::string::npos) << out;
  EXPECT_EQ(runCommand(engine("run " + shellQuote((dir / "big.json").string()) + " --db " +
                              shellQuote((dir / "runs.db").string())),
                       &out),
            1)
      << out;
  EXPECT_NE(out.find("does not fit cpu"), std::string::npos) << out;
  EXPECT_NE(out.find("is free"), std::string::npos) << out;
  EXPECT_NE(out.find("micro_batch"), std::string::npos) << out;
  if (fs::exists(dir / "runs.db")) {
    RunStore store(dir / "runs.db");
    EXPECT_TRUE(store.listRuns().empty());
  }
}

// The host refuses memory past a 4 GB address-space limit while the plan
// (against the machine's free memory) lets the run start: the failed
// allocation fails the run naming the step, and the store keeps the run.
TEST(MemoryCheckCli, AnAllocationThatFailsDuringAStepIsReportedAsOutOfMemory) {
  const fs::path dir = scratchDir("oom");
  writeFile(dir / "wide.json",
            R"({"kind":"pretrain","architecture":"demo-gqa","steps":3,"micro_batch":512,"eval_every":0,)"
            R"("checkpoint_every":0,"data":{"seq_len":128,"validation_share":0}})");
  std::string out;
  const int rc = runCommand(
      "ulimit -v 4000000; " + engine("run " + shellQuote((dir / "wide.json").string()) + " --db " +
                                     shellQuote((dir / "runs.db").string()) + " --ignore-memory-plan --quiet"),
      &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("out of memory at step 1 on cpu"), std::string::npos) << out;
  RunStore store(dir / "runs.db");
  const auto runs = store.listRuns();
  ASSERT_EQ(runs.size(), 1u);
  const RunRecord r = store.run(runs.front().id);
  EXPECT_EQ(r.status, RunStatus::Failed);
  EXPECT_NE(r.error.find("out of memory"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("micro_batch"), std::string::npos) << r.error;
}

}  // namespace latentlab::test
