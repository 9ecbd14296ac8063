// Training throughput of a full step as the trainer runs it (data loader,
// forward, backward, clip, AdamW, one host sync) for the demo model and a
// SmolLM-135M-shaped model: tokens/s, model FLOP/s, and MFU against the GEMMs
// of exactly the step's matmul shapes, timed in this process just before and
// just after the steps. Also where the step's time goes (matmuls, attention,
// the loss, other operators, the optimizer: one step under LibTorch's
// profiler), the same step in PyTorch eager mode as a peer, and the fused
// optimiser against LibTorch's reference AdamW on the same gradients.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <torch/csrc/autograd/profiler_kineto.h>

#include "bench_process.h"
#include "bench_util.h"
#include "data/batch_loader.h"
#include "latentlab/architectures.h"
#include "model/cpu_block_cache.h"
#include "model/decode_attention.h"
#include "model/llama.h"
#include "train/distillation.h"
#include "train/model_builder.h"
#include "train/optimizer.h"
#include "train/train_step.h"

namespace latentlab::bench {
namespace {
namespace fs = std::filesystem;

struct Linear {
  std::int64_t in, out, count;  // count: how many of this shape one step runs
};

// Every weight matmul of the model: the per-layer projections and the LM head.
std::vector<Linear> linearShapes(const ModelConfig& c) {
  const std::int64_t d = c.hiddenSize, q = c.numHeads * c.headDim, kv = c.numKvHeads * c.headDim, L = c.numLayers;
  return {{d, q, L},          {d, kv, 2 * L}, {q, d, L}, {d, c.intermediateSize, 2 * L}, {c.intermediateSize, d, L},
          {d, c.vocabSize, 1}};
}

// Seconds the step's GEMMs take on their own: for each (M x in) @ (in x out)
// linear, the forward x·W^T and the backward dY·W and dY^T·X, best of 3 each,
// summed over the model. Returns (seconds, FLOPs).
std::pair<double, double> gemmReference(const ModelConfig& cfg, std::int64_t M, const torch::Device& device,
                                        torch::ScalarType dtype) {
  const auto opts = torch::TensorOptions().dtype(dtype).device(device);
  double seconds = 0, flops = 0;
  for (const auto& l : linearShapes(cfg)) {
    auto x = torch::randn({M, l.in}, opts), w = torch::randn({l.out, l.in}, opts), dy = torch::randn({M, l.out}, opts);
    auto best = [&](auto&& fn) { return bestOf(device, 3, fn); };
    const double t =
        best([&] { torch::mm(x, w.t()); }) + best([&] { torch::mm(dy, w); }) + best([&] { torch::mm(dy.t(), x); });
    seconds += t * static_cast<double>(l.count);
    flops += 6.0 * static_cast<double>(M * l.in * l.out * l.count);
  }
  return {seconds, flops};
}

// 6 FLOPs per weight and token (the tied LM head is a real matmul, the
// embedding lookup is not) plus attention: QK^T and AV cost 4·T·d_h·n_h per
// token and layer forward, x3 with backward, halved by the causal mask.
double flopsPerToken(const ModelConfig& c, int seqLen) {
  double weights = 0;
  for (const auto& l : linearShapes(c)) weights += static_cast<double>(l.in * l.out * l.count);
  return 6.0 * weights + 6.0 * c.numLayers * seqLen * c.headDim * c.numHeads;
}

// A raw u16 token file of random ids, the loader's input.
fs::path writeTokens(const fs::path& dir, int vocab, std::int64_t count) {
  fs::create_directories(dir);
  const fs::path path = dir / "tokens.u16";
  auto ids = torch::randint(0, vocab, {count}, torch::kInt32);
  std::ofstream out(path, std::ios::binary);
  for (std::int64_t i = 0; i < count; ++i) {
    const auto v = static_cast<std::uint16_t>(ids[i].item<int>());
    out.write(reinterpret_cast<const char*>(&v), 2);
  }
  return path;
}

// The same step in PyTorch eager mode (peers/train_eager_peer.py: transformers'
// LlamaForCausalLM of this shape, clip, AdamW) as a process of its own:
// tokens/s, or 0 where it could not run (transformers missing).
double eagerPeerTokensPerSecond(const ModelConfig& c, int batch, int seqLen, int steps, bool bf16,
                                const fs::path& dir) {
  std::vector<std::string> argv = {LATENTLAB_PYTHON, LATENTLAB_SOURCE_DIR "/tests/bench/peers/train_eager_peer.py",
                                   "--hidden",       std::to_string(c.hiddenSize),
                                   "--layers",       std::to_string(c.numLayers),
                                   "--heads",        std::to_string(c.numHeads),
                                   "--kv-heads",     std::to_string(c.numKvHeads),
                                   "--head-dim",     std::to_string(c.headDim),
                                   "--intermediate", std::to_string(c.intermediateSize),
                                   "--vocab",        std::to_string(c.vocabSize),
                                   "--batch",        std::to_string(batch),
                                   "--seq",          std::to_string(seqLen),
                                   "--steps",        std::to_string(steps)};
  if (bf16) argv.push_back("--bf16");
  if (c.tieWordEmbeddings) argv.push_back("--tied");
  const ChildRun r = runChild(argv, dir / "eager.log");
  if (r.status != 0) return 0;
  const auto at = r.output.rfind("\"tokens_per_s\": ");
  return at == std::string::npos ? 0 : std::atof(r.output.c_str() + at + 16);
}

// Where one step's time goes, from LibTorch's profiler: each operator the
// step calls at the top level (forward) or each autograd function it runs
// (backward), by kind; `untraced` is the forward-backward time in no
// operator (the autograd engine's own work, the framework between calls);
// `optimizer` the clip and AdamW phase, timed by the step itself.
struct StepSplit {
  double matmul = 0, attention = 0, loss = 0, other = 0, untraced = 0, optimizer = 0;
  std::map<std::string, double> others;  // the other operators' time by name
  double total() const { return matmul + attention + loss + other + untraced + optimizer; }
  // The n other operators that took longest, with their shares of the step.
  std::string topOthers(std::size_t n) const {
    std::vector<std::pair<double, std::string>> byTime;
    for (const auto& [name, seconds] : others) byTime.emplace_back(seconds, name);
    std::sort(byTime.rbegin(), byTime.rend());
    std::string out;
    for (std::size_t i = 0; i < std::min(n, byTime.size()); ++i)
      out += (i > 0 ? ", " : "") + byTime[i].second + " " + fixed(100.0 * byTime[i].first / total(), 1) + "%";
    return out;
  }
};

double StepSplit::*kindOf(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("ttention")) return &StepSplit::attention;  // scaled_dot_product_attention, *AttentionBackward*
  if (has("aten::linear") || has("aten::matmul") || has("aten::mm") || has("aten::addmm") || has("aten::bmm") ||
      has("MmBackward") || has("AddmmBackward") || has("BmmBackward"))
    return &StepSplit::matmul;
  if (has("cross_entropy") || has("log_softmax") || has("nll_loss") || has("LogSoftmaxBackward") ||
      has("NllLossBackward") || has("CrossEntropyFn"))
    return &StepSplit::loss;
  return &StepSplit::other;
}

// Operators of the clip and AdamW phase, which the step times itself.
bool optimizerOperator(const std::string& name) {
  return name.find("_fused_adamw") != std::string::npos || name.find("_foreach_") != std::string::npos;
}

// The top-level events' time by kind: per thread, an event inside another's
// span is part of that one.
StepSplit splitOf(const std::vector<torch::autograd::profiler::KinetoEvent>& events) {
  std::map<std::uint64_t, std::vector<const torch::autograd::profiler::KinetoEvent*>> byThread;
  for (const auto& e : events)
    if (e.deviceType() == c10::DeviceType::CPU && !e.isAsync()) byThread[e.startThreadId()].push_back(&e);
  StepSplit split;
  for (auto& [thread, list] : byThread) {
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) {
      return a->startNs() != b->startNs() ? a->startNs() < b->startNs() : a->endNs() > b->endNs();
    });
    std::uint64_t coveredUntil = 0;
    for (const auto* e : list) {
      if (e->startNs() < coveredUntil) continue;  // inside the previous top-level event
      coveredUntil = e->endNs();
      if (optimizerOperator(e->name())) continue;  // in split.optimizer
      const double seconds = static_cast<double>(e->durationNs()) * 1e-9;
      const auto kind = kindOf(e->name());
      split.*kind += seconds;
      if (kind == &StepSplit::other) split.others[e->name()] += seconds;
    }
  }
  return split;
}

