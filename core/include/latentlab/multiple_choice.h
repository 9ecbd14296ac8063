// Zero-shot multiple-choice scoring as lm-evaluation-harness does it: each
// choice is a continuation of the context; its score is the summed
// log-probability of its tokens, with the context and the continuation
// encoded together and the continuation's tokens the tail (trailing spaces of
// the context move to the continuation; no BOS; an empty context is the EOS
// token). acc picks the highest sum, acc_norm the highest sum per character
// of the continuation. Items are read from JSONL (docs/evaluation.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "latentlab/kv_quant.h"
#include "latentlab/model_config.h"
#include "latentlab/progress.h"
#include "latentlab/run_spec.h"
#include "latentlab/task_files.h"

namespace latentlab {

struct ChoiceEvalOptions {
  std::filesystem::path model;  // an HF folder with tokenizer.json
  std::string device = "cpu";
  DType dtype = DType::F32;
  int maxLength = 0;       // tokens the model sees (0: max_position_embeddings); longer inputs keep their end
  std::int64_t limit = 0;  // score at most this many items (0: all)
  // Tokens per forward pass: requests (one per choice, any item) are sorted
  // longest first and packed into batches of at most this many padded tokens.
  std::int64_t batchTokens = 4096;
  // An item whose choices share at least this many leading tokens (its
  // context) is scored on its own: the shared tokens once into a KV cache
  // (the latent cache for converted models), every choice continuing it.
  // Shorter contexts are batched whole across items, which is faster on them
  // (docs/evaluation.md has the measurements). 0: every request batched whole.
  std::int64_t minSharedPrefix = 64;
  // A quantized cache (docs/kv_quant.md): every item's context goes into it
  // (whatever minSharedPrefix says) and its choices read the context's older
  // tokens back from codes; an item whose choices share no token is scored
  // whole, without a cache.
  KvQuantSettings kvQuant;
};

struct ChoiceEvalResult {
  std::int64_t items = 0;
  double acc = 0, accStderr = 0;  // stderr of the mean, as lm-eval (sample std / sqrt(n))
  double accNorm = 0, accNormStderr = 0;
  std::vector<std::vector<double>> logLikelihoods;  // per item, per choice
  std::vector<int> predicted, predictedNorm;
  double seconds = 0;
  // Cancelled before every item was scored: the figures cover the items
  // scored (`items` of them, their indices in `scoredItems`).
  bool cancelled = false;
  std::vector<std::size_t> scoredItems;
};

// Receives the figures so far (items, acc, acc_norm, their standard errors,
// seconds; no per-item lists) after each forward pass while a task is being
// scored, for storing partial results.
using ChoiceResultSink = std::function<void(const ChoiceEvalResult& sofar)>;

// Loads the model and its tokenizer once, then scores any number of tasks.
class ChoiceScorer {
 public:
  explicit ChoiceScorer(const ChoiceEvalOptions& options);  // throws Error naming the file
  ~ChoiceScorer();
  ChoiceScorer(const ChoiceScorer&) = delete;
  ChoiceScorer& operator=(const ChoiceScorer&) = delete;
  // Scores the first `limit` items (0: all). On cancel, returns what was
  // scored with `cancelled` set.
  ChoiceEvalResult score(const std::vector<ChoiceItem>& items, std::int64_t limit, ProgressSink& progress,
                         const CancelToken& cancel, const ChoiceResultSink& partial = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// One task: ChoiceScorer(options).score(items, options.limit, ...); throws
// Error(Cancelled) when cancelled.
ChoiceEvalResult evaluateChoices(const ChoiceEvalOptions& options, const std::vector<ChoiceItem>& items,
                                 ProgressSink& progress, const CancelToken& cancel);

}  // namespace latentlab
