// The conversion step of convert-finetune runs: calibration windows from the
// run's own training data, then MHA2MLA in memory.
#include <nlohmann/json.hpp>

#include "convert/converter.h"
#include "data/batch_loader.h"
#include "data/token_shard.h"
#include "latentlab/error.h"
#include "latentlab/run_spec.h"
#include "model/llama.h"

namespace latentlab {

std::shared_ptr<CausalLm> convertForRun(CausalLm& base, const ConversionSpec& conv, const TokenShard& calibration,
                                        ProgressSink& progress, const CancelToken& cancel, nlohmann::json& notes) {
  ConversionOptions opts;
  opts.rope = parseRopeStrategy(conv.ropeStrategy, "spec.conversion.rope_strategy");
  opts.ropePairs = conv.ropePairs;
  opts.dKv = conv.dKv;
  opts.svd = conv.svd == "split" ? SvdMethod::Split : SvdMethod::Joint;
  opts.twoNormScore = parseTwoNormScore(conv.twoNormScore, "spec.conversion.two_norm_score");
  std::vector<torch::Tensor> batches;
  if (opts.rope == RopeStrategy::TwoNorm) {
    // The first calib_sequences windows of calib_seq_len tokens of the
    // training split, in order (no shuffle), 4 per forward pass.
    LoaderOptions lo;
    lo.batchSize = 1;
    lo.seqLen = conv.calibSeqLen - 1;
    lo.shuffle = false;
    BatchLoader loader(calibration, Split::Train, lo);
    const int n = static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(conv.calibSequences), loader.windowCount()));
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
  ConversionStats stats;
  auto converted = convertModel(base, opts, batches, progress, cancel, &stats);
  double meanErr = 0;
  for (double e : stats.reconstructionError) meanErr += e;
  if (!stats.reconstructionError.empty()) meanErr /= static_cast<double>(stats.reconstructionError.size());
  notes["conversion"] = {{"rope_strategy", conv.ropeStrategy},
                         {"rope_pairs", converted->config().mla->ropePairs},
                         {"d_kv", conv.dKv},
                         {"svd", conv.svd},
                         {"two_norm_score", conv.twoNormScore},
                         {"calibration_tokens", stats.calibrationTokens},
                         {"mean_reconstruction_error", meanErr},
                         {"reconstruction_error", stats.reconstructionError}};
  progress.log(LogLevel::Info, "converted to MLA: " + conv.ropeStrategy + ", d_kv " + std::to_string(conv.dKv) +
                                   ", mean reconstruction error " + std::to_string(meanErr));
  return converted;
}

} // namespace latentlab
