// The memory planner against the bytes a real training step holds: every
// CPU allocation counted (the block cache's counting mode) through the
// trainer's own step, for each attention kind, precision, recompute and
// gradient accumulation, on shapes other than the ones the coefficients were
// measured on. The prediction must be within 15% of the measured peak.
#include <gtest/gtest.h>

#include <cstdio>

#include "latentlab/architectures.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "latentlab/memory_plan.h"
#include "latentlab/run_spec.h"
#include "model/cpu_block_cache.h"
#include "model/llama.h"
#include "train/model_builder.h"
#include "train/optimizer.h"
#include "train/train_step.h"

namespace latentlab::test {

namespace {

// The most bytes LibTorch holds during the second of two training steps
// (the first creates the optimiser state).
std::int64_t measurePeak(const ModelConfig& cfg, const std::string& precision, int B, int T, bool recompute,
                         int accum) {
  installCpuBlockCache();
  setCpuBlockCacheCountsSmallBlocks(true);
  const auto live0 = cpuBlockCacheStats().liveBytes;
  std::int64_t peak = 0;
  {
    torch::manual_seed(1);
    auto model = std::make_shared<CausalLm>(cfg);
    initializeWeights(*model, 0.02, false);
    model->train();
    model->setRecompute(recompute);
    std::optional<MasterWeights> master;
    if (precision == "bf16") {
      master.emplace(model->parameters());
      model->to(torch::kBFloat16);
      master->bind(model->parameters());
    }
    auto params = master ? master->masters() : model->parameters();
    auto opts = torch::optim::AdamWOptions(1e-4);
    FusedAdamW opt(adamWParamGroups(params, opts), opts);
    StepSettings st;
    st.gradAccum = accum;
    st.master = master ? &*master : nullptr;
    st.autocastBf16 = precision == "bf16-mixed";
    auto next = [&] { return torch::randint(0, cfg.vocabSize, {B, T + 1}, torch::kInt64); };
    trainStep(*model, opt, params, next, st);
    resetCpuBlockCachePeak();
    trainStep(*model, opt, params, next, st);
    peak = cpuBlockCacheStats().peakLiveBytes - live0;
  }
  setCpuBlockCacheCountsSmallBlocks(false);
  return peak;
}

// A shape unlike the calibration's (h 256, I 688, 4 heads of 64, V 2048).
ModelConfig testShape() {
  ModelConfig c = builtinArchitecture("demo-gqa", 3000);
  c.hiddenSize = 192;
  c.intermediateSize = 520;
  c.numHeads = 6;
  c.numKvHeads = 2;
  c.headDim = 32;
  c.numLayers = 3;
  c.maxPositionEmbeddings = 1024;
  return c;
}

RunSpec specFor(const std::string& precision, int B, int T, bool recompute, int accum) {
  RunSpec s;
  s.kind = RunKind::Pretrain;
  s.architecture = "demo-gqa";
  s.precision = parseChoice<Precision>(precision, "test precision");
  s.microBatch = B;
  s.data.seqLen = T;
  s.recompute = recompute;
  s.gradAccum = accum;
  s.device = "cpu";
  return s;
}

struct Case {
  std::string name;
  ModelConfig cfg;
  std::string precision = "fp32";
  int B = 4, T = 96;
  bool recompute = false;
  int accum = 1;
};

ModelConfig converted(ModelConfig c, int dKv, int pairs, const std::string& svd) {
  MlaConversion m;
  m.ropeStrategy = RopeStrategy::High;
  m.ropePairs = pairs;
  m.dKv = dKv;
  m.svdMethod = parseChoice<SvdMethod>(svd, "test svd");
  std::vector<int> kept;
  for (int i = 0; i < pairs; ++i) kept.push_back(i);
  m.pairs.assign(static_cast<std::size_t>(c.numLayers), std::vector<std::vector<int>>(c.numKvHeads, kept));
  c.mla = m;
  return c;
}

ModelConfig variant(const ModelConfig& c, const std::string& attention) {
  AttentionOptions o;
  o.match = "none";
  return attentionVariant(c, attention, o, "test");
}

// The families' layer options on the test shape.
ModelConfig family(ModelConfig c, const std::string& which) {
  c.qkNorm = true;
  if (which == "gemma3") {
    c.normPlusOne = c.sandwichNorms = c.scaleEmbeddings = c.geluTanh = true;
    c.queryScalar = 32.0;
    c.slidingWindow = 48;
    c.slidingLayers = {0, 1};
    c.localRopeTheta = 10000.0;
  }
  if (which == "moe")
    c.moe =
        MoeConfig{.experts = 8, .topK = 2, .intermediate = 130, .normTopK = true, .sparseStep = 1, .denseLayers = {}};
  return c;
}

}  // namespace

// The new families' parameter counts equal the published totals of their
// built-in shapes (the planner's weights, the Training tab's figure).
TEST(MemoryPlan, BuiltInShapesOfTheNewFamiliesCountTheirPublishedParameters) {
  EXPECT_EQ(countParameters(builtinArchitecture("qwen3-0.6b")), 596049920);       // Qwen3-0.6B
  EXPECT_EQ(countParameters(builtinArchitecture("smollm3-3b")), 3075098624);      // SmolLM3-3B
  EXPECT_EQ(countParameters(builtinArchitecture("gemma-3-1b")), 999885952);       // Gemma-3-1B
  EXPECT_EQ(countParameters(builtinArchitecture("qwen3-30b-a3b")), 30532122624);  // Qwen3-30B-A3B, every expert
}

TEST(MemoryPlan, PredictsTheMeasuredPeakWithinFifteenPercent) {
  const ModelConfig base = testShape();
  ModelConfig mha = base;
  mha.numKvHeads = 6;
  std::vector<Case> cases = {
      {"gqa", base},
      {"gqa recompute", base, "fp32", 4, 96, true},
      {"gqa grad_accum 2", base, "fp32", 4, 96, false, 2},
      {"gqa bf16", base, "bf16"},
      {"gqa bf16-mixed", base, "bf16-mixed"},
      {"gqa bf16 recompute", base, "bf16", 4, 96, true},
      {"gqa B8 T200", base, "fp32", 8, 200},
      {"mha", mha},
      {"mha2mla joint", converted(mha, 8, 2, "joint")},
      {"mha2mla split", converted(base, 16, 4, "split")},
      {"mla", variant(base, "mla")},
      {"mla recompute", variant(base, "mla"), "fp32", 4, 96, true},
      {"gla-2", variant(base, "gla-2")},
      {"mlra-4", variant(base, "mlra-4")},
      // The 2025-26 families' layers: QK norms, Gemma's norms and GeGLU, a sparse MLP.
      {"qwen3", family(base, "qwen3")},
      {"gemma3", family(base, "gemma3")},
      {"gemma3 bf16", family(base, "gemma3"), "bf16"},
      {"qwen3-moe", family(base, "moe")},
      {"qwen3-moe recompute", family(base, "moe"), "fp32", 4, 96, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::int64_t measured = measurePeak(c.cfg, c.precision, c.B, c.T, c.recompute, c.accum);
    const MemoryPlan plan = planMemory(c.cfg, specFor(c.precision, c.B, c.T, c.recompute, c.accum), 0);
    const double error = static_cast<double>(plan.peakBytes - measured) / static_cast<double>(measured);
    std::printf("%-20s measured %9.2f MiB  planned %9.2f MiB (%+.1f%%, %s)\n", c.name.c_str(), measured / 1048576.0,
                plan.peakBytes / 1048576.0, 100 * error, plan.peakPhase.c_str());
    EXPECT_LT(std::fabs(error), 0.15) << describeMemoryPlan(plan);
    std::int64_t sum = 0;
    for (const MemoryItem& i : plan.items) sum += i.bytes;
    EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(plan.peakBytes), 8.0) << "the items add up to the peak";
  }
}

// The real shape the papers start from: SmolLM-135M (30 layers, 49152-token
// vocabulary, random weights) at micro-batches 1 and 4 of 128 tokens, with
// and without recompute (at 4 x 128 tokens the activations set the peak).
TEST(MemoryPlan, PredictsASmolLm135mShapedRunWithinFifteenPercent) {
  const ModelConfig smol = builtinArchitecture("smollm-135m");
  for (bool recompute : {false, true}) {
    for (int B : {1, 4}) {
      SCOPED_TRACE("B" + std::to_string(B) + (recompute ? " recompute" : ""));
      const std::int64_t measured = measurePeak(smol, "fp32", B, 128, recompute, 1);
      const MemoryPlan plan = planMemory(smol, specFor("fp32", B, 128, recompute, 1), 0);
      const double error = static_cast<double>(plan.peakBytes - measured) / static_cast<double>(measured);
      std::printf("smollm-135m B%d T128%s: measured %.1f MiB, planned %.1f MiB (%+.1f%%)\n", B,
                  recompute ? " recompute" : "", measured / 1048576.0, plan.peakBytes / 1048576.0, 100 * error);
      EXPECT_LT(std::fabs(error), 0.15) << describeMemoryPlan(plan);
    }
  }
}

// The largest micro-batch is the boundary: it fits, one more does not. A
// plan without the available memory has no verdict.
TEST(MemoryPlan, LargestMicroBatchIsTheBoundary) {
  const ModelConfig c = builtinArchitecture("smollm-135m");
  RunSpec s = specFor("bf16", 8, 2048, false, 1);
  s.device = "cuda:0";
  const std::int64_t gib = std::int64_t{1} << 30;
  const MemoryPlan plan = planMemory(c, s, 24 * gib);
  ASSERT_GT(plan.largestMicroBatch, 0);
  RunSpec at = s, over = s;
  at.microBatch = plan.largestMicroBatch;
  over.microBatch = plan.largestMicroBatch + 1;
  EXPECT_LE(planMemory(c, at, 24 * gib).peakBytes, 24 * gib);
  EXPECT_GT(planMemory(c, over, 24 * gib).peakBytes, 24 * gib);
  EXPECT_GT(plan.peakWithRecompute, 0);
  EXPECT_LT(plan.peakWithRecompute, plan.peakBytes);
  EXPECT_TRUE(planMemory(c, s, 0).fits()) << "unknown memory: no verdict";
  EXPECT_FALSE(planMemory(c, s, 0).known());
  // A 7B model in fp32 does not fit one 80 GiB card even at micro-batch 1.
  RunSpec big = specFor("fp32", 1, 4096, true, 1);
  big.device = "cuda:0";
  const MemoryPlan seven = planMemory(builtinArchitecture("llama-2-7b"), big, 80 * gib);
  EXPECT_FALSE(seven.fits());
  EXPECT_EQ(seven.largestMicroBatch, 0);
  EXPECT_NE(describeMemoryPlan(seven).find("does not fit"), std::string::npos) << describeMemoryPlan(seven);
  // What would fit: nothing on one device for 7B (16 B per parameter is
  // 108 GB); fewer sequences per micro-batch (and more accumulation) for
  // SmolLM-1.7B on a 48 GiB card.
  EXPECT_NE(seven.suggestion.find("needs a larger device"), std::string::npos) << seven.suggestion;
  RunSpec mid = specFor("bf16-mixed", 8, 4096, false, 1);
  mid.device = "cuda:0";
  const MemoryPlan oneSeven = planMemory(builtinArchitecture("smollm-1.7b"), mid, 48 * gib);
  ASSERT_FALSE(oneSeven.fits());
  EXPECT_EQ(oneSeven.suggestion.rfind("micro_batch ", 0), 0u) << oneSeven.suggestion;
  EXPECT_NE(oneSeven.suggestion.find("keeps the batch"), std::string::npos) << oneSeven.suggestion;
}

// A job that asks for "cuda" goes to the free GPU with the most memory that
// holds it, waits while only a busy GPU would, and goes to the biggest free
// GPU (to be refused there with the numbers) when none ever could.
TEST(MemoryPlan, ChoosesTheGpuForAJobThatAsksForCuda) {
  const std::uint64_t gib = std::uint64_t{1} << 30;
  const std::vector<DeviceInfo> devices = {{"cpu", "CPU", 64 * gib, 60 * gib},
                                           {"cuda:0", "A", 80 * gib, 10 * gib},
                                           {"cuda:1", "B", 24 * gib, 23 * gib},
                                           {"cuda:2", "C", 48 * gib, 47 * gib}};
  RunSpec s = specFor("bf16", 1, 2048, true, 1);
  s.device = "cuda";
  const ModelConfig big = builtinArchitecture("smollm-1.7b");
  const std::int64_t need = planMemory(
                                big,
                                [&] {
                                  RunSpec one = s;
                                  one.device = "cuda:0";
                                  return one;
                                }(),
                                0)
                                .peakBytes;
  ASSERT_GT(need, std::int64_t{23} * static_cast<std::int64_t>(gib)) << "the test needs a run only cuda:2 holds now";
  ASSERT_LT(need, std::int64_t{47} * static_cast<std::int64_t>(gib));
  EXPECT_EQ(chooseGpu(s, big, 0, devices, {}), "cuda:2");
  EXPECT_EQ(chooseGpu(s, big, 0, devices, {"cuda:2"}), "") << "cuda:0 (80 GiB) holds it once it is free: wait";
  const ModelConfig small = builtinArchitecture("demo-gqa");
  EXPECT_EQ(chooseGpu(s, small, 0, devices, {"cuda:2"}), "cuda:1") << "the free GPU with the most memory";
  RunSpec huge = specFor("fp32", 64, 4096, false, 1);
  huge.device = "cuda";
  EXPECT_EQ(chooseGpu(huge, builtinArchitecture("llama-2-7b"), 0, devices, {"cuda:1"}), "cuda:2")
      << "no GPU ever holds it: the biggest free one, where the engine refuses it";
  EXPECT_EQ(chooseGpu(s, small, 0, {devices[0]}, {}), "cuda") << "no GPUs";
  // Llama-2-7B with ZeRO-2 on four 80 GiB cards: one card cannot hold it, so
  // the fewest cards that can, and a wait while too few are free.
  std::vector<DeviceInfo> node = {{"cpu", "CPU", 512 * gib, 500 * gib}};
  for (int i = 0; i < 4; ++i) node.push_back({"cuda:" + std::to_string(i), "H", 80 * gib, 79 * gib});
  RunSpec seven = specFor("bf16", 1, 4096, true, 1);
  seven.device = "cuda";
  seven.zeroStage = 2;
  const ModelConfig llama = builtinArchitecture("llama-2-7b");
  const std::string spread = chooseGpu(seven, llama, 0, node, {});
  EXPECT_NE(spread.find(','), std::string::npos) << spread;
  RunSpec placed = seven;
  placed.device = spread;
  EXPECT_TRUE(planMemory(llama, placed, 79 * static_cast<std::int64_t>(gib)).fits()) << spread;
  EXPECT_EQ(chooseGpu(seven, llama, 0, node, {"cuda:0", "cuda:1", "cuda:2"}), "") << "one free card: wait";
  seven.zeroStage = 0;
  const std::string alone = chooseGpu(seven, llama, 0, node, {});
  EXPECT_TRUE(alone.rfind("cuda:", 0) == 0 && alone.find(',') == std::string::npos)
      << "without ZeRO it never fits: one card, where the engine refuses it: " << alone;
}

// The planned config of a conversion carries its latent dims; impossible
// settings name the field.
TEST(MemoryPlan, PlannedConfigOfAConversionAndItsErrors) {
  RunSpec s;
  s.kind = RunKind::Pretrain;
  s.architecture = "demo-gqa";
  s.attention = "mla";
  ModelConfig c = plannedModelConfig(s);
  ASSERT_TRUE(c.latent.has_value());
  s.architecture = "no-such-arch";
  EXPECT_THROW(plannedModelConfig(s), Error);
}

}  // namespace latentlab::test
