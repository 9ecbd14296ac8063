// latentlab-bench: runs every registered section (or those named on the
// command line) and prints a table, or JSON with --json.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "bench_registry.h"

namespace latentlab::bench {

void BenchReport::add(BenchRow row) {
  std::fprintf(stderr, "  %-12s %-48s %14.4g %-10s %s\n", row.section.c_str(), row.name.c_str(), row.value,
               row.unit.c_str(), row.note.c_str());
  m_rows.push_back(std::move(row));
}

std::vector<std::pair<std::string, BenchFn>>& benchSections() {
  static std::vector<std::pair<std::string, BenchFn>> sections;
  return sections;
}

BenchRegistrar::BenchRegistrar(const std::string& section, BenchFn fn) {
  benchSections().emplace_back(section, std::move(fn));
}

} // namespace latentlab::bench

int main(int argc, char** argv) {
  using namespace latentlab::bench;
  bool json = false;
  std::set<std::string> only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) json = true;
    else if (std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: latentlab-bench [--json] [SECTION...]\nsections:");
      for (const auto& [name, fn] : benchSections()) std::printf(" %s", name.c_str());
      std::printf("\n");
      return 0;
    } else only.insert(argv[i]);
  }
  BenchReport report;
  for (const auto& [name, fn] : benchSections()) {
    if (!only.empty() && !only.count(name)) continue;
    std::fprintf(stderr, "[%s]\n", name.c_str());
    try {
      fn(report);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "  %s failed: %s\n", name.c_str(), e.what());
    }
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : report.rows())
      out.push_back({{"section", r.section}, {"name", r.name}, {"value", r.value}, {"unit", r.unit}, {"note", r.note}});
    std::cout << out.dump(2) << "\n";
  } else {
    std::printf("| section | measurement | value | unit | note |\n|---|---|---:|---|---|\n");
    for (const auto& r : report.rows())
      std::printf("| %s | %s | %.4g | %s | %s |\n", r.section.c_str(), r.name.c_str(), r.value, r.unit.c_str(), r.note.c_str());
  }
  return 0;
}
