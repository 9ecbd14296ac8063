// Training throughput: tokens/s and model FLOP/s of a full training step
// (forward, backward, AdamW) against an fp32 GEMM measured in this process
// just before, for the demo model and a SmolLM-135M-shaped model.
#include <chrono>
#include <cmath>

#include "bench_registry.h"
#include "latentlab/architectures.h"
#include "model/llama.h"
#include "train/model_builder.h"

namespace latentlab::bench {
namespace {
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

// fp32 GEMM rate (FLOP/s) of (m x k) @ (k x n), best of a few repeats.
double gemmRate(std::int64_t m, std::int64_t k, std::int64_t n) {
  auto a = torch::randn({m, k}), b = torch::randn({k, n});
  for (int i = 0; i < 2; ++i) torch::mm(a, b);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < 5; ++i) torch::mm(a, b);
    best = std::min(best, seconds(t0) / 5);
  }
  return 2.0 * m * k * n / best;
}

// 6·N per token for the weights (the tied LM head is a real matmul, so N
// counts the embedding once) plus attention: QK^T and AV cost 4·T·d_h·n_h per
// token and layer forward, x3 with backward, halved by the causal mask.
double flopsPerToken(const ModelConfig& c, std::int64_t params, int seqLen) {
  return 6.0 * static_cast<double>(params) + 6.0 * c.numLayers * seqLen * c.headDim * c.numHeads;
}

void trainStep(BenchReport& report, const std::string& arch, int vocab, int batch, int seqLen, int steps) {
  ModelConfig cfg = builtinArchitecture(arch, vocab);
  torch::manual_seed(0);
  CausalLm model(cfg);
  initializeWeights(model, 0.02, false);
  model.train();
  std::int64_t params = 0;
  for (const auto& p : model.parameters()) params += p.numel();
  torch::optim::AdamW opt(model.parameters(), torch::optim::AdamWOptions(1e-4).betas({0.9, 0.95}));
  auto windows = torch::randint(0, vocab, {batch, seqLen + 1}, torch::kInt64);
  // GEMM of the shape that dominates: (B*T x d) @ (d x intermediate).
  const double gemm = gemmRate(static_cast<std::int64_t>(batch) * seqLen, cfg.hiddenSize, cfg.intermediateSize);
  auto step = [&] {
    opt.zero_grad();
    auto loss = languageModelLoss(model, windows);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    return loss.item<double>();
  };
  step();  // warm-up
  double fwdBwd = 0, total = 0;
  for (int s = 0; s < steps; ++s) {
    auto t0 = Clock::now();
    opt.zero_grad();
    auto loss = languageModelLoss(model, windows);
    loss.backward();
    fwdBwd += seconds(t0);
    torch::nn::utils::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    (void)loss.item<double>();
    total += seconds(t0);
  }
  const double tokens = static_cast<double>(batch) * seqLen * steps;
  const double tps = tokens / total;
  const double flops = flopsPerToken(cfg, params, seqLen) * tps;
  const std::string shape = arch + " B" + std::to_string(batch) + " T" + std::to_string(seqLen);
  report.add({"train", shape + " tokens/s", tps, "tok/s", std::to_string(params / 1000000.0).substr(0, 5) + "M params"});
  report.add({"train", shape + " model FLOP/s", flops / 1e9, "GFLOP/s", ""});
  report.add({"train", shape + " GEMM fp32 (same process)", gemm / 1e9, "GFLOP/s",
              std::to_string(batch * seqLen) + "x" + std::to_string(cfg.hiddenSize) + "x" + std::to_string(cfg.intermediateSize)});
  report.add({"train", shape + " MFU vs GEMM", 100.0 * flops / gemm, "%", ""});
  report.add({"train", shape + " time outside fwd+bwd", 100.0 * (total - fwdBwd) / total, "%", "clip + AdamW + sync"});
}

void benchTrain(BenchReport& report) {
  trainStep(report, "demo-gqa", 4096, 16, 128, 10);
  trainStep(report, "smollm-135m", 49152, 4, 256, 3);
}

} // namespace
LATENTLAB_BENCH("train", benchTrain);
} // namespace latentlab::bench
