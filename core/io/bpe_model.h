// The BPE model of tokenizer.json: vocabulary, ranked merges and the merge
// loop (linked list + priority queue), with a bounded per-word cache.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace latentlab::tok {

// Token ids are dense table indices: no released model comes near 2^24
// (16.7M) ids, and a larger id in a tokenizer.json is an error, not a table of
// gigabytes.
inline constexpr long long kMaxTokenIds = 1LL << 24;

// GPT-2's reversible byte <-> printable code point map (bytes_to_unicode).
char32_t byteToSymbol(std::uint8_t b);
// -1 when the code point is not one of the 256 symbols.
int symbolToByte(char32_t cp);
// The byte-level token string (UTF-8) of raw bytes, and back (nullopt when a
// code point of `token` is not a byte symbol).
std::string bytesToToken(std::string_view bytes);
std::optional<std::string> tokenToBytes(std::string_view token);

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept;
};
using StringIdMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

// Open-addressing map (id a, id b) -> (rank, merged id).
class MergeTable {
 public:
  struct Entry {
    std::uint64_t key = kEmpty;
    std::int32_t rank = 0;
    std::int32_t merged = 0;
  };
  static constexpr std::uint64_t kEmpty = ~0ULL;

  void reserve(std::size_t n);
  // A pair listed twice keeps its last rank, as HF's HashMap collect does.
  void insert(std::int32_t a, std::int32_t b, std::int32_t rank, std::int32_t merged);
  const Entry* find(std::int32_t a, std::int32_t b) const;
  std::size_t size() const { return m_size; }

 private:
  std::size_t slot(std::uint64_t key) const;
  std::vector<Entry> m_slots;
  std::size_t m_size = 0;
  std::uint64_t m_mask = 0;
};

class BpeModel {
 public:
  // `model` is the "model" object; byteLevel: words are raw bytes and the
  // vocabulary's byte-level strings are mapped back to bytes.
  static BpeModel fromJson(const nlohmann::json& model, const std::string& source, bool byteLevel);

  BpeModel();

  // Appends the ids of one pre-tokenized word.
  void encodeWord(std::string_view word, std::vector<std::int32_t>& out) const;

  std::int32_t idLimit() const { return static_cast<std::int32_t>(m_idToToken.size()); }
  const std::string& tokenString(std::int32_t id) const { return m_idToToken[static_cast<std::size_t>(id)]; }
  bool hasId(std::int32_t id) const;
  std::optional<std::int32_t> idOf(const std::string& token) const;

 private:
  void mergeWord(std::string_view word, std::vector<std::int32_t>& out) const;

  StringIdMap m_vocab;    // token string as in the file -> id
  StringIdMap m_symbols;  // the string BPE sees (raw bytes when byte-level) -> id
  std::vector<std::string> m_idToToken;
  std::vector<bool> m_present;
  std::array<std::int32_t, 256> m_byteIds{};
  MergeTable m_merges;
  bool m_byteLevel = false;
  bool m_ignoreMerges = false;
  bool m_fuseUnk = false;
  bool m_byteFallback = false;                    // characters outside the vocabulary as <0xNN> tokens
  std::array<std::int32_t, 256> m_fallbackIds{};  // id of <0xNN> per byte (byte_fallback)
  std::optional<std::int32_t> m_unk;

  struct WordCache {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> words;
  };
  static constexpr std::size_t kCacheLimit = 1 << 18;  // words; cleared when full
  static constexpr std::size_t kCacheMaxWordBytes = 256;
  std::unique_ptr<WordCache> m_cache;
};

}  // namespace latentlab::tok
