// Helpers shared by the model benchmarks: the device and dtype chosen on the
// command line, device-aware timing, and the same-process GEMM reference.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "bench_registry.h"
#include "model/torch_util.h"

namespace latentlab::bench {

inline torch::Device benchDevice() { return parseDevice(benchOptions().device); }
inline bool benchBf16() { return benchOptions().dtype == "bf16"; }

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

// The process's resident memory now and its high-water mark, in bytes, from
// /proc/self/status (-1 where there is none); resetPeakResident() lowers the
// mark to the current size (Linux: "5" into /proc/self/clear_refs).
inline double procStatusBytes(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) != 0) continue;
    std::istringstream in(line.substr(std::char_traits<char>::length(field)));
    double kib = -1;
    in >> kib;
    return kib >= 0 ? kib * 1024.0 : -1;
  }
  return -1;
}
inline double residentBytes() { return procStatusBytes("VmRSS:"); }
inline double peakResidentBytes() { return procStatusBytes("VmHWM:"); }
inline void resetPeakResident() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

} // namespace latentlab::bench
