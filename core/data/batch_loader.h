// Deterministic, resumable, rank-sharded batches of (batch, seq_len + 1)
// token windows cut from a token shard, with a train/validation split.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <random>
#include <vector>

#include "data/token_shard.h"

namespace latentlab {

// The token stream of N ids is split in two contiguous parts:
//   train      = [0, N - V)      V = floor(N * validationShare)
//   validation = [N - V, N)      (the tail)
// Each part is cut into W = floor(tokens / (seqLen + 1)) windows of
// seqLen + 1 ids starting at part_begin + k * (seqLen + 1), so windows never
// share a token, and train and validation windows never overlap.
//
// Order: epoch e visits the windows in the order perm_e, a Fisher-Yates
// shuffle of 0..W-1 driven by std::mt19937_64 seeded with mix(seed, e) and an
// unbiased bounded draw (identical on every standard library); with shuffle
// off perm_e is the identity.
//
// Ranks: with worldSize R and batchSize B (rows per rank), global step s of an
// epoch covers perm_e[s*B*R .. (s+1)*B*R); rank r's row i is the window
// perm_e[s*B*R + i*R + r]. So ranks take every R-th window, never share one,
// and together see exactly the batch a one-rank loader with batchSize B*R
// (same seed) gives at step s: its row i*R + r is rank r's row i. An epoch has
// floor(W / (B*R)) steps; the remaining windows of the permutation are skipped
// that epoch (different ones each epoch when shuffled).
enum class Split { Train, Validation };

struct LoaderOptions {
  int batchSize = 8;             // rows per rank
  int seqLen = 256;              // a row holds seqLen + 1 ids (inputs + shifted targets)
  double validationShare = 0.0;  // in [0, 1)
  std::uint64_t seed = 1234;
  bool shuffle = true;
  int rank = 0;
  int worldSize = 1;
};

// Where a loader is: the next batch is step `index` of epoch `epoch`.
struct LoaderPosition {
  std::uint64_t epoch = 0;
  std::uint64_t index = 0;
  std::uint64_t seed = 0;

  nlohmann::json toJson() const;
  // Throws Error(BadData) naming the field when one is missing or not an
  // unsigned integer; `source` names where the JSON came from.
  static LoaderPosition fromJson(const nlohmann::json& json, const std::string& source);
  bool operator==(const LoaderPosition&) const = default;
};

struct Batch {
  std::vector<std::int64_t> ids;  // rows x cols, row-major
  int rows = 0;
  int cols = 0;                             // seqLen + 1
  std::vector<std::uint64_t> windowStarts;  // offset of each row in the shard
  std::uint64_t epoch = 0;
  std::uint64_t index = 0;  // step within the epoch
};

class BatchLoader {
 public:
  // Throws Error(BadInput) for invalid options and Error(BadData) when the
  // split is too short for one global batch, saying how many tokens it has
  // and how many are needed.
  BatchLoader(TokenShard shard, Split split, const LoaderOptions& options);

  // The next batch; advances the position (past the last step of an epoch it
  // moves to step 0 of the next).
  Batch next();
  void next(Batch& out);  // the same, reusing out's storage

  LoaderPosition position() const { return {m_epoch, m_index, m_seed}; }
  // Continues from a saved position (adopting its seed): the next batch is the
  // one the saving loader would have produced. Throws Error(BadData) when the
  // index is beyond this loader's steps per epoch.
  void restore(const LoaderPosition& position);

  std::uint64_t stepsPerEpoch() const { return m_steps; }
  std::uint64_t windowCount() const { return m_windows; }
  std::uint64_t splitBegin() const { return m_begin; }
  std::uint64_t splitEnd() const { return m_end; }
  const LoaderOptions& options() const { return m_options; }

 private:
  void preparePermutation();

  TokenShard m_shard;
  Split m_split;
  LoaderOptions m_options;
  std::uint64_t m_begin = 0;
  std::uint64_t m_end = 0;
  std::uint64_t m_windows = 0;
  std::uint64_t m_steps = 0;
  std::uint64_t m_epoch = 0;
  std::uint64_t m_index = 0;
  std::uint64_t m_seed = 0;
  std::vector<std::uint32_t> m_perm;  // of epoch m_permEpoch
  std::uint64_t m_permEpoch = ~0ULL;
  std::uint64_t m_permSeed = 0;
};

// An unbiased draw from [0, bound) (bound >= 1) by rejection, the same on
// every standard library (unlike std::uniform_int_distribution).
std::uint64_t boundedDraw(std::mt19937_64& rng, std::uint64_t bound);

// The splits' token ranges for a stream of `tokens` ids.
struct SplitRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};
SplitRange splitRange(std::uint64_t tokens, double validationShare, Split split);

}  // namespace latentlab
