// Helpers for the tests that drive the engine binary: writing a file and
// starting the engine in the background with its output in a log.
#pragma once

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace latentlab::test {

inline const std::string kEngine = LATENTLAB_ENGINE_EXE;

inline void writeFile(const std::filesystem::path& p, const std::string& s) {
  std::ofstream out(p);
  out << s;
}

// Starts `latentlab-engine args...` with stdout and stderr in `log`.
inline pid_t spawnEngine(const std::vector<std::string>& args, const std::filesystem::path& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    ::dup2(fileno(f), 1);
    ::dup2(fileno(f), 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kEngine.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kEngine.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace latentlab::test
