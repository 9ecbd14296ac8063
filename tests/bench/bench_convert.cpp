// Benchmarks of MHA2MLA conversion (each RoPE strategy) on a SmolLM-135M
// shaped random model, and decode speed and cache bytes of the original vs
// the converted model with naive and absorbed latent attention.
#include <torch/torch.h>

#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench_registry.h"
#include "convert/converter.h"
#include "latentlab/architectures.h"
#include "latentlab/convert.h"
#include "latentlab/engine.h"
#include "model/mla_attention.h"
#include "model/weights.h"

namespace latentlab::bench {
namespace fs = std::filesystem;

namespace {

double secondsOf(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Decode tokens/s at each context length: prefill up to the length (untimed),
// then time `steps` single-token steps. Returns (tokens/s, cache bytes) pairs.
std::vector<std::pair<double, std::int64_t>> decodeSpeed(CausalLm& model, const std::vector<int>& contexts, int steps) {
  torch::NoGradGuard g;
  torch::manual_seed(1);
  KvCache cache(model.numLayers());
  std::vector<std::pair<double, std::int64_t>> out;
  for (int ctx : contexts) {
    const auto have = cache.length();
    if (ctx > have) model.forward(torch::randint(0, model.config().vocabSize, {1, ctx - have}, torch::kInt64), &cache);
    const double s = secondsOf([&]() {
      for (int i = 0; i < steps; ++i)
        model.forward(torch::randint(0, model.config().vocabSize, {1, 1}, torch::kInt64), &cache);
    });
    out.emplace_back(steps / s, cache.bytes());
  }
  return out;
}

void benchConvert(BenchReport& report) {
  const char* archEnv = std::getenv("LATENTLAB_BENCH_ARCH");
  const std::string arch = archEnv != nullptr ? archEnv : "smollm-135m";
  const fs::path root = fs::temp_directory_path() / ("latentlab-bench-convert-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const fs::path base = root / "base";
  const auto cfg = builtinArchitecture(arch);
  const double initSeconds = secondsOf([&]() { initModel(cfg, base, 7, DType::F32); });
  report.add({"convert", "write random " + arch + " (F32)", initSeconds, "s", ""});

  // A small calibration set for S_2-norm: 4 sequences of 128 u16 token ids.
  const fs::path calib = root / "calib.u16";
  {
    std::ofstream out(calib, std::ios::binary);
    for (int i = 0; i < 4 * 128; ++i) {
      const auto v = static_cast<std::uint16_t>((i * 7919) % cfg.vocabSize);
      out.write(reinterpret_cast<const char*>(&v), 2);
    }
  }
  NullProgress progress;
  CancelToken cancel;
  for (const char* strategy : {"high", "low", "uniform", "2-norm", "full"}) {
    ConvertSpec spec;
    spec.modelDir = base;
    spec.outDir = root / (std::string("mla-") + strategy);
    spec.ropeStrategy = strategy;
    spec.ropePairs = 4;
    spec.dKv = 16;
    spec.calibration.dataFile = calib;
    spec.calibration.numSequences = 4;
    spec.calibration.seqLen = 128;
    ConvertReport r;
    const double s = secondsOf([&]() { r = convert(spec, progress, cancel); });
    std::string note = "r=" + std::to_string(r.mla.ropePairs) + " d_kv=16 joint; mean rel. error " +
                       std::to_string(r.meanReconstructionError) + "; stages";
    for (const auto& st : r.stages) note += " " + st.stage + "=" + std::to_string(st.seconds).substr(0, 5) + "s";
    report.add({"convert", std::string("convert ") + arch + " " + strategy, s, "s", note});
    fs::remove_all(spec.outDir);
  }

  // Decode: original vs converted (S_2-norm needs no data here: use uniform) naive and absorbed.
  torch::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  auto original = loadModel(base, torch::kCPU, torch::kFloat32);
  ConversionOptions opts;
  opts.rope = RopeStrategy::Uniform;
  opts.ropePairs = 4;
  opts.dKv = 16;
  auto mla = convertModel(*original, opts);
  const std::vector<int> contexts{128, 512, 1024};
  const int steps = 8;
  auto row = [&](const std::string& what, const std::vector<std::pair<double, std::int64_t>>& results) {
    for (std::size_t i = 0; i < contexts.size(); ++i) {
      report.add({"convert", "decode " + what + " @ ctx " + std::to_string(contexts[i]), results[i].first, "tok/s",
                  "cache " + std::to_string(results[i].second / 1024) + " KiB (F32)"});
    }
  };
  row("original", decodeSpeed(*original, contexts, steps));
  setMlaDecode(*mla, MlaDecode::Naive);
  row("MLA naive", decodeSpeed(*mla, contexts, steps));
  setMlaDecode(*mla, MlaDecode::Absorbed);
  row("MLA absorbed", decodeSpeed(*mla, contexts, steps));
  fs::remove_all(root);
}

}  // namespace

LATENTLAB_BENCH("convert", benchConvert);

}  // namespace latentlab::bench
