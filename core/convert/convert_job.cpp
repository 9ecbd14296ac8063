// convert(): the conversion pipeline behind the `convert` verb and the GUI's
// conversion panel, for both targets: validate (nothing written on error),
// load, calibrate, convert, save, and measure the held-out loss.

#include <algorithm>
#include <chrono>
#include <sstream>

#include "convert/converter.h"
#include "convert/deepseek_convert.h"
#include "convert/output_folder.h"
#include "data/token_shard.h"
#include "jobs/held_out_loss.h"
#include "latentlab/convert.h"
#include "latentlab/engine.h"
#include "model/torch_util.h"
#include "model/weights.h"

namespace latentlab {
namespace fs = std::filesystem;

std::vector<std::int64_t> tokenizeForModel(const fs::path& modelDir, const fs::path& textFile);

namespace {

struct Prepared {
  ModelConfig cfg;
  bool deepseek = false;
  ConversionOptions opts;  // mha2mla
  DeepSeekOptions dsOpts;  // deepseek
  bool needsCalibration = false;
  DType saveDType = DType::F32;
};

Prepared prepare(const ConvertSpec& spec, bool checkOutput = true) {
  Prepared p;
  p.deepseek = spec.target == ConversionTarget::DeepSeek;
  const bool activations = convertFactorisation(spec) == Factorisation::Activations;
  const fs::path configJson = spec.modelDir / "config.json";
  try {
    p.cfg = readHfConfig(configJson);
  } catch (const Error& e) {
    throw e.withContext("convert");
  }
  p.saveDType = spec.dtype.empty() ? p.cfg.torchDType : parseDType(spec.dtype);
  const bool haveData = !spec.calibration.dataFile.empty();
  if (p.deepseek) {
    p.dsOpts.ropePairs = spec.ropePairs;
    p.dsOpts.ropeWidth = spec.ropeWidth;
    p.dsOpts.freqFold = spec.freqFold;
    p.dsOpts.dKv = spec.dKv;
    p.dsOpts.activations = activations;
    if (spec.svd == SvdMethod::Split) {
      throw Error(ErrorCode::BadInput,
                  "DeepSeek-target conversion: DeepSeek-V3 has one joint latent; SVD_split does not apply",
                  "Use --svd joint, or the mha2mla target.");
    }
    validateDeepSeekConversion(p.cfg, p.dsOpts);
    if (!haveData) {
      throw Error(
          ErrorCode::BadInput, "DeepSeek-target conversion needs calibration data",
          "RoRoPE, the latent and its norm are set from the activations on calibration text: give --calib-data.");
    }
    p.needsCalibration = true;
  } else {
    p.opts.rope = spec.ropeStrategy;
    p.opts.ropePairs = spec.ropePairs;
    p.opts.dKv = spec.dKv;
    p.opts.svd = spec.svd;
    p.opts.twoNormScore = spec.twoNormScore;
    p.opts.activations = activations;
    p.opts.layers = resolveLayerSelection(spec.layers, p.cfg.numLayers, "--layers");
    if (!spec.kvBudget.empty()) {
      KvSettings ks = kvSettings(p.opts);
      ks.dKv = 1;
      if (auto why = resolveKvBudget(p.cfg, ks, p.saveDType, spec.kvBudget, "--kv-budget", &p.opts.kvBudget)) {
        throw Error(ErrorCode::BadInput, "MHA2MLA conversion: " + *why);
      }
    }
    validateConversion(p.cfg, p.opts, haveData);
    p.needsCalibration = p.opts.rope == RopeStrategy::TwoNorm || p.opts.activations || haveData;
  }
  if (!spec.heldOutText.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(spec.heldOutText, ec)) {
      throw Error(ErrorCode::BadInput,
                  spec.heldOutText.string() + ": held-out text " +
                      (fs::exists(spec.heldOutText, ec) ? "is not a regular file (a folder, FIFO or device)"
                                                        : "file not found"));
    }
  }
  if (p.needsCalibration) {
    const auto& c = spec.calibration;
    std::error_code ec;
    if (!fs::is_regular_file(c.dataFile, ec)) {
      throw Error(
          ErrorCode::BadInput,
          c.dataFile.string() + ": calibration data " +
              (fs::exists(c.dataFile, ec) ? "is not a regular file (a folder, FIFO or device)" : "file not found"),
          "Give token ids (u16/u32) from the training data.");
    }
    if (c.numSequences < 1 || c.seqLen < 1 || c.batchSize < 1) {
      throw Error(ErrorCode::BadInput,
                  "convert spec calibration: sequences, sequence length and batch must be at least 1");
    }
  }
  if (checkOutput) checkOutputFolder(spec.outDir, spec.modelDir, spec.force, "convert spec");
  return p;
}

// Token ids of the calibration file; raw files are read only as far as needed.
std::vector<std::int64_t> readTokenIds(const CalibrationSpec& c, const fs::path& modelDir, int vocab) {
  if (c.format == TokenFormat::Text) return tokenizeForModel(modelDir, c.dataFile);
  const auto wanted = static_cast<std::uint64_t>(c.numSequences) * static_cast<std::uint64_t>(c.seqLen);
  return readRawTokenIds(c.dataFile, c.format == TokenFormat::U32 ? ShardLayout::RawU32 : ShardLayout::RawU16,
                         static_cast<std::uint32_t>(vocab), wanted);
}

// The first numSequences windows of seqLen tokens, batched (B, seqLen).
std::vector<torch::Tensor> calibrationBatches(const CalibrationSpec& c, const std::vector<std::int64_t>& ids,
                                              ProgressSink& progress) {
  const std::int64_t L = c.seqLen;
  const std::int64_t available = static_cast<std::int64_t>(ids.size()) / L;
  if (available < 1) {
    throw Error(ErrorCode::BadData,
                c.dataFile.string() + ": " + std::to_string(ids.size()) +
                    " tokens, fewer than one calibration sequence of " + std::to_string(L),
                "Use a larger file or a shorter calibration sequence length.");
  }
  const std::int64_t n = std::min<std::int64_t>(available, c.numSequences);
  if (n < c.numSequences) {
    progress.log(LogLevel::Warning, "calibration: only " + std::to_string(n) + " of " + std::to_string(c.numSequences) +
                                        " sequences fit in " + c.dataFile.string());
  }
  auto all = torch::tensor(std::vector<std::int64_t>(ids.begin(), ids.begin() + n * L), torch::kInt64).view({n, L});
  std::vector<torch::Tensor> out;
  for (std::int64_t s = 0; s < n; s += c.batchSize)
    out.push_back(all.narrow(0, s, std::min<std::int64_t>(c.batchSize, n - s)));
  return out;
}

std::string summarisePairs(const ModelConfig& cfg, const MlaConversion& m, std::vector<int>& usage) {
  const int half = cfg.ropeDim() / 2;
  usage.assign(static_cast<std::size_t>(half), 0);
  bool same = true;
  const std::vector<int>* first = nullptr;
  std::string nope;
  for (int l = 0; l < cfg.numLayers; ++l) {
    if (!cfg.usesRope(l)) {  // NoPE layers keep no pairs: their key is all latent
      nope += " " + std::to_string(l);
      continue;
    }
    for (const auto& head : m.pairs[static_cast<std::size_t>(l)]) {
      if (first == nullptr) first = &head;
      same = same && head == *first;
      for (int k : head) ++usage[static_cast<std::size_t>(k)];
    }
  }
  std::ostringstream s;
  if (!nope.empty()) s << "layers without RoPE (latent only, r does not apply):" << nope << "; ";
  if (first == nullptr) return s.str();
  s << "r=" << m.ropePairs << " of " << half << " pairs; ";
  if (same) {
    s << "same for all layers and KV heads:";
    for (int k : *first) s << ' ' << k;
  } else {
    s << "per layer and KV head; most kept:";
    std::vector<int> order(static_cast<std::size_t>(half));
    for (int k = 0; k < half; ++k) order[static_cast<std::size_t>(k)] = k;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return usage[static_cast<std::size_t>(a)] > usage[static_cast<std::size_t>(b)];
    });
    for (int i = 0; i < std::min(half, 8); ++i)
      s << ' ' << order[static_cast<std::size_t>(i)] << " ("
        << usage[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] << ")";
  }
  return s.str();
}

