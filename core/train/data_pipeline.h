// From a RunSpec's data section to token shards: opens the corpus, finds or
// trains the tokenizer, tokenizes once into a cached shard in the workspace.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "data/token_shard.h"
#include "latentlab/progress.h"
#include "latentlab/run_spec.h"

namespace latentlab {

struct PreparedData {
  TokenShard shard;
  std::filesystem::path tokenizerPath;  // empty for pre-tokenized data
  std::uint32_t vocabSize = 0;          // of the tokenizer (0 when unknown)
  std::int32_t eosId = -1;
  bool rebuilt = false;
  double tokenizeSeconds = 0;
};

// The embedding rows of the model a run trains, and the file that says so.
struct ModelVocab {
  int size = 0;                  // 0: no model yet (pre-training sizes it from the tokenizer)
  std::filesystem::path source;  // its config.json
};

// `modelDir` (may be empty) supplies tokenizer.json for fine-tuning runs.
// Caches live in `cacheDir` (tokenizers and shards keyed by content hashes).
// A tokenizer with more ids than `model` has rows is refused before any text
// is tokenized (Error(BadData) naming both files and both sizes).
PreparedData prepareData(const DataSpec& data, const std::filesystem::path& modelDir,
                         const std::filesystem::path& cacheDir, ProgressSink& progress, const CancelToken& cancel,
                         const ModelVocab& model = {});

}  // namespace latentlab
