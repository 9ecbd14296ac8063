// Benchmarks of MHA2MLA conversion: per model shape in memory (SVD per layer,
// S_2-norm calibration per 1M tokens), and the whole convert job from files
// for each RoPE strategy on a SmolLM-135M-shaped random model.
#include <torch/torch.h>

#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bench_util.h"
#include "convert/converter.h"
#include "latentlab/architectures.h"
#include "latentlab/convert.h"
#include "latentlab/engine.h"
#include "model/weights.h"
#include "train/model_builder.h"

namespace latentlab::bench {
namespace fs = std::filesystem;

namespace {

double secondsOf(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// In-memory conversion of a random model of each shape with S_2-norm: SVD
// time per layer and calibration time per 1M tokens (from ConversionStats).
void conversionPerShape(BenchReport& report) {
  const bool quick = benchOptions().quick;
  std::vector<std::string> shapes{"demo-gqa", "smollm-135m"};
  if (!quick) shapes.push_back("smollm-360m");
  for (const auto& arch : shapes) {
    const auto cfg = builtinArchitecture(arch);
    torch::manual_seed(5);
    auto model = std::make_shared<CausalLm>(cfg);
    initializeWeights(*model, 0.02, false);
    model->eval();
    std::vector<torch::Tensor> calibration;
    for (int i = 0; i < (quick ? 1 : 4); ++i)
      calibration.push_back(torch::randint(0, cfg.vocabSize, {4, 512}, torch::kInt64));
    ConversionOptions opts;
    opts.rope = RopeStrategy::TwoNorm;
    opts.ropePairs = defaultRopePairs(cfg.headDim);
    opts.dKv = std::max(4, cfg.headDim / 4);
    NullProgress progress;
    CancelToken cancel;
    ConversionStats stats;
    const double total = secondsOf([&]() { convertModel(*model, opts, calibration, progress, cancel, &stats); });
    const std::string setup = "r=" + std::to_string(opts.ropePairs) + " d_kv=" + std::to_string(opts.dKv) +
                              " joint, fp32, " + std::to_string(at::get_num_threads()) + " threads";
    report.add({"convert", arch + " SVD per layer", stats.factoriseSeconds / cfg.numLayers * 1e3, "ms",
                std::to_string(cfg.numLayers) + " layers; " + setup});
    report.add({"convert", arch + " 2-norm calibration per 1M tokens",
                stats.calibrateSeconds / static_cast<double>(stats.calibrationTokens) * 1e6, "s",
                "measured on " + std::to_string(stats.calibrationTokens) + " tokens"});
    report.add({"convert", arch + " in-memory conversion", total, "s",
                "calibrate " + std::to_string(stats.calibrateSeconds).substr(0, 5) + " s, select " +
                    std::to_string(stats.selectSeconds).substr(0, 5) + " s, factorise " +
                    std::to_string(stats.factoriseSeconds).substr(0, 5) + " s"});
  }
}

void benchConvert(BenchReport& report) {
  conversionPerShape(report);
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
  const auto strategies = benchOptions().quick
                              ? std::vector<RopeStrategy>{RopeStrategy::TwoNorm}
                              : std::vector<RopeStrategy>{RopeStrategy::High, RopeStrategy::Low, RopeStrategy::Uniform,
                                                          RopeStrategy::TwoNorm, RopeStrategy::Full};
  for (const RopeStrategy rope : strategies) {
    const std::string strategy(choiceName(rope));
    ConvertSpec spec;
    spec.modelDir = base;
    spec.outDir = root / ("mla-" + strategy);
    spec.ropeStrategy = rope;
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
    report.add({"convert", "convert job " + arch + " " + strategy + " (files)", s, "s", note});
    fs::remove_all(spec.outDir);
  }

  fs::remove_all(root);
}

}  // namespace

LATENTLAB_BENCH("convert", benchConvert);

}  // namespace latentlab::bench