struct Phases {
  double data = 0, fwdBwd = 0, optimizer = 0, sync = 0;
  double total() const { return data + fwdBwd + optimizer + sync; }
};

void benchTrainStep(BenchReport& report, const std::string& arch, int vocab, int batch, int seqLen, int steps) {
  const torch::Device device = benchDevice();
  const bool bf16 = benchBf16();
  const ModelConfig cfg = builtinArchitecture(arch, vocab);
  const std::string shape = arch + " B" + std::to_string(batch) + " T" + std::to_string(seqLen);
  const std::int64_t M = static_cast<std::int64_t>(batch) * seqLen;
  const auto gemmType = bf16 ? torch::kBFloat16 : torch::kFloat32;

  torch::manual_seed(0);
  auto model = std::make_shared<CausalLm>(cfg);
  initializeWeights(*model, 0.02, false);
  model->to(device);
  model->train();
  std::vector<torch::Tensor> params = model->parameters();
  FusedAdamW opt(params, torch::optim::AdamWOptions(1e-4).betas({0.9, 0.95}));

  const fs::path dir = fs::temp_directory_path() / ("latentlab-bench-train-" + std::to_string(::getpid()));
  const auto tokenFile = writeTokens(dir, vocab, 16LL * batch * (seqLen + 1));
  LoaderOptions lo;
  lo.batchSize = batch;
  lo.seqLen = seqLen;
  BatchLoader loader(TokenShard::open(tokenFile, ShardLayout::RawU16), Split::Train, lo);
  Batch b;

  Phases ph;
  // The trainer's own step (train/train_step.h), timed per phase.
  StepSettings settings;
  settings.autocastBf16 = bf16;
  settings.clip = 1.0;
  auto step = [&](Phases& p) {
    StepPhases sp;
    (void)latentlab::trainStep(
        *model, opt, params,
        [&] {
          loader.next(b);
          return torch::from_blob(b.ids.data(), {b.rows, b.cols}, torch::kInt64).to(device);
        },
        settings, nullptr, &sp);
    p.data += sp.data;
    p.fwdBwd += sp.forwardBackward;
    p.optimizer += sp.optimizer;
    p.sync += sp.sync;
  };

  // The eager peer before and after this process's steps (their mean): a
  // machine speeding up or slowing down meanwhile favours neither side.
  const bool peer = device.is_cpu() && seqLen <= 256;
  const double eagerBefore = peer ? eagerPeerTokensPerSecond(cfg, batch, seqLen, steps, bf16, dir) : 0;
  auto [gemmBefore, gemmFlops] = gemmReference(cfg, M, device, gemmType);
  Phases warm;
  step(warm);
  for (int s = 0; s < steps; ++s) step(ph);
  const double gemmAfter = gemmReference(cfg, M, device, gemmType).first;
  // The same steps with the CPU block cache off: every large tensor a fresh
  // mmap that the kernel zero-fills (what the step cost before the cache).
  // Timed between two runs with it on (on, off, on), so that a machine
  // speeding up or slowing down over the run biases neither side.
  double uncachedStep = 0, cachedStep = 0;
  if (device.is_cpu() && cpuBlockCacheInstalled()) {
    setCpuBlockCacheEnabled(false);
    Phases off, offWarm;
    step(offWarm);
    for (int s = 0; s < steps; ++s) step(off);
    setCpuBlockCacheEnabled(true);
    Phases on, onWarm;
    step(onWarm);
    for (int s = 0; s < steps; ++s) step(on);
    uncachedStep = off.total() / steps;
    cachedStep = (ph.total() + on.total()) / (2.0 * steps);
  }
  // A warm-up step, then `steps` timed ones: seconds per step, and the most
  // memory they held in tensors of 1 MiB or more (the CPU block cache's count
  // of live large blocks) above what the model holds between steps.
  auto measureSteps = [&](double* seconds, double* peak) {
    Phases warmup, timedSteps;
    step(warmup);
    const double between = static_cast<double>(cpuBlockCacheStats().liveBytes);
    resetCpuBlockCachePeak();
    for (int s = 0; s < steps; ++s) step(timedSteps);
    *seconds = timedSteps.total() / steps;
    *peak = static_cast<double>(cpuBlockCacheStats().peakLiveBytes) - between;
  };
  // Activation recompute off and on: step time, and the most memory the
  // step holds in tensors of 1 MiB or more (the CPU block cache's count of
  // live large blocks) above what it holds between steps (weights, gradients,
  // optimizer state): the activations and the logits/loss buffers.
  double keptStep = 0, recomputedStep = 0, keptPeak = -1, recomputedPeak = -1;
  if (device.is_cpu() && cpuBlockCacheInstalled()) {
    auto measure = [&](bool recompute, double* seconds, double* peak) {
      model->setRecompute(recompute);
      measureSteps(seconds, peak);
    };
    double first = 0;
    measure(false, &first, &keptPeak);
    measure(true, &recomputedStep, &recomputedPeak);
    measure(false, &keptStep, &keptPeak);
    keptStep = (first + keptStep) / 2;  // off timed before and after on: drift biases neither
    model->setRecompute(false);
  }
  // The fp32 norm, activation, RoPE and loss kernels with their backward
  // (model/fused_ops.h) against LibTorch's operators and autograd (the
  // kernels' switch off), each through trainStep, timed on, off, on.
  double kernelsOnStep = 0, kernelsOffStep = 0;
  if (device.is_cpu() && !bf16 && cpuBlockCacheInstalled()) {
    double first = 0, peak = 0;
    measureSteps(&first, &peak);
    setFusedDecodeEnabled(false);
    measureSteps(&kernelsOffStep, &peak);
    setFusedDecodeEnabled(true);
    measureSteps(&kernelsOnStep, &peak);
    kernelsOnStep = (first + kernelsOnStep) / 2;
  }
  // Distillation (train/distillation.h) from a teacher of the same shape, alpha
  // 0.5 at T 2: the step and its peak as the recompute figures are measured,
  // plain timed before and after distilled.
  double plainStep = 0, distilledStep = 0, plainPeak = -1, distilledPeak = -1;
  if (device.is_cpu() && cpuBlockCacheInstalled()) {
    Distillation distill;
    distill.teacher = std::make_shared<CausalLm>(cfg);
    initializeWeights(*distill.teacher, 0.02, false);
    distill.teacher->to(device);
    distill.teacher->eval();
    for (auto& p : distill.teacher->parameters()) p.requires_grad_(false);
    distill.alpha = 0.5;
    distill.temperature = 2.0;
    auto measure = [&](bool distilled, double* seconds, double* peak) {
      settings.distill = distilled ? &distill : nullptr;
      measureSteps(seconds, peak);
    };
    double first = 0;
    measure(false, &first, &plainPeak);
    measure(true, &distilledStep, &distilledPeak);
    measure(false, &plainStep, &plainPeak);
    plainStep = (first + plainStep) / 2;
    settings.distill = nullptr;
  }
  const double eagerAfter = peer ? eagerPeerTokensPerSecond(cfg, batch, seqLen, steps, bf16, dir) : 0;
  // One more step under LibTorch's profiler, for its split by kind.
  StepSplit split;
  std::string splitError;
  try {
    using namespace torch::profiler::impl;
    const ProfilerConfig config(ProfilerState::KINETO);
    torch::autograd::profiler::prepareProfiler(config, {ActivityType::CPU});
    torch::autograd::profiler::enableProfiler(config, {ActivityType::CPU});
    Phases profiled;
    step(profiled);
    const auto result = torch::autograd::profiler::disableProfiler();
    split = splitOf(result->events());
    const double traced = split.matmul + split.attention + split.loss + split.other;
    split.untraced = std::max(0.0, profiled.fwdBwd - traced);
    split.optimizer = profiled.optimizer;
  } catch (const std::exception& e) {
    splitError = e.what();
  }
  const double gemmSeconds = std::min(gemmBefore, gemmAfter);  // the faster GEMM: the conservative ratio
  const double stepSeconds = ph.total() / steps;

  const double tps = static_cast<double>(M) / stepSeconds;
  const double flops = flopsPerToken(cfg, seqLen) * tps;
  const double gemmRate = gemmFlops / gemmSeconds;
  std::int64_t nParams = 0;
  for (const auto& p : params) nParams += p.numel();
  const std::string where = device.str() + (bf16 ? " bf16 autocast" : " fp32") + ", " +
                            std::to_string(at::get_num_threads()) + " threads, OMP_WAIT_POLICY " +
                            (std::getenv("OMP_WAIT_POLICY") != nullptr ? std::getenv("OMP_WAIT_POLICY") : "unset");
  report.add({"train", shape + " tokens/s", tps, "tok/s",
              fixed(nParams / 1e6, 2) + "M params; " + where + "; mean of " + std::to_string(steps) + " steps"});
  if (eagerBefore > 0 && eagerAfter > 0) {
    const double eager = (eagerBefore + eagerAfter) / 2;
    report.add({"train", shape + " PyTorch eager step (transformers)", eager, "tok/s",
                "engine " + fixed(tps / eager, 2) + "x; timed before and after the engine's steps: " +
                    fixed(eagerBefore, 1) + ", " + fixed(eagerAfter, 1)});
  } else if (peer) {
    report.add({"train", shape + " PyTorch eager step (transformers)", 0, "skipped",
                "the peer did not run (is transformers installed in the venv?)"});
  }
  report.add({"train", shape + " model FLOP/s", flops / 1e9, "GFLOP/s", "6N + attention per token"});
  report.add({"train", shape + " GEMM of the step's shapes", gemmRate / 1e9, "GFLOP/s",
              "before " + fixed(gemmFlops / gemmBefore / 1e9) + ", after " + fixed(gemmFlops / gemmAfter / 1e9) +
                  "; the faster is the reference"});
  report.add({"train", shape + " MFU vs same-process GEMM", 100.0 * flops / gemmRate, "%", ""});
  if (kernelsOffStep > 0) {
    report.add({"train", shape + " step, fused norm, activation, RoPE and loss on / off",
                kernelsOffStep / kernelsOnStep, "x",
                fixed(kernelsOnStep * 1e3, 0) + " / " + fixed(kernelsOffStep * 1e3, 0) +
                    " ms per step (off: LibTorch's operators and autograd; timed on, off, on)"});
  }
  if (uncachedStep > 0) {
    report.add({"train", shape + " step, CPU block cache on / off", uncachedStep / cachedStep, "x",
                fixed(cachedStep * 1e3, 0) + " / " + fixed(uncachedStep * 1e3, 0) +
                    " ms per step, on timed before and after off (off: large tensors freshly mapped and "
                    "zero-filled each step)"});
  }
  if (keptStep > 0) {
    report.add({"train", shape + " step, activation recompute on / off", recomputedStep / keptStep, "x",
                fixed(recomputedStep * 1e3, 0) + " / " + fixed(keptStep * 1e3, 0) + " ms per step"});
    if (keptPeak >= 0 && recomputedPeak >= 0) {
      report.add({"train", shape + " activation memory, recompute on / off", recomputedPeak / (1 << 20), "MiB",
                  "off: " + fixed(keptPeak / (1 << 20), 0) +
                      " MiB; the step's peak in tensors of 1 MiB or more above "
                      "what it holds between steps (activations, logits and loss buffers)"});
    }
  }
  if (plainStep > 0) {
    report.add({"train", shape + " step, distilled / plain", distilledStep / plainStep, "x",
                fixed(distilledStep * 1e3, 0) + " / " + fixed(plainStep * 1e3, 0) +
                    " ms per step (a teacher of the same shape, alpha 0.5, T 2; plain timed before and after)"});
    if (plainPeak >= 0 && distilledPeak >= 0) {
      report.add({"train", shape + " step memory, distilled / plain", distilledPeak / (1 << 20), "MiB",
                  "plain: " + fixed(plainPeak / (1 << 20), 0) +
                      " MiB; the step's peak in tensors of 1 MiB or more above what it holds between steps "
                      "(the teacher's weights, " +
                      fixed(4.0 * static_cast<double>(nParams) / (1 << 20), 0) +
                      " MiB in fp32, are held between steps)"});
    }
  }
  report.add({"train", shape + " step time outside matmuls", 100.0 * (1.0 - gemmSeconds / stepSeconds), "%",
              "1 - (step's GEMMs alone) / step; of the step: optimizer " + fixed(100.0 * ph.optimizer / ph.total()) +
                  "%, data " + fixed(100.0 * ph.data / ph.total(), 2) + "%, loss/norm sync " +
                  fixed(100.0 * ph.sync / ph.total(), 2) + "%"});

  if (split.total() > 0) {
    auto share = [&](double part) { return fixed(100.0 * part / split.total(), 1) + "%"; };
    report.add({"train", shape + " step split: matmuls", 100.0 * split.matmul / split.total(), "%",
                "one profiled step: attention " + share(split.attention) + ", loss (cross-entropy) " +
                    share(split.loss) + ", other operators (norms, activations, RoPE, copies) " + share(split.other) +
                    " (most: " + split.topOthers(3) + "), outside operators " + share(split.untraced) +
                    ", clip + AdamW " + share(split.optimizer)});
  } else {
    report.add({"train", shape + " step split", 0, "skipped", "LibTorch's profiler did not run: " + splitError});
  }

  // The optimiser step alone, on the step's gradients: the trainer's (the
  // norm, then the clip inside the fused AdamW's pass, as trainStep runs
  // them), clipping first, and LibTorch's reference.
  {
    torch::optim::AdamW reference(params, torch::optim::AdamWOptions(1e-4).betas({0.9, 0.95}));
    double fused = 1e30, clipFirst = 1e30, ref = 1e30;
    for (int r = 0; r < 3; ++r) {
      fused = std::min(fused, timed(device, [&] {
                         const auto norm = gradNorm(params);
                         opt.scaleGradientsInStep(clipCoefficient(norm, 1.0));
                         (void)norm.item<double>();
                         opt.step();
                       }));
      clipFirst = std::min(clipFirst, timed(device, [&] {
                             (void)clipGradNorm(params, 1.0).item<double>();
                             opt.step();
                           }));
      ref = std::min(ref, timed(device, [&] {
                       (void)torch::nn::utils::clip_grad_norm_(params, 1.0);
                       reference.step();
                     }));
    }
    report.add({"train", shape + " clip + AdamW step", fused * 1e3, "ms",
                "the norm, then the clip inside the fused AdamW; clipping first " + fixed(clipFirst * 1e3) +
                    " ms; LibTorch clip_grad_norm_ + AdamW: " + fixed(ref * 1e3) + " ms (" + fixed(ref / fused, 2) +
                    "x)"});
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

void benchTrain(BenchReport& report) {
  const bool quick = benchOptions().quick;
  benchTrainStep(report, "demo-gqa", 4096, 16, 128, quick ? 3 : 10);
  benchTrainStep(report, "smollm-135m", 49152, 4, 256, quick ? 2 : 3);
  // The papers' sequence length: recompute's memory and time at B4 x T1024 (minutes on a CPU).
  if (!quick && benchDevice().is_cpu()) benchTrainStep(report, "smollm-135m", 49152, 4, 1024, 2);
  if (benchDevice().is_cuda()) benchTrainStep(report, "smollm-135m", 49152, 16, 1024, quick ? 3 : 10);
}

}  // namespace
LATENTLAB_BENCH("train", benchTrain);
}  // namespace latentlab::bench
