// Long-context retrieval, the passkey test: a random number hidden at a depth
// of a haystack of filler text, the model asked to repeat it, scored by exact
// match over a grid of prompt lengths and depths. Partial RoPE and low-rank
// keys show their cost here first. docs/evaluation.md describes the prompt.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "latentlab/kv_quant.h"
#include "latentlab/model_config.h"
#include "latentlab/progress.h"

namespace latentlab {

struct PasskeyCell;

// Tokens a passkey answer may take (the prompt plus these fit the context).
inline constexpr int kPasskeyAnswerTokens = 8;
// The most keys a cell takes (the CLI and run specs alike).
inline constexpr int kMaxPasskeyTrials = 100000;

// What answers a prompt: the generated token ids for the prompt's ids, at
// most `maxNewTokens` of them. Empty: the model's own greedy generation.
using PasskeyAnswerer =
    std::function<std::vector<std::int32_t>(const std::vector<std::int32_t>& promptIds, int maxNewTokens)>;

struct PasskeyOptions {
  std::filesystem::path model;                               // an HF folder with tokenizer.json
  std::filesystem::path haystack;                            // a text file; its tokens are repeated to fill each prompt
  std::vector<int> lengths = {1024};                         // prompt lengths in tokens
  std::vector<double> depths = {0.0, 0.25, 0.5, 0.75, 1.0};  // where the key sits in the filler, 0..1
  int trials = 3;                                            // keys per cell
  std::uint64_t seed = 0;
  std::string device = "cpu";
  DType dtype = DType::F32;
  KvQuantSettings kvQuant;   // the answers generated over a quantized cache (docs/kv_quant.md)
  PasskeyAnswerer answerer;  // for scripted answers in tests; empty = the model
  // Each cell once all its trials are done, or with the trials done so far
  // (marked partial) when the test is cancelled inside it.
  std::function<void(const PasskeyCell&)> onCell;
  // Cells to leave out (already stored); their keys are still drawn, so the
  // other cells hide the same keys as in an uninterrupted run.
  std::function<bool(int length, double depth)> skipCell;
};

struct PasskeyTrial {
  std::string key;                // the 5-digit number hidden
  std::string answer;             // the generated text
  bool correct = false;           // the first number in the answer is the key
  std::int64_t keyPosition = 0;   // token index where the key's sentence starts
  std::int64_t promptTokens = 0;  // the prompt's length in tokens (the cell's length)
};

struct PasskeyCell {
  int length = 0;
  double depth = 0;
  std::vector<PasskeyTrial> trials;
  bool partial = false;  // cancelled before all its trials
  int correct() const;
};

struct PasskeyResult {
  std::vector<PasskeyCell> cells;  // lengths outer, depths inner, in the order given
};

// Runs the grid; throws Error naming the file when the model, tokenizer or
// haystack is unusable, or when a length does not fit the model's context.
PasskeyResult runPasskey(const PasskeyOptions& options, ProgressSink& progress, const CancelToken& cancel);

// The store's metric name of a passkey cell (task "passkey"): "len=1024,depth=0.5".
std::string passkeyMetricName(int length, double depth);
bool parsePasskeyMetricName(const std::string& metric, int& length, double& depth);

// True when the first run of digits in `answer` is `key`.
bool passkeyAnswered(const std::string& answer, const std::string& key);

}  // namespace latentlab
