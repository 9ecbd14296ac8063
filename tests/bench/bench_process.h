// Benchmarks that time another program (the engine's own CLI, a Python peer)
// run it as a process of its own: wall time, peak resident memory, output.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace latentlab::bench {

// A command run as a process of its own: its wall time, peak resident
// memory and output (stdout and stderr).
struct ChildRun {
  int status = -1;
  double seconds = 0;
  double peakMiB = 0;
  std::string output;
};

inline ChildRun runChild(const std::vector<std::string>& argv, const std::filesystem::path& outFile) {
  ChildRun r;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, outFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) return r;
  // The child's own high-water mark, read from /proc while it runs (the
  // rusage of a spawned child counts the spawning process's pages).
  int status = 0;
  const std::string statusFile = "/proc/" + std::to_string(pid) + "/status";
  for (;;) {
    std::ifstream st(statusFile);
    for (std::string line; std::getline(st, line);) {
      if (line.rfind("VmHWM:", 0) == 0) r.peakMiB = std::max(r.peakMiB, std::stod(line.substr(6)) / 1024.0);
    }
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    usleep(20000);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  posix_spawn_file_actions_destroy(&actions);
  std::ifstream in(outFile);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  return r;
}

}  // namespace latentlab::bench
