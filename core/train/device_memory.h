// The most memory a device held during a stretch of training, for the run
// summary beside the memory plan's prediction: on CUDA the caching
// allocator's peak of allocated bytes, on the CPU the block cache's peak of
// live bytes (every allocation counted while a run measures).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace latentlab {

// Starts measuring on `device` from what it holds now.
void resetPeakMemory(torch::Device device);
// Bytes at the peak since the reset; 0 when the device cannot say.
std::int64_t peakMemoryBytes(torch::Device device);

}  // namespace latentlab
