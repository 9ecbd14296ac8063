// ZeRO stages 1 and 2 (train/zero.h) against plain data parallel, with real
// c10d Gloo ranks on loopback (one thread each): the same losses and
// parameters step for step, a 1/world share of the optimizer state per rank,
// and shards saved at one world size resumed at another.
#include <gtest/gtest.h>

#include <unistd.h>

#include <mutex>
#include <thread>

#include "latentlab/distributed.h"
#include "latentlab/error.h"
#include "latentlab/memory_plan.h"
#include "model/llama.h"
#include "test_support.h"
#include "train/data_parallel.h"
#include "train/model_builder.h"
#include "train/optimizer.h"
#include "train/train_step.h"
#include "train/zero.h"
#include "train_test_util.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

constexpr int kRows = 12;  // global windows per step: two equal micro-batches on 1, 2 or 3 ranks

torch::optim::AdamWOptions options() {
  return torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1);
}

// Step `step`'s global windows; rank r of `world` takes its contiguous rows,
// split over two micro-batches.
torch::Tensor windowsOf(int step, int micro, int rank, int world) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(500 + step));
  const auto all = torch::randint(0, 64, {kRows, 17}, gen, torch::kInt64);
  const int rows = kRows / world, half = rows / 2;
  return all.narrow(0, rank * rows + micro * half, half);
}

struct Outcome {
  std::vector<double> losses;            // rank 0's, one per step
  std::vector<torch::Tensor> params;     // rank 0's after the last step
  std::vector<std::int64_t> stateBytes;  // per rank (ZeRO)
  std::vector<std::int64_t> owned;       // per rank (ZeRO)
};

