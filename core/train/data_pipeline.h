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
  std::filesystem::path tokenizerPath;   // empty for pre-tokenized data
  std::uint32_t vocabSize = 0;           // of the tokenizer (0 when unknown)
  std::int32_t eosId = -1;
  bool rebuilt = false;
  double tokenizeSeconds = 0;
};

// `modelDir` (may be empty) supplies tokenizer.json for fine-tuning runs.
// Caches live in `cacheDir` (tokenizers and shards keyed by content hashes).
PreparedData prepareData(const DataSpec& data, const std::filesystem::path& modelDir,
                         const std::filesystem::path& cacheDir, ProgressSink& progress, const CancelToken& cancel);

} // namespace latentlab
