// Benchmark of `latentlab-engine generate` against transformers `generate`
// (peers/generate_hf_peer.py): batch 1, a prompt of about 512 tokens, 64
// greedy tokens, on a SmolLM-135M-shaped model (random weights, fp32 on
// disk, a BPE tokenizer trained on the Python tutorial), in fp32 and bf16,
// and in fp32 over an int4 cache against transformers' QuantizedCache.
// Each side is a process of its own, alternating, best of two; beside them
// the bandwidth limit: the bytes a decode step reads (every weight once, the
// embedding as the output layer) over a read bandwidth measured here.
#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench_process.h"
#include "bench_util.h"
#include "io/tokenizer.h"
#include "latentlab/architectures.h"
#include "latentlab/engine.h"

namespace latentlab::bench {
namespace fs = std::filesystem;

namespace {

// GB/s of summing a 1 GiB fp32 tensor (best of three), on the benchmark's threads.
double readBandwidth() {
  auto t = torch::ones({std::int64_t{1} << 28}, torch::kFloat32);
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile double s = t.sum().item<double>();
    (void)s;
    best = std::min(best, secondsSince(t0));
  }
  return static_cast<double>(t.numel() * 4) / best / 1e9;
}

// The last JSON object printed by a run, or null.
nlohmann::json lastJson(const std::string& output) {
  nlohmann::json out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() != '{') continue;
    try {
      out = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
    }
  }
  return out;
}

