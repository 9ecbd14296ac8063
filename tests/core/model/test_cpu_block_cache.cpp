// The CPU block cache (model/cpu_block_cache.h) as LibTorch's CPU allocator:
// a freed large tensor's block serves the next tensor of that size, small
// tensors and the switched-off cache bypass it, and tensors computed in reused
// blocks are right.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/cpu_block_cache.h"

namespace latentlab::test {

TEST(CpuBlockCache, AFreedLargeBlockServesTheNextTensorOfItsSize) {
  installCpuBlockCache();
  ASSERT_TRUE(cpuBlockCacheInstalled());
  releaseCpuBlockCache();
  const auto before = cpuBlockCacheStats();
  void* first = nullptr;
  {
    auto t = torch::empty({1 << 20});  // 4 MiB
    first = t.data_ptr();
  }
  EXPECT_GE(cpuBlockCacheStats().cachedBytes, 4 << 20);
  auto again = torch::empty({(1 << 20) - 7});  // rounds to the same block size
  EXPECT_EQ(again.data_ptr(), first);
  const auto after = cpuBlockCacheStats();
  EXPECT_EQ(after.hits - before.hits, 1);
  EXPECT_EQ(after.misses - before.misses, 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(again.data_ptr()) % 64, 0u);  // LibTorch's alignment
}

TEST(CpuBlockCache, SmallTensorsAndTheDisabledCacheBypassIt) {
  installCpuBlockCache();
  releaseCpuBlockCache();
  const auto before = cpuBlockCacheStats();
  { auto small = torch::ones({1000}); }
  EXPECT_EQ(cpuBlockCacheStats().misses, before.misses);
  setCpuBlockCacheEnabled(false);
  { auto big = torch::ones({1 << 20}); }
  EXPECT_EQ(cpuBlockCacheStats().misses, before.misses);
  EXPECT_EQ(cpuBlockCacheStats().cachedBytes, 0);
  setCpuBlockCacheEnabled(true);
}

TEST(CpuBlockCache, ReusedBlocksComputeLikeFreshOnes) {
  installCpuBlockCache();
  torch::manual_seed(3);
  auto a = torch::randn({512, 1024}), b = torch::randn({1024, 512});
  const auto want = torch::mm(a.to(torch::kFloat64), b.to(torch::kFloat64));
  for (int i = 0; i < 3; ++i) {  // the product's block is reused on the second and third pass
    auto got = torch::mm(a, b);
    EXPECT_LT((got.to(torch::kFloat64) - want).abs().max().item<double>(), 1e-3);
  }
}

}  // namespace latentlab::test
