// SVD factorisation of [Wk_nope; Wv]: exact at full rank, error falling as
// d_kv grows, for joint and split.
#include <gtest/gtest.h>

#include "convert/low_rank.h"
#include "convert_test_util.h"
#include "latentlab/error.h"

namespace latentlab::test {

TEST(LowRank, FullRankFactorsReproduceTheMatrix) {
  torch::manual_seed(1);
  auto w = torch::randn({24, 40}, torch::kFloat64);
  auto f = svdFactor(w, 24);
  EXPECT_EQ(f.down.sizes(), (std::vector<std::int64_t>{24, 40}));
  EXPECT_EQ(f.up.sizes(), (std::vector<std::int64_t>{24, 24}));
  EXPECT_LT(maxAbsDiff(torch::matmul(f.up, f.down), w), 1e-12);
  EXPECT_LT(relativeError(w, f), 1e-14);
  // W_down has orthonormal rows (V_r^T).
  EXPECT_LT(maxAbsDiff(torch::matmul(f.down, f.down.t()), torch::eye(24, torch::kFloat64)), 1e-12);
  EXPECT_THROW(svdFactor(w, 25), Error);
  // fp32 models factorise in fp32.
  EXPECT_EQ(svdFactor(w.to(torch::kFloat32), 4).up.scalar_type(), torch::kFloat32);
}

TEST(LowRank, ReconstructionErrorFallsWithDkvAndVanishesAtFullRank) {
  for (SvdMethod svd : {SvdMethod::Joint, SvdMethod::Split}) {
    for (TinyShape s : {TinyShape{.kvHeads = 4}, TinyShape{.kvHeads = 2}}) {
      auto cfg = tinyConfig(s);
      auto model = randomModel(cfg, torch::kFloat64, 4);
      const int r = 2, full = fullRankDkv(cfg, r, svd);
      if (svd == SvdMethod::Split) truncateValueRank(*model, static_cast<std::int64_t>(cfg.numKvHeads) * full);
      std::vector<double> previous;
      for (int dKv = 1; dKv <= full; ++dKv) {
        ConversionStats stats;
        NullProgress progress;
        CancelToken cancel;
        convertModel(*model, mlaOptions(RopeStrategy::High, r, dKv, svd), {}, progress, cancel, &stats);
        ASSERT_EQ(stats.reconstructionError.size(), static_cast<std::size_t>(cfg.numLayers));
        for (std::size_t l = 0; l < previous.size(); ++l) {
          EXPECT_LT(stats.reconstructionError[l], previous[l]) << "d_kv " << dKv << " layer " << l;
        }
        previous = stats.reconstructionError;
      }
      for (double e : previous) EXPECT_LT(e, 1e-12) << "full rank d_kv " << full;
    }
  }
}

}  // namespace latentlab::test