void benchGenerate(BenchReport& report) {
  if (benchOptions().device != "cpu") return;
  const fs::path root = fs::temp_directory_path() / ("latentlab-bench-generate-" + std::to_string(::getpid()));
  fs::create_directories(root);
  const fs::path dir = root / "smollm-135m";
  const ModelConfig cfg = builtinArchitecture("smollm-135m", 0);
  initModel(cfg, dir, 3, DType::F32);
  trainTutorialTokenizer(dir / "tokenizer.json");
  // About 512 tokens of the tutorial (the tokenizer makes about 4 characters a token).
  const fs::path prompt = root / "prompt.txt";
  {
    std::ifstream in(tutorialFiles().front());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(prompt) << text.substr(0, 1620);
  }
  const int newTokens = benchOptions().quick ? 16 : 64;
  const double bandwidth = readBandwidth();
  const fs::path log = root / "child.log";
  for (const std::string dtype : {"f32", "bf16"}) {
    const std::vector<std::string> engine = {
        LATENTLAB_ENGINE_EXE, "generate",      "--model",          dir.string(),
        "--prompt-file",      prompt.string(), "--max-new-tokens", std::to_string(newTokens),
        "--greedy",           "--json",        "--dtype",          dtype};
    const std::vector<std::string> peer = {
        LATENTLAB_PYTHON, LATENTLAB_SOURCE_DIR "/tests/bench/peers/generate_hf_peer.py",
        dir.string(),     prompt.string(),
        "--new",          std::to_string(newTokens),
        "--dtype",        dtype};
    double ourDecode = 0, ourPrefill = 0, theirDecode = 0, theirPrefill = 0;
    std::int64_t promptTokens = 0;
    for (int round = 0; round < 2; ++round) {
      const ChildRun e = runChild(engine, log);
      const nlohmann::json ej = lastJson(e.output);
      const ChildRun p = runChild(peer, log);
      const nlohmann::json pj = lastJson(p.output);
      if (e.status != 0 || p.status != 0 || !ej.is_object() || !pj.is_object()) {
        report.add({"generate", "smollm-135m " + dtype + " vs transformers", 0, "skipped",
                    std::string("a process failed: ") + (e.status != 0 ? "engine" : "peer") +
                        " (is transformers installed in the test venv?)"});
        return;
      }
      ourDecode = std::max(ourDecode, ej.value("decode_tokens_per_s", 0.0));
      ourPrefill = std::max(ourPrefill, ej.value("prefill_tokens_per_s", 0.0));
      theirDecode = std::max(theirDecode, pj.value("decode_tokens_per_s", 0.0));
      theirPrefill = std::max(theirPrefill, pj.value("prefill_tokens_per_s", 0.0));
      promptTokens = ej.value("prompt_tokens", std::int64_t{0});
    }
    const double bytesPerToken = static_cast<double>(countParameters(cfg)) *
                                 (dtype == "bf16" ? 2.0 : 4.0);  // the embedding read as the output layer
    const double limit = bandwidth * 1e9 / bytesPerToken;
    const std::string what = "smollm-135m " + dtype + ", batch 1, " + std::to_string(promptTokens) + "-token prompt, " +
                             std::to_string(newTokens) + " greedy tokens";
    report.add({"generate", "decode, latentlab-engine generate (" + dtype + ")", ourDecode, "tok/s",
                what + "; " + fixed(100.0 * ourDecode / limit, 0) + "% of the bandwidth limit"});
    report.add({"generate", "decode, transformers generate (" + dtype + ")", theirDecode, "tok/s",
                what + "; engine " + fixed(ourDecode / theirDecode, 2) + "x"});
    report.add({"generate", "decode bandwidth limit (" + dtype + ")", limit, "tok/s",
                fixed(bytesPerToken / 1e6, 0) + " MB a token over " + fixed(bandwidth, 1) + " GB/s read here"});
    report.add({"generate", "prefill, latentlab-engine generate (" + dtype + ")", ourPrefill, "tok/s",
                "engine " + fixed(ourPrefill / theirPrefill, 2) + "x transformers"});
    report.add({"generate", "prefill, transformers generate (" + dtype + ")", theirPrefill, "tok/s", "best of 2 runs"});
  }
  // A quantized cache against transformers' QuantizedCache (both backends it
  // offers for int4: quanto and HQQ), the same groups of 64 and window of the
  // newest 128 tokens; the plain caches beside them in the same rounds.
  {
    const std::vector<std::string> engine = {LATENTLAB_ENGINE_EXE,
                                             "generate",
                                             "--model",
                                             dir.string(),
                                             "--prompt-file",
                                             prompt.string(),
                                             "--max-new-tokens",
                                             std::to_string(newTokens),
                                             "--greedy",
                                             "--json",
                                             "--dtype",
                                             "f32",
                                             "--kv-quant",
                                             "int4",
                                             "--kv-group",
                                             "64",
                                             "--kv-residual",
                                             "128"};
    const auto peer = [&](const std::string& backend) {
      return std::vector<std::string>{LATENTLAB_PYTHON, LATENTLAB_SOURCE_DIR "/tests/bench/peers/generate_hf_peer.py",
                                      dir.string(),     prompt.string(),
                                      "--new",          std::to_string(newTokens),
                                      "--dtype",        "f32",
                                      "--kv-quant",     "int4",
                                      "--kv-group",     "64",
                                      "--kv-residual",  "128",
                                      "--backend",      backend};
    };
    double ours = 0, quanto = 0, hqq = 0;
    std::int64_t bytes = 0;
    bool peersRan = true;
    for (int round = 0; round < 2; ++round) {
      const ChildRun e = runChild(engine, log);
      const nlohmann::json ej = lastJson(e.output);
      if (e.status != 0 || !ej.is_object()) {
        report.add({"generate", "decode, latentlab-engine generate (f32, int4 cache)", 0, "skipped",
                    "the engine failed: " + e.output.substr(0, 200)});
        peersRan = false;
        break;
      }
      ours = std::max(ours, ej.value("decode_tokens_per_s", 0.0));
      bytes = ej.value("kv_cache_bytes", std::int64_t{0});
      for (auto [backend, best] : {std::pair{"quanto", &quanto}, std::pair{"hqq", &hqq}}) {
        const ChildRun p = runChild(peer(backend), log);
        const nlohmann::json pj = lastJson(p.output);
        if (p.status != 0 || !pj.is_object()) {
          peersRan = false;
          continue;
        }
        *best = std::max(*best, pj.value("decode_tokens_per_s", 0.0));
      }
    }
    if (ours > 0) {
      report.add({"generate", "decode, latentlab-engine generate (f32, int4 cache)", ours, "tok/s",
                  "groups of 64, the newest 128 tokens exact; cache " +
                      fixed(static_cast<double>(bytes) / 1048576.0, 2) + " MiB at the end"});
      for (auto [backend, best] : {std::pair{"quanto", quanto}, std::pair{"HQQ", hqq}}) {
        if (best > 0) {
          report.add({"generate", std::string("decode, transformers generate (f32, ") + backend + " int4 cache)", best,
                      "tok/s", "QuantizedCache, the same groups and window; engine " + fixed(ours / best, 2) + "x"});
        }
      }
      if (!peersRan) {
        report.add({"generate", "transformers quantized cache", 0, "skipped",
                    "a peer failed (are optimum-quanto and hqq installed in the test venv?)"});
      }
    }
  }
  std::error_code ec;
  fs::remove_all(root, ec);
}

}  // namespace

LATENTLAB_BENCH("generate", benchGenerate);

}  // namespace latentlab::bench