// `world` ranks train `steps` steps from `start` (parameters; null: the fixed
// initialisation) with ZeRO `stage` (0: plain data parallel with FusedAdamW).
// With `shardDir`, the ZeRO state is loaded from the shards there first
// (`loadFirst`) or saved there at the end.
Outcome train(int world, int stage, int firstStep, int steps, const std::vector<torch::Tensor>* start = nullptr,
              const fs::path& shardDir = {}, bool loadFirst = false) {
  Outcome out;
  out.stateBytes.assign(static_cast<std::size_t>(world), 0);
  out.owned.assign(static_cast<std::size_t>(world), 0);
  // The fixed initialisation, drawn here: ranks are threads, and the global
  // generator is not theirs to share.
  std::vector<torch::Tensor> init;
  if (start == nullptr) {
    torch::manual_seed(1);
    CausalLm model(tinyModelConfig());
    initializeWeights(model, 0.05, false);
    for (const auto& p : model.parameters()) init.push_back(p.detach().clone());
    start = &init;
  }
  const int port = freeLoopbackPort();
  std::mutex m;
  std::vector<std::string> failures;
  auto rankMain = [&](int rank) {
    try {
      DistEnv env;
      env.rank = env.localRank = rank;
      env.worldSize = env.localWorldSize = world;
      env.masterPort = port;
      env.timeout = std::chrono::seconds(60);
      std::unique_ptr<DataParallel> dp = world > 1 ? std::make_unique<DataParallel>(env, torch::kCPU) : nullptr;
      CausalLm model(tinyModelConfig());  // its own initialisation is overwritten
      {
        torch::NoGradGuard noGrad;
        auto ps = model.parameters();
        for (std::size_t i = 0; i < ps.size(); ++i) ps[i].copy_((*start)[i]);
      }
      auto params = model.parameters();
      StepSettings settings;
      settings.gradAccum = 2;
      settings.clip = 0.5;
      std::vector<double> losses;
      int step = firstStep, micro = 0;
      auto next = [&] { return windowsOf(step, micro++ % 2, rank, world); };
      if (stage == 0) {
        FusedAdamW opt(adamWParamGroups(params, options()), options());
        for (; step < firstStep + steps; ++step)
          losses.push_back(trainStep(model, opt, params, next, settings, dp.get()).loss);
      } else {
        ShardedAdamW opt(params, params, options(), stage, dp.get());
        if (!shardDir.empty() && loadFirst) {
          std::vector<fs::path> files;
          for (const auto& e : fs::directory_iterator(shardDir)) files.push_back(e.path());
          opt.load(files);
        }
        for (; step < firstStep + steps; ++step) losses.push_back(trainStep(model, opt, next, settings, dp.get()).loss);
        if (!shardDir.empty() && !loadFirst) opt.save(shardDir / ("optimizer-rank" + std::to_string(rank) + ".pt"));
        std::lock_guard<std::mutex> lock(m);
        out.stateBytes[static_cast<std::size_t>(rank)] = opt.stateBytes();
        out.owned[static_cast<std::size_t>(rank)] = opt.ownedElements();
      }
      if (rank == 0) {
        std::lock_guard<std::mutex> lock(m);
        out.losses = losses;
        for (const auto& p : params) out.params.push_back(p.detach().clone());
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(m);
      failures.push_back("rank " + std::to_string(rank) + ": " + e.what());
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(rankMain, r);
  for (auto& t : threads) t.join();
  for (const auto& f : failures) ADD_FAILURE() << f;
  return out;
}

double maxDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

std::int64_t parameterCount() {
  CausalLm model(tinyModelConfig());
  std::int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

}  // namespace

// Stages 1 and 2 over 2 and 3 ranks equal one rank with the whole batch
// (plain AdamW) step for step: the losses and, after 5 steps with clipping
// and weight decay, every parameter (fp32, 1e-5).
TEST(Zero, StagesOneAndTwoEqualPlainDataParallelStepForStep) {
  const Outcome plain = train(1, 0, 0, 5);
  ASSERT_EQ(plain.losses.size(), 5u);
  for (int world : {2, 3}) {
    const Outcome dp = train(world, 0, 0, 5);
    for (int stage : {1, 2}) {
      SCOPED_TRACE("world " + std::to_string(world) + " stage " + std::to_string(stage));
      const Outcome z = train(world, stage, 0, 5);
      ASSERT_EQ(z.losses.size(), 5u);
      for (std::size_t i = 0; i < 5; ++i) {
        EXPECT_NEAR(z.losses[i], dp.losses[i], 1e-5) << "step " << i + 1;
        EXPECT_NEAR(z.losses[i], plain.losses[i], 1e-5) << "step " << i + 1;
      }
      std::printf("world %d stage %d: max |param - plain DP| %.3g, |param - one rank| %.3g\n", world, stage,
                  maxDiff(z.params, dp.params), maxDiff(z.params, plain.params));
      EXPECT_LT(maxDiff(z.params, dp.params), 1e-5);
      EXPECT_LT(maxDiff(z.params, plain.params), 1e-5);
    }
  }
  EXPECT_GT(maxDiff(plain.params,
                    [] {
                      torch::manual_seed(1);
                      CausalLm m(tinyModelConfig());
                      initializeWeights(m, 0.05, false);
                      return m.parameters();
                    }()),
            1e-4)
      << "training moved the parameters";
}

// Each rank holds a 1/world share of the optimizer state: masters, both
// moments and the gradient slices, 16 bytes per owned element, and the
// shares differ from total/world by less than one element per rank
// (the padding of the one bucket this model needs).
TEST(Zero, EachRankHoldsItsShareOfTheOptimizerState) {
  const std::int64_t n = parameterCount();
  for (int world : {2, 3}) {
    const Outcome z = train(world, 2, 0, 1);
    // The memory planner's ZeRO items for the same model and ranks.
    RunSpec spec;
    spec.precision = Precision::Fp32;
    spec.zeroStage = 2;
    spec.device = world == 2 ? "cpu,cpu" : "cpu,cpu,cpu";
    const MemoryPlan plan = planMemory(tinyModelConfig(), spec, 0);
    std::int64_t planned = 0;
    for (const MemoryItem& i : plan.items)
      if (i.name == "master weights" || i.name == "optimizer state" || i.name == "gradient slices") planned += i.bytes;
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(z.stateBytes[static_cast<std::size_t>(r)], 16 * z.owned[static_cast<std::size_t>(r)]);
      EXPECT_EQ(z.owned[static_cast<std::size_t>(r)], (n + world - 1) / world) << "rank " << r;
      EXPECT_NEAR(static_cast<double>(planned), static_cast<double>(z.stateBytes[static_cast<std::size_t>(r)]),
                  16.0 * world)
          << "the plan's per-rank state";
    }
  }
}

// Shards saved by 2 ranks after 3 steps resume at 1 and at 3 ranks: the next
// two steps' losses and the parameters equal those of the 2 ranks going on.
TEST(Zero, ShardsSavedAtOneWorldSizeResumeAtAnother) {
  const fs::path dir = scratchDir("zero-shards");
  const Outcome first = train(2, 2, 0, 3, nullptr, dir, /*loadFirst=*/false);
  ASSERT_EQ(first.losses.size(), 3u);
  ASSERT_TRUE(fs::exists(dir / "optimizer-rank0.pt"));
  ASSERT_TRUE(fs::exists(dir / "optimizer-rank1.pt"));
  // The two ranks going on from the same state.
  const Outcome going = train(2, 2, 3, 2, &first.params, dir, /*loadFirst=*/true);
  const Outcome fresh = train(2, 2, 3, 2, &first.params);  // moments lost: a different path
  for (int world : {1, 3}) {
    SCOPED_TRACE("resumed at world " + std::to_string(world));
    const Outcome resumed = train(world, 2, 3, 2, &first.params, dir, /*loadFirst=*/true);
    ASSERT_EQ(resumed.losses.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) EXPECT_NEAR(resumed.losses[i], going.losses[i], 1e-5) << "step " << i + 4;
    EXPECT_LT(maxDiff(resumed.params, going.params), 1e-5);
  }
  EXPECT_GT(maxDiff(fresh.params, going.params), 1e-4) << "the moments matter: the resume test can fail";
}

// A missing shard is an error naming what is missing, not silent zeros.
TEST(Zero, AMissingShardIsRefused) {
  const fs::path dir = scratchDir("zero-missing");
  const Outcome first = train(2, 1, 0, 1, nullptr, dir, false);
  fs::remove(dir / "optimizer-rank1.pt");
  torch::manual_seed(1);
  CausalLm model(tinyModelConfig());
  ShardedAdamW opt(model.parameters(), model.parameters(), options(), 1, nullptr);
  try {
    opt.load({dir / "optimizer-rank0.pt"});
    FAIL() << "a missing shard must be refused";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("cover"), std::string::npos) << e.message();
  }
}

}  // namespace latentlab::test