std::string summariseRoRope(const LatentAttention& a, int half) {
  std::ostringstream s;
  const int fold = a.conversion ? a.conversion->freqFold : 1;
  int groups = 0;
  for (std::size_t i = 0; i < a.ropeSourcePairs.size(); ++i) {
    if (i == 0 || a.ropeSourcePairs[i] != a.ropeSourcePairs[i - 1]) ++groups;
  }
  const int perGroup = groups > 0 ? static_cast<int>(a.ropeSourcePairs.size()) / groups : 0;
  s << "shared RoPE key d_R=" << a.dRope << ": " << groups << " of " << half / fold << " frequency groups (fold "
    << fold << "), " << perGroup << " component" << (perGroup == 1 ? "" : "s") << " each; latent " << a.dC;
  return s.str();
}

}  // namespace

KvBudget checkConvertSpec(const ConvertSpec& spec) {
  Prepared p = prepare(spec);
  return computeKvBudget(p.cfg, p.deepseek ? kvSettings(p.dsOpts) : kvSettings(p.opts), p.saveDType);
}

namespace {
// Where the conversion's computation runs and in which dtype, and its calibration windows.
struct Inputs {
  torch::Device device = torch::kCPU;
  torch::ScalarType compute = torch::kFloat32;
  std::vector<torch::Tensor> batches;
};
Inputs conversionInputs(const ConvertSpec& spec, const Prepared& p, ProgressSink& progress) {
  Inputs in;
  in.device = parseDevice(spec.device);
  if (p.needsCalibration) {
    in.batches =
        calibrationBatches(spec.calibration, readTokenIds(spec.calibration, spec.modelDir, p.cfg.vocabSize), progress);
  }
  in.compute = p.cfg.torchDType == DType::F64 || p.saveDType == DType::F64 ? torch::kFloat64 : torch::kFloat32;
  return in;
}
}  // namespace

