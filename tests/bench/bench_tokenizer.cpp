// Tokenizer benchmark: trains (or reuses a cached) 8192-token BPE on the Python
// documentation's reST sources, then measures encode throughput and tokens.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "bench_registry.h"
#include "common/file_util.h"
#include "io/tokenizer.h"
#include "latentlab/error.h"

namespace latentlab::bench {
namespace {
namespace fs = std::filesystem;

// The Debian python3.11-doc sources; LATENTLAB_BENCH_CORPUS overrides.
std::vector<fs::path> corpusFiles() {
  const char* env = std::getenv("LATENTLAB_BENCH_CORPUS");
  fs::path root = env ? fs::path(env) : fs::path("/usr/share/doc/python3.11/html/_sources");
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw Error(ErrorCode::Io, root.string() + ": corpus folder not found",
                "Install the Debian package python3.11-doc or set LATENTLAB_BENCH_CORPUS to a folder of text.");
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it) {
    std::string name = it->path().filename().string();
    bool text = name.size() > 4 && (name.ends_with(".rst.txt") || (env && name.ends_with(".txt")));
    if (it->is_regular_file() && text) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void benchTokenizer(BenchReport& report) {
  constexpr int kVocab = 8192;
  std::vector<fs::path> files = corpusFiles();
  std::vector<std::string> texts;
  std::uint64_t bytes = 0;
  for (const auto& f : files) {
    texts.push_back(readTextFile(f));
    bytes += texts.back().size();
  }
  double mb = static_cast<double>(bytes) / 1e6;
  fs::path cacheDir = fs::temp_directory_path() / "latentlab-bench";
  fs::create_directories(cacheDir);
  fs::path cached = cacheDir / ("tokenizer-" + std::to_string(kVocab) + "-" + std::to_string(files.size()) + "-" +
                                std::to_string(bytes) + ".json");
  if (!fs::exists(cached)) {
    NullProgress progress;
    CancelToken cancel;
    BpeTrainOptions opts;
    opts.vocabSize = kVocab;
    auto t0 = std::chrono::steady_clock::now();
    trainBpeTokenizer(files, opts, cached, progress, cancel);
    double s = secondsSince(t0);
    report.add({"tokenizer", "train BPE " + std::to_string(kVocab) + " (1 thread)", s, "s",
                std::to_string(files.size()) + " files, " + std::to_string(mb).substr(0, 5) + " MB"});
  }
  auto t0 = std::chrono::steady_clock::now();
  Tokenizer tok = Tokenizer::fromFile(cached);
  report.add({"tokenizer", "load tokenizer.json", secondsSince(t0) * 1e3, "ms", cached.filename().string()});

  for (const char* pass : {"encode python docs (cold word cache)", "encode python docs (warm word cache)"}) {
    std::uint64_t tokens = 0;
    t0 = std::chrono::steady_clock::now();
    for (const auto& t : texts) tokens += tok.encode(t).size();
    double s = secondsSince(t0);
    report.add({"tokenizer", pass, mb / s, "MB/s",
                std::to_string(tokens) + " tokens, " +
                    std::to_string(static_cast<double>(bytes) / tokens).substr(0, 4) + " bytes/token"});
  }
  std::uint64_t decoded = 0;
  t0 = std::chrono::steady_clock::now();
  for (const auto& t : texts) decoded += tok.decode(tok.encode(t)).size();
  report.add({"tokenizer", "encode+decode round trip", mb / secondsSince(t0), "MB/s",
              decoded == bytes ? "identity holds" : "MISMATCH"});
}

}  // namespace

LATENTLAB_BENCH("tokenizer", benchTokenizer);

}  // namespace latentlab::bench
