// RoPE pair selection: the static lists of algorithms.md §2.1 and S_2-norm on
// a model whose pair norms are constructed.
#include <gtest/gtest.h>

#include "convert_test_util.h"
#include "latentlab/error.h"

namespace latentlab::test {

namespace {
ModelConfig headDim64() {
  return tinyConfig({.hidden = 256, .heads = 4, .kvHeads = 2, .layers = 3});
}
}  // namespace

TEST(RopeSelection, StaticStrategiesMatchTheDocumentedLists) {
  const auto cfg = headDim64();
  ASSERT_EQ(cfg.headDim, 64);
  const std::vector<int> uniform{0, 8, 16, 24}, high{0, 1, 2, 3}, low{28, 29, 30, 31};
  for (auto [strategy, expected] : {std::pair{RopeStrategy::Uniform, uniform}, std::pair{RopeStrategy::High, high},
                                    std::pair{RopeStrategy::Low, low}}) {
    auto pairs = selectRopePairs(cfg, strategy, 4);
    ASSERT_EQ(pairs.size(), 3u);
    for (const auto& layer : pairs) {
      ASSERT_EQ(layer.size(), 2u);
      for (const auto& head : layer) EXPECT_EQ(head, expected) << ropeStrategyName(strategy);
    }
  }
  auto full = selectRopePairs(cfg, RopeStrategy::Full, 0);
  EXPECT_EQ(full[0][0].size(), 32u);
  EXPECT_EQ(full[0][0].back(), 31);
}

TEST(RopeSelection, ImpossibleRIsRejected) {
  const auto cfg = headDim64();
  EXPECT_THROW(selectRopePairs(cfg, RopeStrategy::Uniform, 5), Error);  // 5 does not divide 32
  EXPECT_THROW(selectRopePairs(cfg, RopeStrategy::High, 33), Error);
  EXPECT_THROW(selectRopePairs(cfg, RopeStrategy::Low, 0), Error);
  EXPECT_THROW(selectRopePairs(cfg, RopeStrategy::TwoNorm, 4, nullptr), Error);
  EXPECT_EQ(parseRopeStrategy("2-norm"), RopeStrategy::TwoNorm);
  EXPECT_THROW(parseRopeStrategy("medium"), Error);
}

// Zeroes q/k rows except the chosen pairs of each KV head (query heads use
// their group's pairs), with a different scale per KV head and per pair.
TEST(RopeSelection, TwoNormPicksConstructedPairsPerKvHead) {
  auto cfg = tinyConfig({.hidden = 64, .heads = 4, .kvHeads = 2, .layers = 2});  // d_h 16: 8 pairs
  auto model = randomModel(cfg, torch::kFloat64, 3);
  const int dh = cfg.headDim, half = dh / 2, G = cfg.kvGroupSize();
  // [layer][kvHead] chosen pairs.
  const PairSelection chosen{{{1, 6}, {0, 3}}, {{2, 7}, {4, 5}}};
  {
    torch::NoGradGuard g;
    for (int l = 0; l < cfg.numLayers; ++l) {
      auto* a = dynamic_cast<LlamaAttention*>(model->layer(l)->self_attn.get());
      auto wq = a->q_proj->weight, wk = a->k_proj->weight;
      wq.mul_(1e-3);  // tiny everywhere, large on the chosen pairs
      wk.mul_(1e-3);
      for (int kv = 0; kv < cfg.numKvHeads; ++kv) {
        const double scale = kv == 0 ? 1.0 : 10.0;
        for (int p : chosen[l][kv]) {
          for (int dim : {p, p + half}) {
            wk[kv * dh + dim].mul_(1e3 * scale);
            for (int h = kv * G; h < (kv + 1) * G; ++h) wq[h * dh + dim].mul_(1e3 * scale);
          }
        }
      }
    }
  }
  NullProgress progress;
  CancelToken cancel;
  auto batches = randomBatches(cfg.vocabSize, 3, 2, 16, 5);
  auto norms = calibratePairNorms(*model, batches, progress, cancel);
  EXPECT_EQ(norms.tokens, 3 * 2 * 16);
  for (auto score : {TwoNormScore::Product, TwoNormScore::Sum}) {
    auto pairs = selectRopePairs(cfg, RopeStrategy::TwoNorm, 2, &norms, score);
    EXPECT_EQ(pairs, chosen) << twoNormScoreName(score);
  }
  // Query heads of a group take their KV head's pairs in the converted q_proj.
  auto mla = convertModel(*model, mlaOptions(RopeStrategy::TwoNorm, 2, 8), batches);
  for (int l = 0; l < cfg.numLayers; ++l) {
    auto* a = dynamic_cast<LlamaAttention*>(model->layer(l)->self_attn.get());
    auto* m = dynamic_cast<MlaAttention*>(mla->layer(l)->self_attn.get());
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->pairs(), chosen[l]);
    for (int h = 0; h < cfg.numHeads; ++h) {
      const auto& kept = chosen[l][h / G];
      for (int i = 0; i < 2; ++i) {
        EXPECT_TRUE(m->q_proj->weight[h * dh + i].equal(a->q_proj->weight[h * dh + kept[i]]));
        EXPECT_TRUE(m->q_proj->weight[h * dh + 2 + i].equal(a->q_proj->weight[h * dh + kept[i] + half]));
      }
    }
  }
}

TEST(RopeSelection, CalibratedNormsAreMeanPairNormsOfPreRopeProjections) {
  auto cfg = tinyConfig({.hidden = 32, .heads = 4, .kvHeads = 1, .layers = 1, .attentionBias = true});
  auto model = randomModel(cfg, torch::kFloat64, 9);
  auto batches = randomBatches(cfg.vocabSize, 2, 3, 7, 1);
  NullProgress progress;
  CancelToken cancel;
  auto norms = calibratePairNorms(*model, batches, progress, cancel);
  torch::NoGradGuard g;
  auto* a = dynamic_cast<LlamaAttention*>(model->layer(0)->self_attn.get());
  auto h = model->layer(0)->input_layernorm(model->model->embed_tokens(torch::cat(batches, 0)));
  const int dh = cfg.headDim, half = dh / 2;
  auto k = a->k_proj(h).view({-1, dh});  // (N, dh): one KV head
  auto expected = (k.narrow(1, 0, half).square() + k.narrow(1, half, half).square()).sqrt().mean(0);
  EXPECT_LT(maxAbsDiff(norms.key[0][0], expected), 1e-12);
  auto q = a->q_proj(h).view({-1, cfg.numHeads, dh});
  auto expectedQ = (q.narrow(2, 0, half).square() + q.narrow(2, half, half).square()).sqrt().mean(0);
  EXPECT_LT(maxAbsDiff(norms.query[0], expectedQ), 1e-12);
  // GQA: query scores are summed within the group before the product.
  auto scores = twoNormScores(norms, 1, TwoNormScore::Product);
  EXPECT_LT(maxAbsDiff(scores[0][0], expectedQ.sum(0) * expected), 1e-12);
  CancelToken cancelled;
  cancelled.request();
  EXPECT_THROW(calibratePairNorms(*model, batches, progress, cancelled), Error);
}

}  // namespace latentlab::test
