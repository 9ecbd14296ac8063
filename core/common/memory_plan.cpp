// The training memory planner (latentlab/memory_plan.h). The activation
// model counts, per token and decoder layer, the elements autograd keeps for
// backward; its coefficients were measured on the CPU with every allocation
// counted (tests/core/train/test_memory_plan.cpp holds the predictions to
// 15% of the measured peak), see docs/memory.md.
#include "latentlab/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "latentlab/architectures.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::int64_t kBucketBytes = 64 * kMiB;        // data parallel's gradient bucket (fp32)
constexpr std::int64_t kCudaContextBytes = 512 * kMiB;  // CUDA context, cuBLAS and kernel workspaces (estimate)
constexpr double kCudaSlack = 0.08;                     // caching-allocator fragmentation (estimate)

// Bytes per element of each kind of tensor under a precision policy.
struct Widths {
  double weight, grad, optimizer, master;  // per parameter
  double activation;                       // per saved activation element, on average
  double residual;                         // the layer input a recomputed layer keeps
  double logitsPerVocab, logitsPerHidden;  // the loss's buffers per token
};

Widths widthsFor(const std::string& precision) {
  if (precision == "fp64") return {8, 8, 16, 0, 8, 8, 24, 24};
  if (precision == "bf16") return {2, 2, 8, 4, 2.27, 2, 12.5, 8};
  if (precision == "bf16-mixed") return {4, 4, 8, 0, 3.44, 4, 12.5, 8};
  return {4, 4, 8, 0, 4, 4, 12, 12};  // fp32
}

// Elements autograd keeps per token for one decoder layer in training. With
// the fp32 norm and activation kernels (fp32 on the CPU, model/fused_ops.h) a
// norm keeps its input and each row's 1/rms rather than its input and the
// normalised rows, and the gated activation its two inputs rather than those
// and act(gate): one element fewer per norm output and per MLP element.
double layerElements(const ModelConfig& c, bool fusedKernels) {
  const double h = c.hiddenSize, I = c.intermediateSize;
  const double perNorm = fusedKernels ? 1.0 : 2.0;  // norm elements beyond the input its caller already keeps
  const double perMlp = fusedKernels ? 3.0 : 4.0;   // gate, up, (act(gate),) the product
  double e = (1 + 2 * perNorm) * h + perMlp * I;    // two norms with the residual stream, the gated MLP
  if (c.moe) {  // Qwen3-MoE: each token through top-k experts, the router's probabilities
    int sparse = 0;
    for (int l = 0; l < c.numLayers; ++l) sparse += c.sparseLayer(l) ? 1 : 0;
    const double share = c.numLayers > 0 ? static_cast<double>(sparse) / c.numLayers : 0.0;  // of the layers
    e += share * (-perMlp * I + c.moe->topK * (perMlp * c.moe->intermediate + 2 * h) + 2.0 * c.moe->experts);
  }
  if (c.latent) {
    const LatentAttention& a = *c.latent;
    const double nh = c.numHeads, dn = a.dNope, dv = a.dV, dr = a.dRope;
    e += 3.25 * h + (1 + perNorm) * a.dC + (2 * nh + 2) * dr + 2 * nh * (dn + dv) + (1 + perNorm) * a.qLoraRank;
    e += (a.branches - 1) * nh * (2 * (dn + dv) + (dn + dr) + 2 * dv);  // each further branch's attention
    if (a.latentHeads > 1 && a.branches == 1) e += 1.25 * nh * (dn + dv);
  } else if (c.mla) {
    const double q = c.numHeads * c.headDim, kv = c.numKvHeads * c.headDim, lat = c.numKvHeads * c.mla->dKv;
    e += c.mla->svdMethod == SvdMethod::Split ? 3 * q + 5 * kv + 2 * lat : 3 * q + 5.5 * kv + lat;
  } else {
    e += 3.0 * c.numHeads * c.headDim + 2.0 * c.numKvHeads * c.headDim;
  }
  // QK norms (Qwen3, Gemma-3) keep the raw and the normalised query and key;
  // Gemma's two further norms per layer their inputs and outputs.
  if (c.qkNorm && !c.latent) e += perNorm * (c.numHeads + c.numKvHeads) * c.headDim;
  if (c.sandwichNorms) e += 2 * perNorm * h;
  return e;
}

