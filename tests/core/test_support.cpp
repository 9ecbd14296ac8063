// Scratch folders and Python peer invocation for the tests.
#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {
struct ScratchRegistry {
  std::vector<fs::path> dirs;
  ~ScratchRegistry() {
    if (std::getenv("LATENTLAB_KEEP_TEST_FILES") != nullptr) return;
    for (const auto& d : dirs) {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  }
};
ScratchRegistry& registry() {
  static ScratchRegistry r;
  return r;
}
}  // namespace

fs::path scratchDir(const std::string& name) {
  static std::mt19937_64 rng(std::random_device{}());
  std::string leaf = "latentlab-test-";
  leaf.append(name).append("-").append(std::to_string(::getpid())).append("-").append(std::to_string(rng() % 1000000));
  fs::path dir = fs::temp_directory_path() / leaf;
  fs::remove_all(dir);
  fs::create_directories(dir);
  registry().dirs.push_back(dir);
  return dir;
}

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

int runCommand(const std::string& command, std::string* output) {
  std::string cmd = command + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buf{};
  std::string out;
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = ::pclose(pipe);
  if (output != nullptr) *output = out;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return -1;
}

int runPython(const std::string& script, const std::vector<std::string>& args, std::string* output) {
  // One thread for the reference side too: fixed reduction order, and no
  // oversubscription when ctest runs suites in parallel.
  std::string cmd = "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 " + shellQuote(LATENTLAB_PYTHON) + " " +
                    shellQuote(std::string(LATENTLAB_TEST_PYDIR) + "/" + script);
  for (const auto& a : args) cmd += " " + shellQuote(a);
  return runCommand(cmd, output);
}

bool pythonHas(const std::string& module) {
  static std::mutex mu;
  static std::map<std::string, bool> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(module);
  if (it != cache.end()) return it->second;
  std::string cmd = shellQuote(LATENTLAB_PYTHON) + " -c " + shellQuote("import " + module);
  bool ok = runCommand(cmd) == 0;
  cache[module] = ok;
  return ok;
}

}  // namespace latentlab::test
