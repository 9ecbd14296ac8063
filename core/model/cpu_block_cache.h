// A CPU allocator for LibTorch that keeps large freed blocks for reuse.
//
// glibc serves every allocation above 32 MiB with a fresh mmap and returns it
// on free, so each training step of a real vocabulary (the logits alone are
// B*T*V floats, 200 MB for SmolLM at B4 T256) faults in and zero-fills its
// large tensors again: the train benchmark saw 16% of a SmolLM step in the
// kernel clearing pages. This allocator hands blocks of 1 MiB and more back
// from a cache of freed blocks (the smallest that holds a request, up to twice
// its size); smaller blocks go to LibTorch's default allocator. The cache
// holds at most the installer's bound (and an eighth of the memory available
// at start), and never more than the large tensors held at once since it was
// last emptied, so the process's large blocks stay within twice what the job
// needs; past that it frees its least recently freed blocks first. Passes
// whose sizes change (evaluation batches) empty it when they end.
#pragma once

#include <cstddef>
#include <cstdint>

#include "latentlab/engine.h"  // installCpuBlockCache

namespace latentlab {

struct CpuBlockCacheStats {
  std::int64_t hits = 0, misses = 0;  // large allocations served from the cache / from the system
  std::int64_t cachedBytes = 0;       // freed bytes held for reuse now
  std::int64_t liveBytes = 0;         // large blocks handed out and not yet freed
  std::int64_t peakLiveBytes = 0;     // the most liveBytes reached since the last resetCpuBlockCachePeak
};

// installCpuBlockCache (latentlab/engine.h) makes the cache LibTorch's CPU
// allocator, once per process; later calls do nothing.
bool cpuBlockCacheInstalled();
CpuBlockCacheStats cpuBlockCacheStats();
// Returns every cached block to the system.
void releaseCpuBlockCache();
// Starts peakLiveBytes again from the bytes live now (what a step holds at its
// worst: weights, gradients, optimizer state and activations of 1 MiB or more).
void resetCpuBlockCachePeak();
// On: blocks under 1 MiB allocated from now on count in liveBytes and
// peakLiveBytes too (each carries a small context for that), so the peak is
// every byte LibTorch holds on the CPU: for measuring memory against the
// planner's prediction. Off (the default) costs nothing.
void setCpuBlockCacheCountsSmallBlocks(bool on);
// Sets the most freed bytes kept (dropping what is cached now) and returns
// the bound it replaces; 0 when the cache is not installed.
std::size_t setCpuBlockCacheLimit(std::size_t bytes);
// Off: new large blocks come from LibTorch's default allocator, as without the
// cache (blocks already handed out still come back to it). For the benchmark's
// before/after and the tests.
void setCpuBlockCacheEnabled(bool enabled);

}  // namespace latentlab