std::string count(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof(buf), "%.2fB", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof(buf), "%.1fM", n / 1e6);
  else if (n >= 1e3)
    std::snprintf(buf, sizeof(buf), "%.1fk", n / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f", n);
  return buf;
}

std::string bytesEach(double b) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), b == std::floor(b) ? "%.0f" : "%.2f", b);
  return buf;
}

// The peak of one configuration (no search).
// A teacher folder's parameter count, 0 where its config cannot be read (the
// run then reports the folder when it loads it).
std::int64_t teacherParameters(const std::string& dir) {
  try {
    return countParameters(readHfConfig(fs::path(dir) / "config.json"));
  } catch (const Error&) {
    return 0;
  }
}

MemoryPlan planOnce(const ModelConfig& c, const RunSpec& spec, std::int64_t available, std::int64_t sourceParameters) {
  MemoryPlan p;
  const std::vector<std::string> devices = deviceList(spec.device);
  p.cuda = !devices.empty() && devices.front().rfind("cuda", 0) == 0;
  p.ranks = std::max<int>(1, static_cast<int>(devices.size()));
  p.precision = std::string(choiceName(resolvePrecision(spec.precision, p.cuda)));
  p.parameters = countParameters(c);
  p.availableBytes = available;
  const Widths w = widthsFor(p.precision);
  const double P = static_cast<double>(p.parameters);
  const double N = static_cast<double>(spec.microBatch) * spec.data.seqLen;
  p.tokensPerMicroBatch = static_cast<std::int64_t>(N);
  const double L = c.numLayers, h = c.hiddenSize, V = c.vocabSize;

  // ZeRO: masters, moments and the averaged gradient slices are split over the ranks.
  const bool zero = spec.zeroStage > 0;
  const double shards = zero ? p.ranks : 1;
  const double full = p.precision == "fp64" ? 8 : 4;  // the masters' and slices' element size
  const double weights = P * w.weight;
  const double master = zero ? P * full / shards : P * w.master;
  const double optimizer = P * w.optimizer / shards;
  const double slices = zero ? P * full / shards : 0;
  const double grads = P * w.grad;
  const bool fusedKernels = !p.cuda && p.precision == "fp32";                // model/fused_ops.h
  const double layer = layerElements(c, fusedKernels) * w.activation * N;    // one layer's saved activations
  const double saved = spec.recompute ? L * h * w.residual * N : L * layer;  // what the forward keeps
  // Distilling: the teacher's log-probabilities and the student's at T, fp32,
  // held until the micro-batch's backward (train/distillation.h).
  const double distillLogits = spec.distill.enabled ? 2 * 4 * V * N : 0;
  // The fused cross-entropy (fp32 logits on the CPU, so also bf16 without
  // autocast, whose loss runs in fp32) keeps the logits and writes their
  // gradient where LibTorch's keeps the log-probabilities and, in backward,
  // fills a zero gradient beside the result: 4 B a vocabulary entry fewer.
  const bool fusedLoss = !p.cuda && (p.precision == "fp32" || p.precision == "bf16");
  const double perVocab = fusedLoss ? w.logitsPerVocab - 4 : w.logitsPerVocab;
  const double logits = (perVocab * V + w.logitsPerHidden * h) * N + distillLogits;
  const double headGrad = V * h * w.grad;                     // the first gradient backward makes
  const double accumulated = spec.gradAccum > 1 ? grads : 0;  // gradients kept between micro-batches
  // Tied embeddings: the input and output uses' gradients (each V x h) are
  // summed into the weight's at the end of backward; in fp32 on the CPU the
  // lookup's gradient is the batch's rows alone (sparse), added in place.
  const double tiedSum = c.tieWordEmbeddings && !fusedKernels ? 2 * V * h * w.grad : 0;

  // Four moments compete for the peak.
  struct Phase {
    const char* name;
    double grads, activations, logits, extra;
    const char* extraName;
  };
  const bool masterGrads = w.master > 0 && !zero;  // bf16 without ZeRO: fp32 gradients of the masters
  const double movedGrads = masterGrads ? P * 4 : 0;
  const double bucket = p.ranks > 1 ? std::min<double>(static_cast<double>(kBucketBytes), P * full) : 0;
  // At the step: stage 2 has released the model's gradients, stage 1 keeps the averaged ones.
  const double stepGrads = masterGrads || spec.zeroStage == 2 ? 0 : grads;
  const Phase phases[] = {
      {"start of backward", std::max(accumulated, headGrad), saved, logits, 0, ""},
      // With recompute: the layer being recomputed, and the gradients its
      // backward makes (0.75 of its activations: measured, GQA to MLA).
      {"end of backward", grads, (spec.recompute ? saved + 0.75 * layer : 0) + layer, 0, 0, ""},
      {"embedding's gradient", grads, 0, 0, tiedSum, "tied embedding's gradient sum"},
      {"optimizer step", stepGrads, 0, 0, movedGrads + bucket,
       masterGrads ? "fp32 gradients of the masters" : "gradient bucket"},
  };
  const Phase* worst = &phases[0];
  auto total = [](const Phase& ph) { return ph.grads + ph.activations + ph.logits + ph.extra; };
  for (const Phase& ph : phases)
    if (total(ph) > total(*worst)) worst = &ph;
  p.peakPhase = worst->name;

  auto add = [&](const std::string& name, double bytes, const std::string& detail) {
    if (bytes <= 0) return;
    p.items.push_back({name, static_cast<std::int64_t>(std::llround(bytes)), detail});
  };
  add("weights", weights, bytesEach(w.weight) + " B x " + count(P) + " parameters");
  // The teacher: the unconverted model (its parameters are the source's) or another folder's.
  double teacher = 0;
  if (spec.distill.enabled) {
    const double teacherP = spec.distill.original() ? static_cast<double>(sourceParameters)
                                                    : static_cast<double>(teacherParameters(spec.distill.teacher));
    teacher = teacherP * w.weight;
    add("teacher weights", teacher, bytesEach(w.weight) + " B x " + count(teacherP) + " parameters (distill)");
  }
  const std::string perRank =
      zero ? ", 1/" + std::to_string(p.ranks) + " per rank (ZeRO-" + std::to_string(spec.zeroStage) + ")" : "";
  add("master weights", master, (zero ? "full-precision masters" : "fp32 copy of the bf16 weights") + perRank);
  add("optimizer state", optimizer, "AdamW moments, " + bytesEach(w.optimizer) + " B per parameter" + perRank);
  add("gradient slices", slices, "the averaged gradients this rank updates" + perRank);
  add("gradients", worst->grads,
      worst->grads >= grads ? bytesEach(w.grad) + " B per parameter" : "the output layer's so far");
  add("activations", worst->activations,
      spec.recompute ? "layer inputs of " + std::to_string(c.numLayers) + " layers (recompute) and one layer recomputed"
                     : std::to_string(c.numLayers) + " layers x " + count(N) + " tokens");
  add("logits and loss", worst->logits, count(N) + " tokens x " + count(V) + " vocabulary");
  const bool bucketed = std::string(worst->extraName) == "gradient bucket";
  add(worst->extraName, worst->extra, bucketed ? "all-reduce of up to 64 MiB" : "transient, V x h each");
  double sum = weights + teacher + master + optimizer + slices + total(*worst);
  if (p.cuda) {
    add("allocator slack", sum * kCudaSlack, "caching allocator fragmentation (estimate, 8%)");
    add("CUDA context", static_cast<double>(kCudaContextBytes), "context, cuBLAS and kernel workspaces (estimate)");
    sum += sum * kCudaSlack + static_cast<double>(kCudaContextBytes);
  }
  p.peakBytes = static_cast<std::int64_t>(std::llround(sum));
  // The host holds the loaded checkpoint (fp32) and, for a conversion, the converted copy.
  const double hostWeights = 4.0 * static_cast<double>(sourceParameters > 0 ? sourceParameters : p.parameters);
  p.hostBytes = static_cast<std::int64_t>(hostWeights + (spec.conversion.enabled ? 4.0 * P : 0.0));
  return p;
}

