// The two identities of algorithms.md §2.2 / §5 in float64: full rank with
// full RoPE reproduces the original model; full rank with partial RoPE
// reproduces the partial-RoPE model (an independent reference).
#include <gtest/gtest.h>

#include <iostream>

#include "convert_test_util.h"

namespace latentlab::test {

namespace {
const std::vector<TinyShape> kShapes{
    TinyShape{.kvHeads = 4},                         // MHA
    TinyShape{.kvHeads = 2},                         // GQA
    TinyShape{.kvHeads = 1, .attentionBias = true},  // MQA with q/k/v/o biases
    TinyShape{.kvHeads = 2, .modelType = "qwen2"},   // Qwen2: q/k/v biases, none on o
};
}  // namespace

TEST(Identity, ReferenceWithEveryPairKeptIsTheOriginalModel) {
  auto base = randomModel(tinyConfig({.kvHeads = 2}), torch::kFloat64, 1);
  auto ref = partialRopeReference(*base, selectRopePairs(base->config(), RopeStrategy::Full, 0));
  torch::NoGradGuard g;
  auto ids = torch::randint(0, 128, {2, 20}, torch::kInt64);
  EXPECT_LT(maxAbsDiff(ref->forward(ids), base->forward(ids)), 1e-10);
}

TEST(Identity, FullRankFullRopeReproducesOriginalLogits) {
  double worst = 0.0;
  for (const auto& s : kShapes) {
    auto cfg = tinyConfig(s);
    auto base = randomModel(cfg, torch::kFloat64, 2);
    auto mla =
        convertModel(*base, mlaOptions(RopeStrategy::Full, 0, fullRankDkv(cfg, cfg.headDim / 2, SvdMethod::Joint)));
    torch::NoGradGuard g;
    auto ids = torch::randint(0, s.vocab, {2, 24}, torch::kInt64);
    const double diff = maxAbsDiff(mla->forward(ids), base->forward(ids));
    EXPECT_LT(diff, 1e-9) << "kv heads " << s.kvHeads << " " << s.modelType;
    worst = std::max(worst, diff);
  }
  std::cout << "[ identity ] full rank + full RoPE: max |logit diff| = " << worst << "\n";
}

TEST(Identity, FullRankPartialRopeReproducesPartialRopeReference) {
  double worst = 0.0;
  for (SvdMethod svd : {SvdMethod::Joint, SvdMethod::Split}) {
    for (const auto& s : kShapes) {
      for (RopeStrategy rope : {RopeStrategy::High, RopeStrategy::Low, RopeStrategy::Uniform, RopeStrategy::TwoNorm}) {
        auto cfg = tinyConfig(s);
        auto base = randomModel(cfg, torch::kFloat64, 3);
        const int r = 2, dKv = fullRankDkv(cfg, r, svd);
        if (svd == SvdMethod::Split) truncateValueRank(*base, static_cast<std::int64_t>(cfg.numKvHeads) * dKv);
        auto calib = randomBatches(s.vocab, 2, 2, 12, 7);
        ConversionStats stats;
        NullProgress progress;
        CancelToken cancel;
        auto mla = convertModel(*base, mlaOptions(rope, r, dKv, svd), calib, progress, cancel, &stats);
        auto ref = partialRopeReference(*base, stats.pairs);
        torch::NoGradGuard g;
        auto ids = torch::randint(0, s.vocab, {2, 24}, torch::kInt64);
        auto expected = ref->forward(ids);
        const double diff = maxAbsDiff(mla->forward(ids), expected);
        EXPECT_LT(diff, 1e-9) << ropeStrategyName(rope) << " kv " << s.kvHeads
                              << (svd == SvdMethod::Split ? " split" : " joint");
        // Not vacuous: dropping RoPE from most pairs changes the model.
        EXPECT_GT(maxAbsDiff(base->forward(ids), expected), 1e-3);
        worst = std::max(worst, diff);
      }
    }
  }
  std::cout << "[ identity ] full rank + partial RoPE vs reference: max |logit diff| = " << worst << "\n";
}

// Llama-3.x (llama3), yarn, linear and dynamic-NTK RoPE: the partial-RoPE
// selection works on the scaled frequencies and the converted config carries
// the scaling, so both identities hold as for plain RoPE (24 tokens past the
// context of 16, where dynamic NTK rescales).
TEST(Identity, ScaledRopeVariantsKeepBothIdentities) {
  double worst = 0.0;
  for (const auto& [name, cfg] : scaledRopeConfigs({.kvHeads = 2})) {
    auto base = randomModel(cfg, torch::kFloat64, 5);
    torch::NoGradGuard g;
    auto ids = torch::randint(0, 128, {2, 24}, torch::kInt64);
    auto full =
        convertModel(*base, mlaOptions(RopeStrategy::Full, 0, fullRankDkv(cfg, cfg.headDim / 2, SvdMethod::Joint)));
    EXPECT_EQ(full->config().ropeScaling.describe(), cfg.ropeScaling.describe()) << name;
    double diff = maxAbsDiff(full->forward(ids), base->forward(ids));
    EXPECT_LT(diff, 1e-9) << name << " full rope";
    worst = std::max(worst, diff);
    for (RopeStrategy rope : {RopeStrategy::High, RopeStrategy::Low, RopeStrategy::TwoNorm}) {
      auto calib = randomBatches(128, 2, 2, 12, 7);
      ConversionStats stats;
      NullProgress progress;
      CancelToken cancel;
      auto mla = convertModel(*base, mlaOptions(rope, 2, fullRankDkv(cfg, 2, SvdMethod::Joint)), calib, progress,
                              cancel, &stats);
      auto expected = partialRopeReference(*base, stats.pairs)->forward(ids);
      diff = maxAbsDiff(mla->forward(ids), expected);
      EXPECT_LT(diff, 1e-9) << name << " " << ropeStrategyName(rope);
      EXPECT_GT(maxAbsDiff(base->forward(ids), expected), 1e-3) << name;  // not vacuous
      worst = std::max(worst, diff);
    }
  }
  std::cout << "[ identity ] scaled RoPE (llama3, yarn, linear, dynamic): max |logit diff| = " << worst << "\n";
}

}  // namespace latentlab::test
