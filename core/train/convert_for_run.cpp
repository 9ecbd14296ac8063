// The conversion step of convert-finetune runs: calibration windows from the
// run's own training data, then MHA2MLA or the DeepSeek target in memory.
#include <nlohmann/json.hpp>

#include "convert/converter.h"
#include "convert/deepseek_convert.h"
#include "data/batch_loader.h"
#include "data/token_shard.h"
#include "latentlab/error.h"
#include "latentlab/run_spec.h"
#include "model/llama.h"
#include "model/torch_util.h"
#include "model/weights.h"
#include "train/data_pipeline.h"
#include "train/train_step.h"

namespace latentlab {

namespace {
double meanOf(const std::vector<double>& v) {
  double sum = 0.0;
  for (double e : v) sum += e;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

std::shared_ptr<CausalLm> toDeepSeek(CausalLm& base, const ConversionSpec& conv,
                                     const std::vector<torch::Tensor>& batches, ProgressSink& progress,
                                     const CancelToken& cancel, nlohmann::json& notes) {
  DeepSeekOptions o;
  o.ropePairs = conv.ropePairs;
  o.ropeWidth = conv.ropeWidth;
  o.freqFold = conv.freqFold;
  o.dKv = conv.dKv;
  o.activations = conv.factorisation() == Factorisation::Activations;
  const auto inputs = attentionInputStats(base, batches, progress, cancel);
  std::vector<DeepSeekLayerStats> stats;
  auto converted = convertToDeepSeek(base, o, inputs, progress, cancel, &stats);
  std::vector<double> weightErr, actErr, kept;
  for (const auto& s : stats) {
    weightErr.push_back(s.latentWeightError);
    actErr.push_back(s.latentActError);
    kept.push_back(s.ropeEnergyKept);
  }
  const auto& a = *converted->config().latent;
  notes["conversion"] = {{"target", "deepseek"},
                         {"d_rope", a.dRope},
                         {"freq_fold", conv.freqFold},
                         {"kv_lora_rank", a.dC},
                         {"factorise", std::string(choiceName(conv.factorisation()))},
                         {"calibration_tokens", inputs.tokens},
                         {"rope_energy_kept", kept},
                         {"mean_reconstruction_error", meanOf(weightErr)},
                         {"reconstruction_error", weightErr},
                         {"mean_activation_error", meanOf(actErr)},
                         {"activation_error", actErr}};
  progress.log(LogLevel::Info, "converted to DeepSeek-V3 attention: d_R " + std::to_string(a.dRope) + ", latent " +
                                   std::to_string(a.dC) + " (" + std::string(choiceName(conv.factorisation())) +
                                   "), mean activation error " + std::to_string(meanOf(actErr)));
  return converted;
}
}  // namespace

namespace {
// The MHA2MLA options of a spec's conversion for `base`; a KV budget in bytes
// per token of the base's weights (the cache's dtype).
ConversionOptions mha2mlaOptions(CausalLm& base, const ConversionSpec& conv) {
  ConversionOptions opts;
  opts.rope = conv.ropeStrategy;
  opts.ropePairs = conv.ropePairs;
  opts.dKv = conv.dKv;
  opts.svd = conv.svd;
  opts.twoNormScore = conv.twoNormScore;
  opts.activations = conv.factorisation() == Factorisation::Activations;
  opts.layers = resolveLayerSelection(conv.layers, base.config().numLayers, "spec.conversion.layers");
  if (!conv.kvBudget.empty()) {
    // Bytes at the checkpoint's own dtype (config.json torch_dtype), whatever
    // precision the run trains in: what the Conversion tab and the plan count.
    const DType cacheDType = base.config().torchDType;
    if (auto why = resolveKvBudget(base.config(), kvSettings(opts), cacheDType, conv.kvBudget,
                                   "spec.conversion.kv_budget", &opts.kvBudget)) {
      throw Error(ErrorCode::BadSpec, *why);
    }
  }
  return opts;
}

// The first calib_sequences windows of calib_seq_len tokens of the training
// split, in order (no shuffle), 4 per forward pass; none when the conversion
// needs no calibration.
std::vector<torch::Tensor> calibrationWindows(const ConversionSpec& conv, const ConversionOptions& opts,
                                              const TokenShard& calibration) {
  std::vector<torch::Tensor> batches;
  if (!conv.deepseek() && opts.rope != RopeStrategy::TwoNorm && !opts.activations) return batches;
  LoaderOptions lo;
  lo.batchSize = 1;
  lo.seqLen = conv.calibSeqLen - 1;
  lo.shuffle = false;
  BatchLoader loader(calibration, Split::Train, lo);
  const int n =
      static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(conv.calibSequences), loader.windowCount()));
  std::vector<torch::Tensor> rows;
  for (int i = 0; i < n; ++i) {
    Batch b = loader.next();
    rows.push_back(torch::tensor(b.ids, torch::kInt64).view({1, b.cols}));
    if (rows.size() == 4 || i == n - 1) {
      batches.push_back(torch::cat(rows, 0));
      rows.clear();
    }
  }
  return batches;
}
}  // namespace

