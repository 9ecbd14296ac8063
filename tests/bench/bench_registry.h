// A tiny registry so each benchmark file adds its own section to the one
// `latentlab-bench` program. A section prints rows via BenchReport.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace latentlab::bench {

struct BenchRow {
  std::string section;  // e.g. "tokenizer"
  std::string name;     // e.g. "encode demo corpus"
  double value;
  std::string unit;  // e.g. "MB/s"
  std::string note;  // shapes, ratios
};

class BenchReport {
 public:
  void add(BenchRow row);
  const std::vector<BenchRow>& rows() const { return m_rows; }

 private:
  std::vector<BenchRow> m_rows;
};

// Command-line options every section reads: where the models run and in what
// precision (--device cpu|cuda[:N], --dtype f32|bf16), and --quick for a
// smaller sweep (the GPU check and smoke runs).
struct BenchOptions {
  std::string device = "cpu";
  std::string dtype = "f32";
  bool quick = false;
};
const BenchOptions& benchOptions();
BenchOptions& mutableBenchOptions();

using BenchFn = std::function<void(BenchReport&)>;

struct BenchRegistrar {
  BenchRegistrar(const std::string& section, BenchFn fn);
};

std::vector<std::pair<std::string, BenchFn>>& benchSections();

}  // namespace latentlab::bench

#define LATENTLAB_BENCH(section, fn) static ::latentlab::bench::BenchRegistrar latentlab_bench_##fn(section, fn)