// The nearest settings that fit: recompute at the same micro-batch, a smaller
// micro-batch, recompute with a smaller micro-batch (in this precision, then
// in bf16); else why nothing on one device does.
std::string suggestSettings(const ModelConfig& c, const RunSpec& spec, std::int64_t available,
                            std::int64_t sourceParameters, const MemoryPlan& plan) {
  if (!spec.recompute && plan.peakWithRecompute > 0 && plan.peakWithRecompute <= available)
    return "turn on recompute (" + formatBytes(plan.peakWithRecompute) + ")";
  const int mbFits = plan.largestMicroBatch;
  if (mbFits > 0) {
    return "micro_batch " + std::to_string(mbFits) + " fits; grad_accum " +
           std::to_string((spec.gradAccum * spec.microBatch + mbFits - 1) / mbFits) + " keeps the batch";
  }
  std::int64_t least = 0;
  for (const Precision precision : {spec.precision, Precision::Bf16}) {
    RunSpec s = spec;
    s.precision = precision;
    s.recompute = true;
    for (int mb = spec.microBatch; mb >= 1; mb = mb > 1 ? mb / 2 : 0) {  // halving: a few plans at most
      s.microBatch = mb;
      const std::int64_t peak = planOnce(c, s, available, sourceParameters).peakBytes;
      least = least == 0 ? peak : std::min(least, peak);
      if (peak > available) continue;
      std::string out = "recompute";
      if (precision != spec.precision) out += " and precision " + std::string(choiceName(precision));
      out += " at micro_batch " + std::to_string(mb) + " fits (" + formatBytes(peak) + ")";
      if (mb < spec.microBatch)
        out += "; grad_accum " + std::to_string((spec.gradAccum * spec.microBatch + mb - 1) / mb) + " keeps the batch";
      return out;
    }
  }
  return "even with recompute at micro_batch 1 it needs " + formatBytes(least) +
         ": this model needs a larger device, or its optimizer state sharded over several (ZeRO)";
}

}  // namespace

