// Incremental decoding with the KV cache equals the full-sequence forward.
#include <gtest/gtest.h>

#include "model_test_util.h"

namespace latentlab::test {

TEST(Decode, CachedIncrementalDecodeEqualsFullForward) {
  for (TinyShape s :
       {TinyShape{.kvHeads = 4}, TinyShape{.kvHeads = 2}, TinyShape{.kvHeads = 1, .attentionBias = true}}) {
    auto model = randomModel(tinyConfig(s), torch::kFloat64, 21);
    torch::NoGradGuard g;
    auto ids = torch::randint(0, s.vocab, {2, 24}, torch::kInt64);
    auto full = model->forward(ids);
    KvCache cache(s.layers);
    // A prefill chunk of 10, a chunk of 5, then one token at a time.
    std::vector<torch::Tensor> parts;
    parts.push_back(model->forward(ids.narrow(1, 0, 10), &cache));
    parts.push_back(model->forward(ids.narrow(1, 10, 5), &cache));
    for (int t = 15; t < 24; ++t) parts.push_back(model->forward(ids.narrow(1, t, 1), &cache));
    EXPECT_EQ(cache.length(), 24);
    EXPECT_LT(maxAbsDiff(torch::cat(parts, 1), full), 1e-10);
    // The cache holds K and V: 2 * n_kv * d_h elements per token per layer.
    EXPECT_EQ(cache.bytes(), 2LL * 2 * s.kvHeads * (s.hidden / s.heads) * 24 * s.layers * 8);
  }
}

}  // namespace latentlab::test
