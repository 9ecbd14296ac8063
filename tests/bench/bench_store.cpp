// Run store benchmarks: metric rows/s from one batched writer while a reader
// thread polls rowsSince like a live chart, and the downsampled query time of
// a 1M-point series.
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <thread>

#include "bench_registry.h"
#include "latentlab/run_store.h"

namespace latentlab::bench {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <class Fn>
double medianSeconds(int repeats, Fn&& fn) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = Clock::now();
    fn();
    times.push_back(secondsSince(t0));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void benchIngest(const fs::path& db, BenchReport& report) {
  constexpr std::int64_t kSteps = 200000;  // 2 metrics per step: 400k rows
  std::int64_t runId = RunStore(db).createRun(std::nullopt, "ingest", "train", "{}", "cpu");
  std::atomic<bool> done{false};
  std::uint64_t polls = 0, rowsRead = 0;
  std::thread reader([&] {
    RunStore store(db);
    std::int64_t seen = -1;
    for (;;) {
      bool last = done.load();
      auto rows = store.rowsSince(runId, "train/loss", seen);
      if (!rows.empty()) seen = rows.back().step;
      rowsRead += rows.size();
      ++polls;
      if (last) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  RunStore store(db);
  auto t0 = Clock::now();
  std::uint64_t batches = 0;
  {
    MetricWriter w = store.metricWriter(runId);  // defaults: 256 rows or 500 ms
    for (std::int64_t s = 0; s < kSteps; ++s) {
      w.add("train/loss", s, s * 4096, s * 0.01, 3.0 + std::sin(s * 1e-3));
      w.add("train/lr", s, s * 4096, s * 0.01, 1e-3);
    }
    w.flush();
    batches = w.committedBatches();
  }
  double elapsed = secondsSince(t0);
  done = true;
  reader.join();
  report.add({"store", "metric ingest, 1 writer + polling reader", 2.0 * kSteps / elapsed, "rows/s",
              std::to_string(2 * kSteps) + " rows in " + std::to_string(batches) + " batches; reader " +
                  std::to_string(polls) + " polls, " + std::to_string(rowsRead) + " rows"});
}

void benchDownsample(const fs::path& db, BenchReport& report) {
  constexpr std::int64_t kPoints = 1000000;
  RunStore store(db);
  std::int64_t runId = store.createRun(std::nullopt, "big", "train", "{}", "cpu");
  auto t0 = Clock::now();
  {
    MetricWriter w = store.metricWriter(runId, {65536, std::chrono::hours(1)});
    for (std::int64_t s = 0; s < kPoints; ++s) {
      w.add("loss", s, s * 4096, s * 0.01, 2.0 + std::exp(-s * 1e-5) + 0.1 * std::sin(s * 0.37));
    }
  }
  report.add({"store", "metric ingest, 64k-row batches, no reader", kPoints / secondsSince(t0), "rows/s",
              "1M-point series setup"});

  std::size_t rows = 0;
  std::clock_t cpu0 = std::clock();
  double full = medianSeconds(5, [&] { rows = store.series(runId, "loss", 0, kPoints, 2000).size(); });
  double cpuMs = 1e3 * static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC / 5;
  report.add({"store", "series 1M points -> 1000 buckets (min/max)", full * 1e3, "ms",
              std::to_string(rows) + " rows, median of 5, " + std::to_string(static_cast<int>(cpuMs)) + " ms CPU"});
  double zoom = medianSeconds(5, [&] { rows = store.series(runId, "loss", 400000, 500000, 2000).size(); });
  report.add({"store", "series zoom 100k of 1M -> 1000 buckets", zoom * 1e3, "ms", std::to_string(rows) + " rows"});
  double raw = medianSeconds(5, [&] { rows = store.series(runId, "loss", 500000, 501999, 2000).size(); });
  report.add({"store", "series raw 2000 points of 1M", raw * 1e3, "ms", std::to_string(rows) + " rows"});
  double tail = medianSeconds(5, [&] { rows = store.rowsSince(runId, "loss", kPoints - 257).size(); });
  report.add({"store", "rowsSince last 256 of 1M", tail * 1e3, "ms", std::to_string(rows) + " rows"});
}

void benchStore(BenchReport& report) {
  fs::path dir = fs::temp_directory_path() / ("latentlab-bench-store-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  benchIngest(dir / "ingest.db", report);
  benchDownsample(dir / "series.db", report);
}

}  // namespace

LATENTLAB_BENCH("store", benchStore);

}  // namespace latentlab::bench
