// The CPU block cache (model/cpu_block_cache.h) as LibTorch's CPU allocator:
// a freed large tensor's block serves the next tensor of that size, small
// tensors and the switched-off cache bypass it, and tensors computed in reused
// blocks are right.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

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
    auto t = torch::empty({1000});  // 4000 bytes
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

// Requests that shrink pass by pass (multiple-choice batches scored longest
// first) reuse the larger blocks freed before them, so the cache holds one
// block, not one of every size.
TEST(CpuBlockCache, ShrinkingRequestsReuseLargerBlocksAndTheCacheStaysSmall) {
  installCpuBlockCache();
  releaseCpuBlockCache();
  const auto before = cpuBlockCacheStats();
  for (int mib = 64; mib >= 2; --mib) {
    auto t = torch::empty({static_cast<std::int64_t>(mib) << 18});  // mib MiB of floats
    t.fill_(1.0f);
  }
  const auto after = cpuBlockCacheStats();
  // A new block at each halving only: 64, 32, 16, 8, 4 and 2 MiB.
  EXPECT_EQ(after.misses - before.misses, 6);
  EXPECT_EQ(after.hits - before.hits, 57);
  EXPECT_LE(after.cachedBytes, 64 << 20) << "never more than the 64 MiB held at once";
  // A block more than twice the request is not handed out for it.
  releaseCpuBlockCache();
  { auto big = torch::empty({16 << 18}); }
  const auto misses = cpuBlockCacheStats().misses;
  { auto small = torch::empty({4 << 18}); }
  EXPECT_EQ(cpuBlockCacheStats().misses, misses + 1);
  releaseCpuBlockCache();
}

// Past its bound the cache frees its least recently freed blocks first, and
// never holds more than the bound.
TEST(CpuBlockCache, TheBoundFreesTheOldestBlocksFirst) {
  installCpuBlockCache();
  const std::size_t old = setCpuBlockCacheLimit(std::size_t{40} << 20);
  {
    std::vector<torch::Tensor> held;
    for (int mib : {2, 4, 8, 16, 32}) held.push_back(torch::empty({static_cast<std::int64_t>(mib) << 18}));
    held.clear();  // freed 2, 4, 8, 16, 32 MiB in that order
  }
  const auto s = cpuBlockCacheStats();
  EXPECT_EQ(s.cachedBytes, 32 << 20) << "2, 4, 8 and 16 MiB went to make room for the 32 MiB block";
  setCpuBlockCacheLimit(old);
  EXPECT_EQ(cpuBlockCacheStats().cachedBytes, 0);
}

// Requests that grow step by step (batches of more and more rows) leave
// their smaller blocks behind: the cache holds no more than the tensors did
// at their most, not one block of every size.
TEST(CpuBlockCache, GrowingRequestsLeaveNoTrailOfSmallerBlocks) {
  installCpuBlockCache();
  releaseCpuBlockCache();
  std::int64_t most = 0;
  for (int step = 0; step < 100; ++step) {
    auto t =
        torch::empty({(std::int64_t{8} << 18) + step * (std::int64_t{1} << 16)});  // 8 MiB, then 256 KiB more a step
    t.fill_(1.0f);
    most = std::max<std::int64_t>(most, t.nbytes());
  }
  EXPECT_LE(cpuBlockCacheStats().cachedBytes, most + (std::int64_t{1} << 16));
  releaseCpuBlockCache();
}
}  // namespace latentlab::test
