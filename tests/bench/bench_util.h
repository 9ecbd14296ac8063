// Helpers shared by the model benchmarks: the device and dtype chosen on the
// command line, device-aware timing, and the same-process GEMM reference.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_registry.h"
#include "io/tokenizer.h"
#include "model/torch_util.h"

namespace latentlab::bench {

inline torch::Device benchDevice() {
  return parseDevice(benchOptions().device);
}
inline bool benchBf16() {
  return benchOptions().dtype == "bf16";
}

// Waits for queued kernels so wall-clock time covers them (no-op on CPU).
inline void syncDevice(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

inline double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class Fn>
double timed(const torch::Device& device, Fn&& fn) {
  syncDevice(device);
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  syncDevice(device);
  return secondsSince(t0);
}

// The fastest of `rounds` timed calls after one untimed warm-up call.
template <class Fn>
double bestOf(const torch::Device& device, int rounds, Fn&& fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) best = std::min(best, timed(device, fn));
  return best;
}

inline std::string fixed(double v, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The Python tutorial's reST sources (Debian's python3.11-doc), sorted: the
// text the model benchmarks tokenize and prompt with.
inline std::vector<std::filesystem::path> tutorialFiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/doc/python3.11/html/_sources/tutorial"))
    files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// A byte-level BPE tokenizer of 2,048 tokens trained on them, written to `out`.
inline void trainTutorialTokenizer(const std::filesystem::path& out) {
  BpeTrainOptions bpe;
  bpe.vocabSize = 2048;
  NullProgress quiet;
  CancelToken cancel;
  trainBpeTokenizer(tutorialFiles(), bpe, out, quiet, cancel);
}

}  // namespace latentlab::bench
