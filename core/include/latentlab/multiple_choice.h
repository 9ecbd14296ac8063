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

#include "latentlab/model_config.h"
#include "latentlab/progress.h"
#include "latentlab/run_spec.h"

namespace latentlab {

struct ChoiceItem {
  std::string context;
  std::vector<std::string> choices;   // appended to the context as written (" Paris")
  int gold = 0;
  // Partial scoring (WinoGrande): one context per choice, each followed by
  // its entry of `choices` (the same continuation for all).
  std::vector<std::string> contexts;
};

// {"context": str, "choices": [str, ...], "gold": int} one a line; errors name
// the file, the line and the field.
std::vector<ChoiceItem> readChoiceItems(const std::filesystem::path& jsonl);

// The public files of the papers' zero-shot benchmarks, turned into items
// with lm-evaluation-harness's prompts (docs/evaluation.md):
//   arc         ARC-Easy / ARC-Challenge JSONL: "Question: {stem}\nAnswer:", " {choice}"
//   openbookqa  OpenBookQA JSONL (the ARC schema): "{stem}", " {choice}"
//   hellaswag   HellaSwag JSONL: "{activity}: {ctx_a} {Ctx_b}" and " {ending}", cleaned of WikiHow brackets
//   piqa        PIQA JSONL with its labels file: "Question: {goal}\nAnswer:", " {sol1}" / " {sol2}"
//   winogrande  WinoGrande JSONL, partial scoring: contexts "{sentence before _}{option}", the
//               continuation " {sentence after _}"
//   mmlu        an MMLU subject's CSV (question, A, B, C, D, answer): "The following are multiple
//               choice questions (with answers) about {subject}.\n\n", `shots` solved examples of
//               its dev CSV, "{question}\nA. ..\nD. ..\nAnswer:", choices " A" .. " D"
//   jsonl       LatentLab's own {"context", "choices", "gold"} format
// `extra` is PIQA's labels file (one 0/1 a line) or MMLU's dev CSV (for shots > 0).
std::vector<ChoiceItem> readTaskFile(const std::string& format, const std::filesystem::path& path,
                                     const std::filesystem::path& extra = {}, int shots = 0);

// A run spec's task: its file in its format (with piqa's labels or mmlu's dev CSV).
std::vector<ChoiceItem> readTaskFile(const EvalTaskSpec& task);

struct ChoiceEvalOptions {
  std::filesystem::path model;        // an HF folder with tokenizer.json
  std::string device = "cpu";
  DType dtype = DType::F32;
  int maxLength = 0;                  // tokens the model sees (0: max_position_embeddings); longer inputs keep their end
  std::int64_t limit = 0;             // score at most this many items (0: all)
  // Tokens per forward pass: requests (one per choice, any item) are sorted
  // longest first and packed into batches of at most this many padded tokens.
  std::int64_t batchTokens = 4096;
};

struct ChoiceEvalResult {
  std::int64_t items = 0;
  double acc = 0, accStderr = 0;      // stderr of the mean, as lm-eval (sample std / sqrt(n))
  double accNorm = 0, accNormStderr = 0;
  std::vector<std::vector<double>> logLikelihoods;   // per item, per choice
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
  explicit ChoiceScorer(const ChoiceEvalOptions& options);   // throws Error naming the file
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

} // namespace latentlab