MemoryPlan planMemory(const ModelConfig& trained, const RunSpec& spec, std::int64_t availableBytes,
                      std::int64_t sourceParameters) {
  MemoryPlan plan = planOnce(trained, spec, availableBytes, sourceParameters);
  if (!spec.recompute) {
    RunSpec rc = spec;
    rc.recompute = true;
    plan.peakWithRecompute = planOnce(trained, rc, availableBytes, sourceParameters).peakBytes;
  }
  if (availableBytes > 0) {
    // The peak grows with the micro-batch: the largest that fits, by bisection.
    auto fitsAt = [&](int mb) {
      RunSpec s = spec;
      s.microBatch = mb;
      return planOnce(trained, s, availableBytes, sourceParameters).peakBytes <= availableBytes;
    };
    int lo = 0, hi = 1;
    while (hi <= (1 << 20) && fitsAt(hi)) {
      lo = hi;
      hi *= 2;
    }
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      (fitsAt(mid) ? lo : hi) = mid;
    }
    plan.largestMicroBatch = lo;
    if (!plan.fits()) plan.suggestion = suggestSettings(trained, spec, availableBytes, sourceParameters, plan);
  }
  return plan;
}

MemoryPlan planInferenceMemory(const ModelConfig& c, const RunSpec& spec, std::int64_t available) {
  MemoryPlan p;
  const std::vector<std::string> devices = deviceList(spec.device);
  p.cuda = !devices.empty() && devices.front().rfind("cuda", 0) == 0;
  p.precision = "fp32 (inference)";
  p.parameters = countParameters(c);
  p.availableBytes = available;
  p.peakPhase = "inference";
  const double bytes = 4;  // evaluation runs the weights in fp32
  p.items.push_back({"weights", static_cast<std::int64_t>(bytes * static_cast<double>(p.parameters)),
                     "4 B x " + count(static_cast<double>(p.parameters)) + " parameters"});
  // Multiple choice: one batch of requests (4,096 tokens), its hidden states
  // and its logits in fp32 with their fp64 log-softmax.
  if (!spec.evalTasks.empty()) {
    const double tokens = 4096, V = c.vocabSize, h = c.hiddenSize;
    p.items.push_back({"multiple-choice batch", static_cast<std::int64_t>(tokens * (12 * V + 8 * h)),
                       count(tokens) + " tokens x (logits fp32 + log-softmax fp64 + hidden states)"});
  }
  // Passkey: the cache of the longest prompt and its answer, and one step's logits.
  if (!spec.passkey.file.empty() && !spec.passkey.lengths.empty()) {
    const int longest = *std::max_element(spec.passkey.lengths.begin(), spec.passkey.lengths.end()) + 8;
    const KvBudget kv = currentKvBudget(c, DType::F32);
    p.items.push_back({"passkey cache", kv.bytesPerToken * longest,
                       std::to_string(longest) + " tokens x " + std::to_string(kv.bytesPerToken) + " B"});
    p.items.push_back({"passkey prefill",
                       static_cast<std::int64_t>(static_cast<double>(longest) * 4 * (c.vocabSize + 8.0 * c.hiddenSize)),
                       std::to_string(longest) + " tokens x (logits + hidden states) fp32"});
  }
  for (const MemoryItem& i : p.items) p.peakBytes += i.bytes;
  return p;
}