KvAllocation planKvBudget(const ConvertSpec& spec, ProgressSink& progress, const CancelToken& cancel) {
  return withTorchErrors("convert", [&]() {
    if (spec.kvBudget.empty()) throw Error(ErrorCode::BadInput, "planning a KV budget needs --kv-budget");
    Prepared p = prepare(spec, /*checkOutput=*/false);
    if (p.deepseek) throw Error(ErrorCode::BadInput, "--kv-budget applies to the mha2mla target only");
    Inputs in = conversionInputs(spec, p, progress);
    progress.progress("load", 0, 1, spec.modelDir.string());
    auto base = loadModel(spec.modelDir, in.device, in.compute);
    return allocateKvBudget(*base, p.opts, in.batches, progress, cancel);
  });
}

ConvertReport convert(const ConvertSpec& spec, ProgressSink& progress, const CancelToken& cancel) {
  return withTorchErrors("convert", [&]() {
    const auto start = std::chrono::steady_clock::now();
    auto stageStart = start;
    ConvertReport report;
    auto endStage = [&](const std::string& name) {
      const auto now = std::chrono::steady_clock::now();
      report.stages.push_back({name, std::chrono::duration<double>(now - stageStart).count()});
      stageStart = now;
    };
    Prepared p = prepare(spec);
    Inputs in = conversionInputs(spec, p, progress);
    const auto compute = in.compute;
    const auto& batches = in.batches;
    throwIfCancelled(cancel, "convert");
    progress.progress("load", 0, 1, spec.modelDir.string());
    auto base = loadModel(spec.modelDir, in.device, compute);
    endStage("load");

    ConversionStats stats;
    std::shared_ptr<CausalLm> converted, uniform;  // uniform: the budget's one-d_kv reference
    std::vector<DeepSeekLayerStats> dsStats;
    if (p.deepseek) {
      auto inputs = attentionInputStats(*base, batches, progress, cancel);
      stats.calibrationTokens = inputs.tokens;
      endStage("calibrate");
      converted = convertToDeepSeek(*base, p.dsOpts, inputs, progress, cancel, &dsStats);
      endStage("factorise");
      for (const auto& d : dsStats) {
        stats.reconstructionError.push_back(d.latentWeightError);
        stats.activationError.push_back(d.latentActError);
        report.ropeEnergyKept.push_back(d.ropeEnergyKept);
        report.balance.push_back(d.balance);
      }
    } else {
      converted =
          convertModel(*base, p.opts, batches, progress, cancel, &stats, spec.heldOutText.empty() ? nullptr : &uniform);
      report.allocation = stats.allocation;
      report.stages.push_back({"calibrate", stats.calibrateSeconds});
      report.stages.push_back({"select", stats.selectSeconds});
      report.stages.push_back({"factorise", stats.factoriseSeconds});
    }
    base.reset();
    stageStart = std::chrono::steady_clock::now();
    throwIfCancelled(cancel, "convert");

    // Save next to the target, then swap it in, so a failure leaves the old folder.
    progress.progress("save", 0, 1, spec.outDir.string());
    const fs::path target = spec.outDir;
    const auto leftover = writeReplacingFolder(target, [&](const fs::path& dir) {
      saveModel(*converted, dir, p.saveDType, {{"producer", "latentlab convert"}, {"source", spec.modelDir.string()}});
      copyTokenizerFiles(spec.modelDir, dir);
    });
    if (leftover) {
      progress.log(LogLevel::Warning,
                   "the old folder could not be removed completely; what is left of it is at " + leftover->string());
    }
    endStage("save");

    const ModelConfig mcfg = converted->config();
    converted.reset();
    report.outDir = target;
    report.target = spec.target;
    report.factorise = convertFactorisation(spec);
    if (mcfg.mla) {
      report.mla = *mcfg.mla;
      report.pairsSummary = summarisePairs(p.cfg, report.mla, report.pairUsage);
    } else {
      report.latent = *mcfg.latent;
      report.pairsSummary = summariseRoRope(*mcfg.latent, p.cfg.headDim / 2);
    }
    auto mean = [](const std::vector<double>& v) {
      double sum = 0.0;
      for (double e : v) sum += e;
      return v.empty() ? -1.0 : sum / static_cast<double>(v.size());
    };
    report.reconstructionError = stats.reconstructionError;
    report.meanReconstructionError = std::max(0.0, mean(stats.reconstructionError));
    report.activationError = stats.activationError;
    report.meanActivationError = mean(stats.activationError);
    if (!spec.heldOutText.empty()) {
      EvalOptions e;
      e.textFile = spec.heldOutText;
      e.seqLen = spec.calibration.seqLen;
      e.batchSize = spec.calibration.batchSize;
      e.device = spec.device;
      e.dtype = compute == torch::kFloat64 ? DType::F64 : DType::F32;
      e.model = spec.modelDir;
      report.heldOutLossBefore = evaluate(e, progress, cancel).meanLoss;
      e.model = target;
      auto after = evaluate(e, progress, cancel);
      report.heldOutLossAfter = after.meanLoss;
      report.heldOutTokens = after.tokens;
      if (uniform) {  // in memory, its weights rounded as the saved model's are
        uniform->to(toTorch(p.saveDType));
        uniform->to(compute);
        report.heldOutLossUniform =
            heldOutLoss(*uniform, tokenizeForModel(spec.modelDir, spec.heldOutText), e, progress, cancel).meanLoss;
        uniform.reset();
      }
      endStage("held-out");
    }
    report.before = currentKvBudget(p.cfg, p.saveDType);
    report.after = currentKvBudget(mcfg, p.saveDType);
    report.parametersBefore = countParameters(p.cfg);
    report.parametersAfter = countParameters(mcfg);
    report.calibrationTokens = stats.calibrationTokens;
    report.totalSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress.progress("save", 1, 1, "");
    return report;
  });
}

}  // namespace latentlab
