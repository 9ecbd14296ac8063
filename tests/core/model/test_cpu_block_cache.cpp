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

// oneDNN's bf16 GEMMs allocate scratch through raw_allocate and free it
// through the allocator's raw deleter: with the cache installed they run (and
// free their blocks) like without it, counted or not.
TEST(CpuBlockCache, Bf16MatmulsThroughOneDnnAllocateAndFreeThroughIt) {
  installCpuBlockCache();
  torch::manual_seed(4);
  auto a = torch::randn({256, 512}), b = torch::randn({512, 384});
  const auto want = torch::mm(a, b);
  for (bool counted : {false, true}) {
    setCpuBlockCacheCountsSmallBlocks(counted);
    const auto live = cpuBlockCacheStats().liveBytes;
    {
      auto got = torch::mm(a.to(torch::kBFloat16), b.to(torch::kBFloat16)).to(torch::kFloat32);
      EXPECT_LT((got - want).abs().max().item<double>(), 0.5);
    }
    EXPECT_EQ(cpuBlockCacheStats().liveBytes, live) << "every block came back (counted " << counted << ")";
    setCpuBlockCacheCountsSmallBlocks(false);
  }
}

// With small blocks counted, the live bytes are every byte of the tensors.
TEST(CpuBlockCache, CountedSmallBlocksAddToTheLiveBytes) {
  installCpuBlockCache();
  setCpuBlockCacheCountsSmallBlocks(true);
  const auto before = cpuBlockCacheStats().liveBytes;
  {
    auto t = torch::empty({1000});   // 4000 bytes
    EXPECT_EQ(cpuBlockCacheStats().liveBytes - before, 4000);
    resetCpuBlockCachePeak();
  }
  EXPECT_EQ(cpuBlockCacheStats().liveBytes, before);
  EXPECT_EQ(cpuBlockCacheStats().peakLiveBytes, before + 4000);
  setCpuBlockCacheCountsSmallBlocks(false);
  {
    auto t = torch::empty({1000});
    EXPECT_EQ(cpuBlockCacheStats().liveBytes, before) << "off: small blocks are not counted";
  }
}

}  // namespace latentlab::test
