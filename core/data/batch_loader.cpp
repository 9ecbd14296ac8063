// The batch loader: split ranges, seeded per-epoch window permutations, rank
// interleaving and saved positions (see batch_loader.h for the exact rules).
#include "data/batch_loader.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "latentlab/error.h"

namespace latentlab {

namespace {

std::uint64_t splitMix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

const char* splitName(Split split) {
  return split == Split::Train ? "train" : "validation";
}

}  // namespace

std::uint64_t boundedDraw(std::mt19937_64& rng, std::uint64_t bound) {
  // Values below 2^64 mod bound would make small results more likely; reject them.
  const std::uint64_t threshold = (0 - bound) % bound;
  while (true) {
    std::uint64_t x = rng();
    if (x >= threshold) return x % bound;
  }
}

SplitRange splitRange(std::uint64_t tokens, double validationShare, Split split) {
  auto validation = static_cast<std::uint64_t>(std::floor(static_cast<double>(tokens) * validationShare));
  validation = std::min(validation, tokens);
  std::uint64_t trainEnd = tokens - validation;
  return split == Split::Train ? SplitRange{0, trainEnd} : SplitRange{trainEnd, tokens};
}

nlohmann::json LoaderPosition::toJson() const {
  return nlohmann::json{{"epoch", epoch}, {"index", index}, {"seed", seed}};
}

LoaderPosition LoaderPosition::fromJson(const nlohmann::json& json, const std::string& source) {
  auto field = [&](const char* key) -> std::uint64_t {
    if (!json.is_object() || !json.contains(key)) {
      throw Error(ErrorCode::BadData, source + ": loader position field '" + key + "' is missing",
                  "The checkpoint's data position is damaged; restart the data stream from epoch 0.");
    }
    const auto& v = json.at(key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
      throw Error(ErrorCode::BadData,
                  source + ": loader position field '" + key + "' must be an unsigned integer, got " + v.dump());
    }
    return v.get<std::uint64_t>();
  };
  return LoaderPosition{field("epoch"), field("index"), field("seed")};
}

BatchLoader::BatchLoader(TokenShard shard, Split split, const LoaderOptions& options)
    : m_shard(std::move(shard)), m_split(split), m_options(options), m_seed(options.seed) {
  const std::string name = m_shard.path().string();
  if (options.batchSize < 1 || options.seqLen < 1) {
    throw Error(ErrorCode::BadInput, name + ": batch size and seq_len must be at least 1 (got " +
                                         std::to_string(options.batchSize) + " and " + std::to_string(options.seqLen) +
                                         ")");
  }
  if (options.worldSize < 1 || options.rank < 0 || options.rank >= options.worldSize) {
    throw Error(ErrorCode::BadInput,
                "rank " + std::to_string(options.rank) + " is outside world size " + std::to_string(options.worldSize));
  }
  if (!(options.validationShare >= 0.0 && options.validationShare < 1.0)) {
    throw Error(ErrorCode::BadInput,
                "validation share " + std::to_string(options.validationShare) + " must be in [0, 1)");
  }
  SplitRange range = splitRange(m_shard.size(), options.validationShare, split);
  m_begin = range.begin;
  m_end = range.end;
  const std::uint64_t tokens = m_end - m_begin;
  const std::uint64_t width = static_cast<std::uint64_t>(options.seqLen) + 1;
  const std::uint64_t globalRows =
      static_cast<std::uint64_t>(options.batchSize) * static_cast<std::uint64_t>(options.worldSize);
  m_windows = tokens / width;
  if (m_windows > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(ErrorCode::Unsupported, name + ": more than 2^32 windows in one split; use a longer seq_len");
  }
  if (m_windows < globalRows) {
    std::uint64_t needed = globalRows * width;
    throw Error(ErrorCode::BadData,
                name + ": the " + splitName(split) + " split has " + std::to_string(tokens) +
                    " tokens, but one batch of " + std::to_string(options.batchSize) + " rows x " +
                    std::to_string(options.worldSize) + " ranks x (seq_len " + std::to_string(options.seqLen) +
                    " + 1) needs " + std::to_string(needed),
                "Use a larger corpus, a shorter seq_len, a smaller batch" +
                    std::string(split == Split::Validation ? " or a larger validation share." : "."));
  }
  m_steps = m_windows / globalRows;
}

void BatchLoader::preparePermutation() {
  if (m_permEpoch == m_epoch && m_permSeed == m_seed && m_perm.size() == m_windows) return;
  m_perm.resize(m_windows);
  std::iota(m_perm.begin(), m_perm.end(), 0u);
  if (m_options.shuffle) {
    std::mt19937_64 rng(splitMix64(m_seed ^ splitMix64(m_epoch)));
    for (std::uint64_t i = m_windows - 1; i > 0; --i) {
      std::uint64_t j = boundedDraw(rng, i + 1);
      std::swap(m_perm[i], m_perm[j]);
    }
  }
  m_permEpoch = m_epoch;
  m_permSeed = m_seed;
}

Batch BatchLoader::next() {
  Batch b;
  next(b);
  return b;
}

void BatchLoader::next(Batch& out) {
  preparePermutation();
  const std::uint64_t world = static_cast<std::uint64_t>(m_options.worldSize);
  const std::uint64_t rows = static_cast<std::uint64_t>(m_options.batchSize);
  const std::uint64_t width = static_cast<std::uint64_t>(m_options.seqLen) + 1;
  out.rows = m_options.batchSize;
  out.cols = m_options.seqLen + 1;
  out.epoch = m_epoch;
  out.index = m_index;
  out.ids.resize(rows * width);
  out.windowStarts.resize(rows);
  const std::uint64_t base = m_index * rows * world + static_cast<std::uint64_t>(m_options.rank);
  for (std::uint64_t i = 0; i < rows; ++i) {
    std::uint64_t window = m_perm[base + i * world];
    std::uint64_t start = m_begin + window * width;
    out.windowStarts[i] = start;
    m_shard.copyTo(start, width, out.ids.data() + i * width);
  }
  if (++m_index == m_steps) {
    m_index = 0;
    ++m_epoch;
  }
}

void BatchLoader::restore(const LoaderPosition& position) {
  if (position.index > m_steps) {
    throw Error(ErrorCode::BadData,
                m_shard.path().string() + ": saved data position step " + std::to_string(position.index) +
                    " is beyond the " + std::to_string(m_steps) + " steps per epoch of this loader",
                "The corpus, seq_len, batch size or world size changed since the position was saved.");
  }
  m_seed = position.seed;
  m_epoch = position.epoch;
  m_index = position.index;
  if (m_index == m_steps) {
    m_index = 0;
    ++m_epoch;
  }
}

}  // namespace latentlab
