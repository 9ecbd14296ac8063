// latentlab-bench: runs every registered section (or those named on the
// command line) and prints a table, or JSON with --json.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "bench_registry.h"
#include "latentlab/engine.h"
#include "model/torch_util.h"

namespace latentlab::bench {

void BenchReport::add(BenchRow row) {
  std::fprintf(stderr, "  %-12s %-48s %14.4g %-10s %s\n", row.section.c_str(), row.name.c_str(), row.value,
               row.unit.c_str(), row.note.c_str());
  m_rows.push_back(std::move(row));
}

BenchOptions& mutableBenchOptions() {
  static BenchOptions options;
  return options;
}
const BenchOptions& benchOptions() {
  return mutableBenchOptions();
}

std::vector<std::pair<std::string, BenchFn>>& benchSections() {
  static std::vector<std::pair<std::string, BenchFn>> sections;
  return sections;
}

BenchRegistrar::BenchRegistrar(const std::string& section, BenchFn fn) {
  benchSections().emplace_back(section, std::move(fn));
}

}  // namespace latentlab::bench

int main(int argc, char** argv) {
  latentlab::reexecWithPassiveOpenMpWait(argv);
  latentlab::installCpuBlockCache();
  using namespace latentlab::bench;
  bool json = false;
  std::set<std::string> only;
  for (int i = 1; i < argc; ++i) {
    BenchOptions& options = mutableBenchOptions();
    if (std::strcmp(argv[i], "--json") == 0)
      json = true;
    else if (std::strcmp(argv[i], "--quick") == 0)
      options.quick = true;
    else if ((std::strcmp(argv[i], "--device") == 0 || std::strcmp(argv[i], "--dtype") == 0) && i + 1 < argc) {
      std::string& target = std::strcmp(argv[i], "--device") == 0 ? options.device : options.dtype;
      target = argv[++i];
    } else if (std::strcmp(argv[i], "--help") == 0) {
      std::printf(
          "usage: latentlab-bench [--json] [--quick] [--device cpu|cuda[:N]] [--dtype f32|bf16] [SECTION...]\n"
          "Rows stream to stderr as they are measured; the table (or JSON) goes to stdout.\nsections:");
      for (const auto& [name, fn] : benchSections()) std::printf(" %s", name.c_str());
      std::printf("\n");
      return 0;
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "latentlab-bench: unknown option %s (see --help)\n", argv[i]);
      return 2;
    } else
      only.insert(argv[i]);
  }
  for (const std::string& name : only) {
    bool known = false;
    for (const auto& section : benchSections()) known = known || section.first == name;
    if (!known) {
      std::fprintf(stderr, "latentlab-bench: unknown section '%s' (see --help)\n", name.c_str());
      return 2;
    }
  }
  const BenchOptions& options = benchOptions();
  if (options.dtype != "f32" && options.dtype != "bf16") {
    std::fprintf(stderr, "--dtype %s: expected f32 or bf16\n", options.dtype.c_str());
    return 2;
  }
  BenchReport report;
  int failed = 0;
  for (const auto& [name, fn] : benchSections()) {
    if (!only.empty() && !only.count(name)) continue;
    std::fprintf(stderr, "[%s]\n", name.c_str());
    try {
      fn(report);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "  %s failed: %s\n", name.c_str(), e.what());
      ++failed;
    }
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : report.rows())
      out.push_back({{"section", r.section},
                     {"name", r.name},
                     {"value", r.value},
                     {"unit", r.unit},
                     {"note", r.note},
                     {"device", options.device},
                     {"dtype", options.dtype}});
    std::cout << out.dump(2) << "\n";
  } else {
    std::printf("| section | measurement | value | unit | note |\n|---|---|---:|---|---|\n");
    for (const auto& r : report.rows())
      std::printf("| %s | %s | %.4g | %s | %s |\n", r.section.c_str(), r.name.c_str(), r.value, r.unit.c_str(),
                  r.note.c_str());
  }
  return failed == 0 ? 0 : 1;
}