KvAllocation planRunKvBudget(const RunSpec& spec, const std::filesystem::path& workspace, ProgressSink& progress,
                             const CancelToken& cancel) {
  return withTorchErrors("kv budget", [&]() {
    if (spec.kind != RunKind::ConvertFinetune || spec.conversion.deepseek() || spec.conversion.kvBudget.empty()) {
      throw Error(ErrorCode::BadSpec, "a KV allocation needs a convert-finetune spec with conversion.kv_budget");
    }
    const std::filesystem::path modelDir = spec.modelDir;
    auto base = loadModel(modelDir, torch::kCPU, torch::kFloat32);
    const ConversionOptions opts = mha2mlaOptions(*base, spec.conversion);
    const PreparedData data = prepareData(spec.data, modelDir, workspace / "cache", progress, cancel);
    ConversionStats stats;
    std::shared_ptr<CausalLm> uniform;
    auto allocated = convertModel(*base, opts, calibrationWindows(spec.conversion, opts, data.shard), progress, cancel,
                                  &stats, &uniform);
    KvAllocation a = *stats.allocation;
    if (spec.data.validationShare > 0 && spec.evalBatches > 0) {
      // The run's own first validation: its windows, batches and loss.
      LoaderOptions lo;
      lo.batchSize = spec.microBatch;
      lo.seqLen = spec.data.seqLen;
      lo.validationShare = spec.data.validationShare;
      lo.seed = spec.seed;
      lo.shuffle = false;
      BatchLoader val(data.shard, Split::Validation, lo);
      progress.progress("held-out", 0, 2, "");
      a.heldOutLoss = evaluateLoss(*allocated, val, spec.evalBatches, torch::kCPU, nullptr, false);
      a.uniformHeldOutLoss = evaluateLoss(*uniform, val, spec.evalBatches, torch::kCPU, nullptr, false);
      progress.progress("held-out", 2, 2, "");
    }
    return a;
  });
}

std::shared_ptr<CausalLm> convertForRun(CausalLm& base, const ConversionSpec& conv, const TokenShard& calibration,
                                        ProgressSink& progress, const CancelToken& cancel, nlohmann::json& notes) {
  ConversionOptions opts;
  if (!conv.deepseek()) opts = mha2mlaOptions(base, conv);
  const std::vector<torch::Tensor> batches = calibrationWindows(conv, opts, calibration);
  if (conv.deepseek()) return toDeepSeek(base, conv, batches, progress, cancel, notes);
  ConversionStats stats;
  auto converted = convertModel(base, opts, batches, progress, cancel, &stats);
  const double meanErr = meanOf(stats.reconstructionError);
  const MlaConversion& mla = *converted->config().mla;
  notes["conversion"] = {{"target", "mha2mla"},
                         {"factorise", std::string(choiceName(conv.factorisation()))},
                         {"rope_strategy", std::string(choiceName(conv.ropeStrategy))},
                         {"rope_pairs", mla.ropePairs},
                         {"d_kv", mla.dKv},
                         {"svd", std::string(choiceName(conv.svd))},
                         {"two_norm_score", std::string(choiceName(conv.twoNormScore))},
                         {"calibration_tokens", stats.calibrationTokens},
                         {"mean_reconstruction_error", meanErr},
                         {"reconstruction_error", stats.reconstructionError}};
  if (stats.allocation) {
    notes["conversion"]["kv_budget"] = conv.kvBudget;
    notes["conversion"]["kv_budget_bytes_per_token"] = stats.allocation->limits.budgetBytes;
    notes["conversion"]["d_kv_per_layer"] = stats.allocation->layerDKv;
    notes["conversion"]["uniform_d_kv"] = stats.allocation->limits.uniformDKv;
  }
  if (!stats.activationError.empty()) {
    notes["conversion"]["mean_activation_error"] = meanOf(stats.activationError);
    notes["conversion"]["activation_error"] = stats.activationError;
  }
  std::string dKv = std::to_string(mla.dKv);
  if (stats.allocation) {
    dKv = "per layer";
    for (int d : stats.allocation->layerDKv) dKv += " " + std::to_string(d);
    dKv += " (budget " + std::to_string(stats.allocation->limits.budgetBytes) + " bytes per token)";
  }
  progress.log(LogLevel::Info, "converted to MLA: " + std::string(choiceName(conv.ropeStrategy)) + ", d_kv " + dKv +
                                   ", mean reconstruction error " + std::to_string(meanErr));
  return converted;
}

}  // namespace latentlab
