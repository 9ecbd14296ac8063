// The threads that share a decode step's kernels (model/decode_linear.h,
// model/decode_attention.h). A step calls them a few hundred times, tens of
// microseconds apart, each with tens of microseconds of work per thread:
// LibTorch's OpenMP threads go to sleep between such calls, and waking them
// costs about as much as the work (a decode step on two cores ran no faster
// than on one). These workers keep looking for the next call for a short
// while after each (kDecodeThreadsSpin), yielding the core while they look,
// and only then sleep, so an idle process costs nothing; and they take the
// work in chunks, so a worker whose core is busy elsewhere holds up at most
// the chunk it started.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace latentlab {

// How long a worker keeps looking for the next call before it sleeps.
constexpr std::chrono::microseconds kDecodeThreadsSpin{300};

// fn(begin, end) over [0, n): one call, on the calling thread, when n <=
// grain or LibTorch runs one thread; else contiguous chunks (four for each of
// up to at::get_num_threads() threads sharing ranges of at least `grain`
// items) taken in turn by the calling thread and the workers awake. Returns
// when every chunk is done. A call made while another is running (from a
// second thread, or from inside fn) runs fn(0, n) on its own thread.
void decodeParallelFor(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace latentlab
