// The engine binary as the GUI and users drive it: --help on every verb,
// field-naming errors for bad specs, and a run killed with SIGKILL that
// resumes to exactly the uninterrupted run's losses.
#include <gtest/gtest.h>
#include <array>

#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "../train/train_test_util.h"
#include "engine_test_util.h"
#include "latentlab/run_store.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

TEST(EngineCli, EveryVerbHasHelp) {
  for (const char* verb : {"inspect", "eval", "init", "run", "runs", "demo", "devices", "convert"}) {
    std::string out;
    EXPECT_EQ(runCommand(shellQuote(kEngine) + " " + verb + " --help", &out), 0) << verb;
    EXPECT_NE(out.find("usage"), std::string::npos) << verb << ": " << out;
  }
  std::string out;
  EXPECT_EQ(runCommand(shellQuote(kEngine) + " --help", &out), 0);
  EXPECT_EQ(runCommand(shellQuote(kEngine) + " frobnicate", &out), 1);
  EXPECT_NE(out.find("unknown verb"), std::string::npos);
}

// What the job controller schedules by: each device with its total and free
// memory (the host's RAM for cpu, checked against /proc/meminfo here).
TEST(EngineCli, DevicesReportTotalAndFreeMemory) {
  std::string out;
  ASSERT_EQ(runCommand(shellQuote(kEngine) + " devices --json", &out), 0) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('[')));
  ASSERT_GE(j.size(), 1u);
  EXPECT_EQ(j[0].at("id").get<std::string>(), "cpu");
  const auto total = j[0].at("memory_bytes").get<std::uint64_t>(), free = j[0].at("free_bytes").get<std::uint64_t>();
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0, expectedTotal = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemTotal:") expectedTotal = kib * 1024;
    meminfo.ignore(64, '\n');
  }
  EXPECT_EQ(total, expectedTotal);
  EXPECT_GT(free, 0u);
  EXPECT_LE(free, total);
  for (const auto& d : j) {
    EXPECT_LE(d.at("free_bytes").get<std::uint64_t>(), d.at("memory_bytes").get<std::uint64_t>()) << d.dump();
  }
}

TEST(EngineCli, BadSpecNamesTheFieldAndCreatesNoRun) {
  fs::path dir = scratchDir("badspec");
  writeFile(dir / "bad.json", R"({"kind":"pretrain","architecture":"demo-gqa","optimizer":{"lr":"fast"}})");
  std::string out;
  EXPECT_EQ(runCommand(shellQuote(kEngine) + " run " + shellQuote((dir / "bad.json").string()) + " --db " +
                           shellQuote((dir / "runs.db").string()),
                       &out),
            1);
  EXPECT_NE(out.find("optimizer.lr"), std::string::npos) << out;
  RunStore store(dir / "runs.db");
  EXPECT_TRUE(store.listRuns().empty());
  writeFile(dir / "arch.json", R"({"kind":"pretrain","architecture":"gpt-5"})");
  EXPECT_EQ(runCommand(shellQuote(kEngine) + " run " + shellQuote((dir / "arch.json").string()) + " --db " +
                           shellQuote((dir / "runs.db").string()),
                       &out),
            1);
  EXPECT_NE(out.find("gpt-5"), std::string::npos) << out;
}

// A named choice on the command line is parsed where it enters: an unknown
// name exits 1 naming the flag and the names it takes, before any model is read.
TEST(EngineCli, ConvertRefusesUnknownChoicesNamingTheFlag) {
  const fs::path dir = scratchDir("convert-choices");
  const std::string head = shellQuote(kEngine) + " convert --model " + shellQuote((dir / "none").string()) + " --out " +
                           shellQuote((dir / "out").string()) + " --dkv 4 ";
  const std::vector<std::array<std::string, 3>> cases = {
      {"--rope sideways", "--rope: unknown RoPE strategy 'sideways'", "2-norm"},
      {"--svd triple", "--svd: unknown SVD method 'triple'", "joint, split"},
      {"--target deepseek-v2", "--target: unknown conversion target 'deepseek-v2'", "mha2mla, deepseek"},
      {"--factorise pca", "--factorise: unknown", "weights, activations"},
      {"--score dot", "--score: unknown", "product, sum"},
      {"--calib-format u8", "--calib-format: unknown token format 'u8'", "u16"},
  };
  for (const auto& [flag, message, names] : cases) {
    std::string out;
    EXPECT_EQ(runCommand(head + flag, &out), 1) << flag;
    EXPECT_NE(out.find(message), std::string::npos) << flag << ": " << out;
    EXPECT_NE(out.find(names), std::string::npos) << flag << ": " << out;
    EXPECT_FALSE(fs::exists(dir / "out")) << flag;
  }
  // The names and aliases the vocabulary reads pass the command line (and
  // fail later, on the missing model, naming it).
  std::string out;
  EXPECT_EQ(runCommand(head + "--rope two-norm --svd split --target mha2mla --calib-format text", &out), 1);
  EXPECT_EQ(out.find("unknown"), std::string::npos) << out;
  EXPECT_NE(out.find("none"), std::string::npos) << out;
}

