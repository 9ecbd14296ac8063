// convert(): the MHA2MLA pipeline behind the `convert` verb and the GUI's
// conversion panel: validate (nothing written on error), load, calibrate,
// factorise, save.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "convert/converter.h"
#include "data/token_shard.h"
#include "latentlab/convert.h"
#include "model/torch_util.h"
#include "model/weights.h"

namespace latentlab {
namespace fs = std::filesystem;

std::vector<std::int64_t> tokenizeForModel(const fs::path& modelDir, const fs::path& textFile);

namespace {

struct Prepared {
  ModelConfig cfg;
  ConversionOptions opts;
  DType saveDType = DType::F32;
};

SvdMethod parseSvd(const std::string& name) {
  if (name.empty() || name == "joint") return SvdMethod::Joint;
  if (name == "split") return SvdMethod::Split;
  throw Error(ErrorCode::BadInput, "convert spec svd: unknown SVD method '" + name + "'", "Use joint or split.");
}

Prepared prepare(const ConvertSpec& spec) {
  Prepared p;
  p.opts.rope = parseRopeStrategy(spec.ropeStrategy, "convert spec rope strategy");
  p.opts.ropePairs = spec.ropePairs;
  p.opts.dKv = spec.dKv;
  p.opts.svd = parseSvd(spec.svd);
  p.opts.twoNormScore = parseTwoNormScore(spec.twoNormScore, "convert spec two-norm score");
  const fs::path configJson = spec.modelDir / "config.json";
  try {
    p.cfg = readHfConfig(configJson);
  } catch (const Error& e) {
    throw e.withContext("convert");
  }
  p.saveDType = spec.dtype.empty() ? p.cfg.torchDType : parseDType(spec.dtype);
  const bool haveData = !spec.calibration.dataFile.empty();
  validateConversion(p.cfg, p.opts, haveData);
  if (p.opts.rope == RopeStrategy::TwoNorm) {
    const auto& c = spec.calibration;
    std::error_code ec;
    if (!fs::is_regular_file(c.dataFile, ec)) {
      throw Error(ErrorCode::BadInput, c.dataFile.string() + ": calibration data file not found",
                  "Give token ids (u16/u32) from the training data.");
    }
    if (c.format != "u16" && c.format != "u32" && c.format != "text") {
      throw Error(ErrorCode::BadInput, "convert spec calibration format: '" + c.format + "' is not u16, u32 or text");
    }
    if (c.numSequences < 1 || c.seqLen < 1 || c.batchSize < 1) {
      throw Error(ErrorCode::BadInput,
                  "convert spec calibration: sequences, sequence length and batch must be at least 1");
    }
  }
  if (spec.outDir.empty()) throw Error(ErrorCode::BadInput, "convert spec: no output folder given");
  std::error_code ec;
  if (fs::exists(spec.outDir, ec)) {
    if (!spec.force) {
      throw Error(ErrorCode::BadInput, spec.outDir.string() + ": output folder already exists",
                  "Choose a new folder, or pass --force to replace it.");
    }
    if (fs::equivalent(spec.outDir, spec.modelDir, ec)) {
      throw Error(ErrorCode::BadInput, spec.outDir.string() + ": the output folder is the input model",
                  "Write the converted model to a new folder.");
    }
    const bool replaceable = fs::is_directory(spec.outDir, ec) &&
                             (fs::is_empty(spec.outDir, ec) || fs::exists(spec.outDir / "config.json", ec));
    if (!replaceable) {
      throw Error(ErrorCode::BadInput,
                  spec.outDir.string() + ": exists and is not a model folder; --force only replaces model folders",
                  "Choose a new folder.");
    }
  }
  return p;
}

// Token ids of the calibration file; raw files are read only as far as needed.
std::vector<std::int64_t> readTokenIds(const CalibrationSpec& c, const fs::path& modelDir, int vocab) {
  if (c.format == "text") return tokenizeForModel(modelDir, c.dataFile);
  const auto wanted = static_cast<std::uint64_t>(c.numSequences) * static_cast<std::uint64_t>(c.seqLen);
  return readRawTokenIds(c.dataFile, rawLayout(c.format, "convert calibration"), static_cast<std::uint32_t>(vocab), wanted);
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

std::string summarisePairs(const MlaConversion& m, int half, std::vector<int>& usage) {
  usage.assign(static_cast<std::size_t>(half), 0);
  bool same = true;
  const auto& first = m.pairs.front().front();
  for (const auto& layer : m.pairs) {
    for (const auto& head : layer) {
      same = same && head == first;
      for (int k : head) ++usage[static_cast<std::size_t>(k)];
    }
  }
  std::ostringstream s;
  s << "r=" << m.ropePairs << " of " << half << " pairs; ";
  if (same) {
    s << "same for all layers and KV heads:";
    for (int k : first) s << ' ' << k;
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

}  // namespace

KvBudget checkConvertSpec(const ConvertSpec& spec) {
  Prepared p = prepare(spec);
  return computeKvBudget(p.cfg, kvSettings(p.opts), p.saveDType);
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
    const auto device = parseDevice(spec.device);
    std::vector<torch::Tensor> batches;
    if (p.opts.rope == RopeStrategy::TwoNorm) {
      batches = calibrationBatches(spec.calibration, readTokenIds(spec.calibration, spec.modelDir, p.cfg.vocabSize),
                                   progress);
    }
    throwIfCancelled(cancel, "convert");
    progress.progress("load", 0, 1, spec.modelDir.string());
    const auto compute =
        p.cfg.torchDType == DType::F64 || p.saveDType == DType::F64 ? torch::kFloat64 : torch::kFloat32;
    auto base = loadModel(spec.modelDir, device, compute);
    endStage("load");

    ConversionStats stats;
    auto converted = convertModel(*base, p.opts, batches, progress, cancel, &stats);
    report.stages.push_back({"calibrate", stats.calibrateSeconds});
    report.stages.push_back({"select", stats.selectSeconds});
    report.stages.push_back({"factorise", stats.factoriseSeconds});
    stageStart = std::chrono::steady_clock::now();
    throwIfCancelled(cancel, "convert");

    // Save next to the target, then swap it in, so a failure leaves the old folder.
    progress.progress("save", 0, 1, spec.outDir.string());
    fs::path target = spec.outDir;
    std::error_code ec;
    const bool replacing = fs::exists(target, ec);
    fs::path writeTo = target;
    if (replacing) writeTo += ".converting-" + std::to_string(::getpid());
    fs::remove_all(writeTo, ec);
    saveModel(*converted, replacing ? writeTo : target, p.saveDType,
              {{"producer", "latentlab convert"}, {"source", spec.modelDir.string()}});
    copyTokenizerFiles(spec.modelDir, replacing ? writeTo : target);
    if (replacing) {
      fs::remove_all(target, ec);
      if (ec) throw Error(ErrorCode::Io, target.string() + ": cannot remove the old folder: " + ec.message());
      fs::rename(writeTo, target, ec);
      if (ec)
        throw Error(ErrorCode::Io, target.string() + ": cannot move the converted model into place: " + ec.message());
    }
    endStage("save");

    const ModelConfig& mcfg = converted->config();
    report.outDir = target;
    report.mla = *mcfg.mla;
    report.pairsSummary = summarisePairs(report.mla, p.cfg.headDim / 2, report.pairUsage);
    report.reconstructionError = stats.reconstructionError;
    double sum = 0.0;
    for (double e : stats.reconstructionError) sum += e;
    report.meanReconstructionError =
        stats.reconstructionError.empty() ? 0.0 : sum / static_cast<double>(stats.reconstructionError.size());
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