ModelConfig plannedModelConfig(const RunSpec& spec, std::int64_t* sourceParameters) {
  ModelConfig cfg;
  if (spec.kind == RunKind::Pretrain) {
    const bool trainedTokenizer = spec.data.tokenizer.empty() && spec.data.tokenFormat == TokenFormat::Text;
    cfg = builtinArchitecture(spec.architecture, trainedTokenizer ? spec.data.tokenizerVocab : 0);
    if (!spec.attention.empty()) cfg = attentionVariant(cfg, spec.attention, spec.attentionOptions, "spec");
    if (sourceParameters) *sourceParameters = 0;
    return cfg;
  }
  cfg = readHfConfig(fs::path(spec.modelDir) / "config.json");
  if (sourceParameters) *sourceParameters = countParameters(cfg);
  if (spec.conversion.enabled && !cfg.mla && !cfg.latent) {
    KvSettings kv = kvSettingsFor(spec.conversion);
    if (!spec.conversion.deepseek()) {
      try {
        kv.layers = resolveLayerSelection(spec.conversion.layers, cfg.numLayers, "spec.conversion.layers");
      } catch (const Error& e) {
        throw Error(ErrorCode::BadSpec, e.message() + " (" + spec.modelDir + ")");
      }
    }
    if (!spec.conversion.deepseek() && !spec.conversion.kvBudget.empty()) {
      // Planned at the budget's uniform d_kv: the same cache, and parameters
      // within a rank step per layer of the allocation's (known after the SVD).
      KvBudgetLimits limits;
      if (auto why = resolveKvBudget(cfg, kv, cfg.torchDType, spec.conversion.kvBudget, "spec.conversion.kv_budget",
                                     &limits)) {
        throw Error(ErrorCode::BadSpec, *why + " (" + spec.modelDir + ")");
      }
      kv.dKv = limits.uniformDKv;
    }
    if (auto why = checkKvSettings(cfg, kv))
      throw Error(ErrorCode::BadSpec, "spec.conversion: impossible for " + spec.modelDir + ": " + *why);
    if (spec.conversion.deepseek())
      return deepSeekConvertedConfig(cfg, kv, spec.conversion.factorisation() == Factorisation::Activations);
    MlaConversion m;
    m.ropeStrategy = spec.conversion.ropeStrategy;
    m.ropePairs = computeKvBudget(cfg, kv, DType::F32).effectiveRopePairs;
    m.dKv = kv.dKv;
    m.svdMethod = spec.conversion.svd;
    m.layers = kv.layers;
    cfg.mla = m;
  }
  return cfg;
}

std::int64_t availableBytesOn(const std::string& device, const std::vector<DeviceInfo>& devices) {
  std::int64_t least = 0;
  bool first = true;
  for (std::string d : deviceList(device)) {
    if (d == "cuda") d = "cuda:0";
    std::int64_t free = 0;
    for (const DeviceInfo& info : devices)
      if (info.id == d) free = static_cast<std::int64_t>(info.freeBytes);
    if (free <= 0) return 0;
    least = first ? free : std::min(least, free);
    first = false;
  }
  return least;
}

