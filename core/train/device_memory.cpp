// Peak device memory (see device_memory.h). The CUDA half reads the caching
// allocator's statistics; it needs the CUDA headers of the torch wheel and is
// compiled without them as "unknown".
#include "train/device_memory.h"

#include "model/cpu_block_cache.h"

#if LATENTLAB_HAVE_CUDA_HEADERS
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace latentlab {

void resetPeakMemory(torch::Device device) {
  if (device.is_cpu()) {
    setCpuBlockCacheCountsSmallBlocks(true);
    resetCpuBlockCachePeak();
    return;
  }
#if LATENTLAB_HAVE_CUDA_HEADERS
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
#endif
}

std::int64_t peakMemoryBytes(torch::Device device) {
  if (device.is_cpu()) return cpuBlockCacheInstalled() ? cpuBlockCacheStats().peakLiveBytes : 0;
#if LATENTLAB_HAVE_CUDA_HEADERS
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  return 0;
}

}  // namespace latentlab
