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

std::shared_ptr<CausalLm> convertForRun(CausalLm& base, const ConversionSpec& conv, const TokenShard& calibration,
                                        ProgressSink& progress, const CancelToken& cancel, nlohmann::json& notes) {
  ConversionOptions opts;
  if (!conv.deepseek()) {
    opts.rope = conv.ropeStrategy;
    opts.ropePairs = conv.ropePairs;
    opts.dKv = conv.dKv;
    opts.svd = conv.svd;
    opts.twoNormScore = conv.twoNormScore;
    opts.activations = conv.factorisation() == Factorisation::Activations;
    opts.layers = resolveLayerSelection(conv.layers, base.config().numLayers, "spec.conversion.layers");
  }
  std::vector<torch::Tensor> batches;
  if (conv.deepseek() || opts.rope == RopeStrategy::TwoNorm || opts.activations) {
    // The first calib_sequences windows of calib_seq_len tokens of the
    // training split, in order (no shuffle), 4 per forward pass.
    LoaderOptions lo;
    lo.batchSize = 1;
    lo.seqLen = conv.calibSeqLen - 1;
    lo.shuffle = false;
    BatchLoader loader(calibration, Split::Train, lo);
    const int n = static_cast<int>(
        std::min<std::uint64_t>(static_cast<std::uint64_t>(conv.calibSequences), loader.windowCount()));
    std::vector<torch::Tensor> rows;
    for (int i = 0; i < n; ++i) {
      Batch b = loader.next();
      rows.push_back(torch::tensor(b.ids, torch::kInt64).view({1, b.cols}));
      if (rows.size() == 4 || i == n - 1) {
        batches.push_back(torch::cat(rows, 0));
        rows.clear();
      }
    }
  }
  if (conv.deepseek()) return toDeepSeek(base, conv, batches, progress, cancel, notes);
  ConversionStats stats;
  auto converted = convertModel(base, opts, batches, progress, cancel, &stats);
  const double meanErr = meanOf(stats.reconstructionError);
  notes["conversion"] = {{"target", "mha2mla"},
                         {"factorise", std::string(choiceName(conv.factorisation()))},
                         {"rope_strategy", std::string(choiceName(conv.ropeStrategy))},
                         {"rope_pairs", converted->config().mla->ropePairs},
                         {"d_kv", conv.dKv},
                         {"svd", std::string(choiceName(conv.svd))},
                         {"two_norm_score", std::string(choiceName(conv.twoNormScore))},
                         {"calibration_tokens", stats.calibrationTokens},
                         {"mean_reconstruction_error", meanErr},
                         {"reconstruction_error", stats.reconstructionError}};
  if (!stats.activationError.empty()) {
    notes["conversion"]["mean_activation_error"] = meanOf(stats.activationError);
    notes["conversion"]["activation_error"] = stats.activationError;
  }
  progress.log(LogLevel::Info, "converted to MLA: " + std::string(choiceName(conv.ropeStrategy)) + ", d_kv " +
                                   std::to_string(conv.dKv) + ", mean reconstruction error " + std::to_string(meanErr));
  return converted;
}

}  // namespace latentlab