std::string chooseGpu(const RunSpec& spec, const ModelConfig& trained, std::int64_t sourceParameters,
                      const std::vector<DeviceInfo>& devices, const std::vector<std::string>& busy) {
  std::vector<const DeviceInfo*> gpus, idle;
  for (const DeviceInfo& d : devices) {
    if (d.id.rfind("cuda:", 0) != 0) continue;
    gpus.push_back(&d);
    if (std::find(busy.begin(), busy.end(), d.id) == busy.end()) idle.push_back(&d);
  }
  std::sort(idle.begin(), idle.end(),
            [](const DeviceInfo* a, const DeviceInfo* b) { return a->freeBytes > b->freeBytes; });
  std::sort(gpus.begin(), gpus.end(),
            [](const DeviceInfo* a, const DeviceInfo* b) { return a->memoryBytes > b->memoryBytes; });
  // The k GPUs of `pool` (first k) as one job; fits when the plan holds on the smallest of them.
  auto fitsOn = [&](const std::vector<const DeviceInfo*>& pool, std::size_t k, bool total) -> std::string {
    std::string list;
    std::uint64_t least = UINT64_MAX;
    for (std::size_t i = 0; i < k; ++i) {
      list += (i ? "," : "") + pool[i]->id;
      least = std::min(least, total ? pool[i]->memoryBytes : pool[i]->freeBytes);
    }
    RunSpec s = spec;
    s.device = list;
    const bool ok = planOnce(trained, s, static_cast<std::int64_t>(least), sourceParameters).peakBytes <=
                    static_cast<std::int64_t>(least);
    return ok ? list : std::string();
  };
  // One GPU; with ZeRO as many as it takes (the state splits over them).
  const std::size_t most = spec.zeroStage > 0 ? gpus.size() : std::min<std::size_t>(1, gpus.size());
  for (std::size_t k = 1; k <= std::min(most, idle.size()); ++k) {
    if (k == 1) {
      for (const DeviceInfo* d : idle) {
        const std::vector<const DeviceInfo*> one{d};
        if (const std::string got = fitsOn(one, 1, false); !got.empty()) return got;
      }
    } else if (const std::string got = fitsOn(idle, k, false); !got.empty()) {
      return got;
    }
  }
  for (std::size_t k = 1; k <= most; ++k)
    if (!fitsOn(gpus, k, true).empty()) return {};  // it will fit once those GPUs are free: wait
  return idle.empty() ? std::string("cuda") : idle.front()->id;
}

std::string formatBytes(std::int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof(buf),
                  std::fabs(v) >= 100  ? "%.0f %s"
                  : std::fabs(v) >= 10 ? "%.1f %s"
                                       : "%.2f %s",
                  v, kUnits[u]);
  return buf;
}

std::string describeMemoryPlan(const MemoryPlan& p) {
  std::string out;
  char line[256];
  const bool inference = p.peakPhase == "inference";  // an evaluation job: no micro-batches
  if (inference) {
    std::snprintf(line, sizeof(line), "memory per device (%s, %s)\n", p.cuda ? "cuda" : "cpu", p.precision.c_str());
  } else {
    std::snprintf(line, sizeof(line), "memory per device (%s, %s, %d rank%s, %s tokens per micro-batch)\n",
                  p.cuda ? "cuda" : "cpu", p.precision.c_str(), p.ranks, p.ranks == 1 ? "" : "s",
                  count(static_cast<double>(p.tokensPerMicroBatch)).c_str());
  }
  out += line;
  for (const MemoryItem& i : p.items) {
    std::snprintf(line, sizeof(line), "  %-30s %10s  %s\n", i.name.c_str(), formatBytes(i.bytes).c_str(),
                  i.detail.c_str());
    out += line;
  }
  std::snprintf(line, sizeof(line), "  %-30s %10s  at the %s\n", "peak", formatBytes(p.peakBytes).c_str(),
                p.peakPhase.c_str());
  out += line;
  if (p.peakWithRecompute > 0) {
    std::snprintf(line, sizeof(line), "  %-30s %10s\n", "peak with recompute",
                  formatBytes(p.peakWithRecompute).c_str());
    out += line;
  }
  if (p.known() && inference) {
    std::snprintf(line, sizeof(line), "%s: needs %s of the %s available per device\n",
                  p.fits() ? "fits" : "does not fit", formatBytes(p.peakBytes).c_str(),
                  formatBytes(p.availableBytes).c_str());
    out += line;
    if (!p.suggestion.empty()) out += "to fit: " + p.suggestion + "\n";
  } else if (p.known()) {
    std::snprintf(line, sizeof(line),
                  "%s: needs %s of the %s available per device; the largest micro_batch that fits is %d\n",
                  p.fits() ? "fits" : "does not fit", formatBytes(p.peakBytes).c_str(),
                  formatBytes(p.availableBytes).c_str(), p.largestMicroBatch);
    out += line;
    if (!p.suggestion.empty()) out += "to fit: " + p.suggestion + "\n";
  } else {
    out += "available memory unknown\n";
  }
  return out;
}

}  // namespace latentlab
