// Token shards: a corpus tokenized once into a cached, memory-mapped file of
// little-endian ids, rebuilt only when the sources or the tokenizer change.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus.h"
#include "latentlab/progress.h"

namespace latentlab {

class MappedFile;

// Fills `out` (cleared before each call) with the token ids of `text`.
using EncodeFn = std::function<void(std::string_view text, std::vector<std::int32_t>& out)>;

enum class TokenDtype : std::uint32_t { U16 = 2, U32 = 4 };  // value = bytes per id

// How a shard file is laid out on disk.
enum class ShardLayout {
  LatentLab,  // the header below, then the ids
  RawU16,     // nanoGPT's train.bin/val.bin: little-endian uint16 ids, no header
  RawU32,     // little-endian uint32 ids, no header
};

// The LatentLab shard format, version 1 (all fields little-endian):
//   offset  size  field
//        0     8  magic "LLTOKSH1"
//        8     4  version (1)
//       12     4  bytes per id: 2 (u16, when vocab_size <= 65536) or 4 (u32)
//       16     8  token count
//       24     4  vocab size
//       28     4  EOS id (signed; -1 = none)
//       32     8  document count
//       40     4  header size (256) = offset of the first id
//       44     4  reserved (0)
//       48    96  tokenizer hash, NUL-padded (longer hashes are stored hashed)
//      144    64  source fingerprint, NUL-padded
//      208    48  reserved (0)
//      256     -  the ids
struct ShardHeader {
  static constexpr char kMagic[9] = "LLTOKSH1";
  static constexpr std::uint32_t kVersion = 1;
  static constexpr std::size_t kSize = 256;
  static constexpr std::size_t kHashField = 96;
  static constexpr std::size_t kFingerprintField = 64;

  std::uint32_t version = kVersion;
  TokenDtype dtype = TokenDtype::U16;
  std::uint64_t count = 0;
  std::uint32_t vocabSize = 0;
  std::int32_t eosId = -1;
  std::uint64_t documents = 0;
  std::string tokenizerHash;  // as stored (see storedTokenizerHash)
  std::string sourceFingerprint;
};

// The form a tokenizer hash takes in the header: itself when it fits the
// field, else "fnv1a:" + a 64-bit hash of it.
std::string storedTokenizerHash(const std::string& tokenizerHash);
TokenDtype dtypeForVocab(std::uint32_t vocabSize);

// A read-only, memory-mapped token shard. Copies share the mapping.
class TokenShard {
 public:
  // Opens and validates a shard. A wrong magic, version or dtype, or a size
  // that does not match the count (truncated) throws Error(BadData) naming the
  // file. Raw layouts accept any non-empty file whose size is a multiple of
  // the id size.
  static TokenShard open(const std::filesystem::path& path, ShardLayout layout = ShardLayout::LatentLab);

  std::uint64_t size() const { return m_count; }
  TokenDtype dtype() const { return m_dtype; }
  ShardLayout layout() const { return m_layout; }
  const ShardHeader& header() const { return m_header; }  // zero-filled for raw layouts
  const std::filesystem::path& path() const;

  std::uint32_t at(std::uint64_t index) const;  // unchecked beyond a debug assert
  // Copies ids [begin, begin + count) as int64 into out. Throws Error(Internal)
  // when the range leaves the shard.
  void copyTo(std::uint64_t begin, std::uint64_t count, std::int64_t* out) const;

 private:
  std::shared_ptr<const MappedFile> m_file;
  const unsigned char* m_ids = nullptr;
  std::uint64_t m_count = 0;
  TokenDtype m_dtype = TokenDtype::U16;
  ShardLayout m_layout = ShardLayout::LatentLab;
  ShardHeader m_header;
};

// Reads and checks a LatentLab shard header from `path`; throws Error(BadData)
// naming the file on a bad or truncated header, Error(Io) when unreadable.
ShardHeader readShardHeader(const std::filesystem::path& path);

// "u16" / "u32" -> the raw layout; throws Error(BadInput) naming `what` otherwise.
ShardLayout rawLayout(const std::string& format, const std::string& what);

// The first `maxTokens` ids (0 = all) of a raw id file as int64, each checked
// against `vocabSize`: an id outside it throws Error(BadData) naming the file
// and the index. Shared by eval and conversion calibration.
std::vector<std::int64_t> readRawTokenIds(const std::filesystem::path& path, ShardLayout layout,
                                          std::uint32_t vocabSize, std::uint64_t maxTokens = 0);

struct ShardBuildReport {
  std::filesystem::path path;
  bool rebuilt = false;  // false: the cached shard was still valid
  ShardHeader header;
  std::uintmax_t sourceBytes = 0;
  double seconds = 0;  // tokenizing and writing (0 when reused)
  double bytesPerSecond = 0;
  double tokensPerSecond = 0;
};

// Tokenizes `corpus` into `cachePath`, or reuses the shard already there when
// its header records the same tokenizer hash, source fingerprint, vocab size
// and EOS id. Every document is followed by `eosId`. Written atomically (a
// temporary file, fsync, rename), so a killed or cancelled build never leaves
// half a shard. Reports progress (stage "tokenize", bytes of `totalBytes`,
// with MB/s and tokens/s) at most 4 times a second; throws Error(Cancelled).
// An id outside [0, vocabSize) or a corpus that yields no tokens throws
// Error(BadData).
ShardBuildReport buildOrReuseShard(const Corpus& corpus, const EncodeFn& encode, const std::string& tokenizerHash,
                                   std::uint32_t vocabSize, std::int32_t eosId, const std::filesystem::path& cachePath,
                                   ProgressSink& progress, const CancelToken& cancel);

}  // namespace latentlab