TEST(EngineCli, KilledRunKeepsItsMetricsAndResumesToTheSameLosses) {
  fs::path dir = scratchDir("kill9");
  RunSpec spec = tinyPretrainSpec(120);
  spec.data.validationShare = 0.0;
  spec.checkpointEvery = 20;
  writeFile(dir / "spec.json", runSpecToJson(spec));
  const std::string db = (dir / "runs.db").string();

  // The reference: the same spec, uninterrupted.
  std::string out;
  ASSERT_EQ(runCommand(shellQuote(kEngine) + " run " + shellQuote((dir / "spec.json").string()) + " --quiet --db " +
                           shellQuote(db),
                       &out),
            0)
      << out;

  pid_t pid = spawnEngine({"run", (dir / "spec.json").string(), "--quiet", "--db", db}, dir / "killed.log");
  std::int64_t victim = 2;
  {
    RunStore store(dir / "runs.db");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      auto last = store.lastStep(victim, "train/loss");
      if (last && *last >= 50) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  RunStore store(dir / "runs.db");
  EXPECT_EQ(store.integrityCheck(), "ok");
  auto last = store.lastStep(victim, "train/loss");
  ASSERT_TRUE(last.has_value());
  EXPECT_GE(*last, 40);
  EXPECT_LT(*last, 120);
  EXPECT_EQ(store.run(victim).status, RunStatus::Running);  // the GUI marks it crashed

  ASSERT_EQ(runCommand(shellQuote(kEngine) + " run --quiet --db " + shellQuote(db) + " --run 2", &out), 0) << out;
  EXPECT_NE(out.find("resumed at step"), std::string::npos) << out;
  auto a = seriesValues(store, 1, "train/loss");
  auto b = seriesValues(store, victim, "train/loss");
  ASSERT_EQ(a.size(), 120u);
  ASSERT_EQ(b.size(), 120u);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  EXPECT_EQ(store.run(victim).status, RunStatus::Completed);
}

TEST(EngineCli, InspectAndEvalOnASmolLm135mShapedCheckpoint) {
  fs::path dir = scratchDir("smol135");
  std::string out;
  ASSERT_EQ(runCommand(
                shellQuote(kEngine) + " init --arch smollm-135m --dtype bf16 --out " + shellQuote((dir / "m").string()),
                &out),
            0)
      << out;
  ASSERT_EQ(runCommand(shellQuote(kEngine) + " inspect --json " + shellQuote((dir / "m").string()), &out), 0) << out;
  EXPECT_NE(out.find("\"kv_elements_per_token\": 11520"), std::string::npos) << out;  // 2*3*64*30
  EXPECT_NE(out.find("\"layers\": 30"), std::string::npos);
  // A token file of 600 ids for eval.
  std::vector<std::uint16_t> ids(600);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::uint16_t>((i * 7919) % 49152);
  {
    std::ofstream f(dir / "ids.u16", std::ios::binary);
    f.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 2));
  }
  ASSERT_EQ(runCommand(shellQuote(kEngine) + " eval --quiet --json --seq-len 128 --tokens " +
                           shellQuote((dir / "ids.u16").string()) + " " + shellQuote((dir / "m").string()),
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("\"tokens\":599"), std::string::npos) << out;
  // Random weights: the loss is near ln(49152) = 10.8.
  EXPECT_NE(out.find("\"loss\":10."), std::string::npos) << out;
}

}  // namespace latentlab::test
