// Token shard files: header encoding and validation, memory-mapped reading,
// and the cached, atomic, cancellable tokenization of a corpus.
#include "data/token_shard.h"

#include <unistd.h>
#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/file_util.h"
#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {

void putU32(unsigned char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void putU64(unsigned char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint32_t getU32(const unsigned char* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
std::uint64_t getU64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
void putString(unsigned char* p, std::size_t field, const std::string& s) {
  std::memcpy(p, s.data(), std::min(s.size(), field - 1));
}
std::string getString(const unsigned char* p, std::size_t field) {
  const auto* c = reinterpret_cast<const char*>(p);
  return std::string(c, ::strnlen(c, field));
}

std::array<unsigned char, ShardHeader::kSize> encodeHeader(const ShardHeader& h) {
  std::array<unsigned char, ShardHeader::kSize> b{};
  std::memcpy(b.data(), ShardHeader::kMagic, 8);
  putU32(&b[8], h.version);
  putU32(&b[12], static_cast<std::uint32_t>(h.dtype));
  putU64(&b[16], h.count);
  putU32(&b[24], h.vocabSize);
  putU32(&b[28], static_cast<std::uint32_t>(h.eosId));
  putU64(&b[32], h.documents);
  putU32(&b[40], static_cast<std::uint32_t>(ShardHeader::kSize));
  putString(&b[48], ShardHeader::kHashField, h.tokenizerHash);
  putString(&b[144], ShardHeader::kFingerprintField, h.sourceFingerprint);
  return b;
}

// Decodes and checks a header; `fileSize` is the size of the whole file.
ShardHeader decodeHeader(const unsigned char* b, std::uintmax_t fileSize, const fs::path& path) {
  const std::string name = path.string();
  const char* hint = "Delete the file to have it rebuilt, or open it with the right layout option.";
  if (fileSize < ShardHeader::kSize) {
    if (fileSize >= 8 && std::memcmp(b, ShardHeader::kMagic, 8) != 0) {
      throw Error(ErrorCode::BadData, name + ": not a LatentLab token shard (wrong magic)", hint);
    }
    throw Error(ErrorCode::BadData,
                name + ": truncated token shard: " + std::to_string(fileSize) + " bytes, smaller than the " +
                    std::to_string(ShardHeader::kSize) + "-byte header",
                hint);
  }
  if (std::memcmp(b, ShardHeader::kMagic, 8) != 0) {
    throw Error(ErrorCode::BadData, name + ": not a LatentLab token shard (wrong magic)",
                "A nanoGPT .bin file has no header: open it with the raw u16 layout.");
  }
  ShardHeader h;
  h.version = getU32(&b[8]);
  if (h.version != ShardHeader::kVersion) {
    throw Error(ErrorCode::BadData,
                name + ": token shard version " + std::to_string(h.version) + " is not supported (expected " +
                    std::to_string(ShardHeader::kVersion) + ")",
                hint);
  }
  std::uint32_t dtype = getU32(&b[12]);
  if (dtype != 2 && dtype != 4) {
    throw Error(ErrorCode::BadData,
                name + ": field 'dtype' is " + std::to_string(dtype) + " bytes per id; expected 2 or 4", hint);
  }
  h.dtype = static_cast<TokenDtype>(dtype);
  h.count = getU64(&b[16]);
  h.vocabSize = getU32(&b[24]);
  h.eosId = static_cast<std::int32_t>(getU32(&b[28]));
  h.documents = getU64(&b[32]);
  if (getU32(&b[40]) != ShardHeader::kSize) {
    throw Error(ErrorCode::BadData,
                name + ": field 'header size' is " + std::to_string(getU32(&b[40])) + "; expected 256", hint);
  }
  h.tokenizerHash = getString(&b[48], ShardHeader::kHashField);
  h.sourceFingerprint = getString(&b[144], ShardHeader::kFingerprintField);
  std::uintmax_t payload = fileSize - ShardHeader::kSize;
  bool truncated = h.count > payload / dtype;
  if (truncated || payload != h.count * dtype) {
    throw Error(ErrorCode::BadData,
                name + ": " + (truncated ? "truncated" : "oversized") + " token shard: header says " +
                    std::to_string(h.count) + " ids of " + std::to_string(dtype) + " bytes but the file has " +
                    std::to_string(payload) + " bytes of ids",
                hint);
  }
  return h;
}

std::string rate(double perSecond, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f M%s/s", perSecond / 1e6, unit);
  return buf;
}

}  // namespace

std::string storedTokenizerHash(const std::string& tokenizerHash) {
  if (tokenizerHash.size() < ShardHeader::kHashField) return tokenizerHash;
  return "fnv1a:" + toHex16(fnv1a64(tokenizerHash.data(), tokenizerHash.size()));
}

TokenDtype dtypeForVocab(std::uint32_t vocabSize) {
  return vocabSize <= 65536 ? TokenDtype::U16 : TokenDtype::U32;
}

ShardHeader readShardHeader(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, path.string() + ": cannot open token shard");
  std::array<unsigned char, ShardHeader::kSize> b{};
  in.read(reinterpret_cast<char*>(b.data()), b.size());
  std::error_code ec;
  std::uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(ErrorCode::Io, path.string() + ": cannot read file size: " + ec.message());
  return decodeHeader(b.data(), size, path);
}

TokenShard TokenShard::open(const fs::path& path, ShardLayout layout) {
  TokenShard s;
  auto file = std::make_shared<MappedFile>(path);
  s.m_layout = layout;
  const auto* bytes = reinterpret_cast<const unsigned char*>(file->data());
  if (layout == ShardLayout::LatentLab) {
    std::array<unsigned char, ShardHeader::kSize> head{};
    std::memcpy(head.data(), bytes, std::min<std::size_t>(file->size(), head.size()));
    s.m_header = decodeHeader(head.data(), file->size(), path);
    s.m_dtype = s.m_header.dtype;
    s.m_count = s.m_header.count;
    s.m_ids = bytes + ShardHeader::kSize;
  } else {
    s.m_dtype = layout == ShardLayout::RawU16 ? TokenDtype::U16 : TokenDtype::U32;
    std::size_t width = static_cast<std::size_t>(s.m_dtype);
    const char* kind = layout == ShardLayout::RawU16 ? "uint16" : "uint32";
    if (file->size() == 0) {
      throw Error(ErrorCode::BadData, path.string() + ": empty token file", "Choose a tokenized .bin file.");
    }
    if (file->size() % width != 0) {
      throw Error(ErrorCode::BadData,
                  path.string() + ": size " + std::to_string(file->size()) + " is not a multiple of " +
                      std::to_string(width) + " bytes, so not raw " + kind + " ids (truncated?)",
                  layout == ShardLayout::RawU16 ? "Is this a uint32 file? Try the raw u32 layout." : "");
    }
    s.m_count = file->size() / width;
    s.m_ids = bytes;
    s.m_header.dtype = s.m_dtype;
    s.m_header.count = s.m_count;
  }
  s.m_file = std::move(file);
  return s;
}

const fs::path& TokenShard::path() const {
  static const fs::path kNone;
  return m_file ? m_file->path() : kNone;
}

std::uint32_t TokenShard::at(std::uint64_t index) const {
  assert(index < m_count);
  if (m_dtype == TokenDtype::U16) {
    const unsigned char* p = m_ids + 2 * index;
    return static_cast<std::uint32_t>(p[0] | (p[1] << 8));
  }
  return getU32(m_ids + 4 * index);
}

void TokenShard::copyTo(std::uint64_t begin, std::uint64_t count, std::int64_t* out) const {
  if (begin > m_count || count > m_count - begin) {
    throw Error(ErrorCode::Internal, path().string() + ": token range [" + std::to_string(begin) + ", +" +
                                         std::to_string(count) + ") outside the shard of " + std::to_string(m_count));
  }
  if (m_dtype == TokenDtype::U16) {
    const unsigned char* p = m_ids + 2 * begin;
    for (std::uint64_t i = 0; i < count; ++i, p += 2) out[i] = p[0] | (p[1] << 8);
  } else {
    const unsigned char* p = m_ids + 4 * begin;
    for (std::uint64_t i = 0; i < count; ++i, p += 4) out[i] = getU32(p);
  }
}

ShardBuildReport buildOrReuseShard(const Corpus& corpus, const EncodeFn& encode, const std::string& tokenizerHash,
                                   std::uint32_t vocabSize, std::int32_t eosId, const fs::path& cachePath,
                                   ProgressSink& progress, const CancelToken& cancel) {
  ShardBuildReport report;
  report.path = cachePath;
  report.sourceBytes = corpus.totalBytes();
  if (vocabSize == 0 || (eosId >= 0 && static_cast<std::uint32_t>(eosId) >= vocabSize)) {
    throw Error(ErrorCode::BadInput, "token shard " + cachePath.string() + ": EOS id " + std::to_string(eosId) +
                                         " outside the vocabulary of " + std::to_string(vocabSize));
  }
  ShardHeader want;
  want.dtype = dtypeForVocab(vocabSize);
  want.vocabSize = vocabSize;
  want.eosId = eosId;
  want.tokenizerHash = storedTokenizerHash(tokenizerHash);
  want.sourceFingerprint = corpus.fingerprint();

  std::error_code ec;
  if (fs::exists(cachePath, ec)) {
    try {
      ShardHeader have = readShardHeader(cachePath);
      if (have.tokenizerHash == want.tokenizerHash && have.sourceFingerprint == want.sourceFingerprint &&
          have.vocabSize == want.vocabSize && have.eosId == want.eosId && have.dtype == want.dtype) {
        report.header = have;
        progress.log(LogLevel::Info, "token shard " + cachePath.string() + " is up to date (" +
                                         std::to_string(have.count) + " tokens)");
        return report;
      }
      progress.log(LogLevel::Info,
                   "token shard " + cachePath.string() + " is stale (corpus or tokenizer changed); rebuilding");
    } catch (const Error& e) {
      progress.log(LogLevel::Warning, e.message() + "; rebuilding");
    }
  }
  if (cachePath.has_parent_path()) {
    fs::create_directories(cachePath.parent_path(), ec);
    if (ec) throw Error(ErrorCode::Io, cachePath.parent_path().string() + ": cannot create folder: " + ec.message());
  }

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto lastReport = start - std::chrono::seconds(1);
  const std::size_t width = static_cast<std::size_t>(want.dtype);
  std::vector<std::int32_t> ids;
  std::vector<unsigned char> buffer;
  buffer.reserve(1 << 20);
  ShardHeader& h = want;

  auto reportProgress = [&](std::uintmax_t bytes, bool force) {
    auto now = Clock::now();
    if (!force && now - lastReport < std::chrono::milliseconds(250)) return;
    lastReport = now;
    double secs = std::max(1e-9, std::chrono::duration<double>(now - start).count());
    progress.progress("tokenize", static_cast<double>(bytes), static_cast<double>(report.sourceBytes),
                      rate(static_cast<double>(bytes) / secs, "B") + ", " +
                          rate(static_cast<double>(h.count) / secs, "tok") + ", " + std::to_string(h.documents) +
                          " documents");
  };

  std::uintmax_t bytesRead = 0;
  atomicWrite(cachePath, [&](int fd) {
    auto header = encodeHeader(h);  // placeholder; rewritten with the final counts
    writeAll(fd, header.data(), header.size(), cachePath);
    DocumentReader reader(corpus);
    Document doc;
    auto flush = [&] {
      writeAll(fd, buffer.data(), buffer.size(), cachePath);
      buffer.clear();
    };
    auto put = [&](std::uint32_t id) {
      for (std::size_t i = 0; i < width; ++i) buffer.push_back(static_cast<unsigned char>(id >> (8 * i)));
    };
    reportProgress(0, true);
    while (true) {
      throwIfCancelled(cancel, "tokenizing " + corpus.root().string());
      if (!reader.next(doc)) break;
      ids.clear();
      encode(doc.text, ids);
      for (std::int32_t id : ids) {
        if (id < 0 || static_cast<std::uint32_t>(id) >= vocabSize) {
          std::string where = doc.source.string();
          if (doc.line != 0) where.append(":").append(std::to_string(doc.line));
          throw Error(ErrorCode::BadData,
                      where + ": the tokenizer produced id " + std::to_string(id) + " outside its vocabulary of " +
                          std::to_string(vocabSize),
                      "The tokenizer and its vocab size do not match.");
        }
        put(static_cast<std::uint32_t>(id));
      }
      if (eosId >= 0) put(static_cast<std::uint32_t>(eosId));
      h.count += ids.size() + (eosId >= 0 ? 1 : 0);
      ++h.documents;
      if (buffer.size() >= (1u << 20)) flush();
      bytesRead = reader.bytesRead();
      reportProgress(bytesRead, false);
    }
    flush();
    if (h.count == 0) {
      throw Error(ErrorCode::BadData, corpus.root().string() + ": empty corpus: it yields no tokens",
                  "Choose a corpus that contains text.");
    }
    header = encodeHeader(h);
    if (::lseek(fd, 0, SEEK_SET) != 0) throw Error(ErrorCode::Io, cachePath.string() + ": seek failed");
    writeAll(fd, header.data(), header.size(), cachePath);
  });
  reportProgress(bytesRead, true);

  report.rebuilt = true;
  report.header = h;
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  double secs = std::max(report.seconds, 1e-9);
  report.bytesPerSecond = static_cast<double>(bytesRead) / secs;
  report.tokensPerSecond = static_cast<double>(h.count) / secs;
  progress.log(LogLevel::Info, "tokenized " + corpus.root().string() + ": " + std::to_string(h.count) +
                                   " tokens from " + std::to_string(h.documents) + " documents in " +
                                   std::to_string(report.seconds) + " s (" + rate(report.bytesPerSecond, "B") + ", " +
                                   rate(report.tokensPerSecond, "tok") + ")");
  return report;
}

ShardLayout rawLayout(const std::string& format, const std::string& what) {
  if (format == "u16") return ShardLayout::RawU16;
  if (format == "u32") return ShardLayout::RawU32;
  throw Error(ErrorCode::BadInput, what + ": token format '" + format + "' is not u16 or u32");
}

std::vector<std::int64_t> readRawTokenIds(const std::filesystem::path& path, ShardLayout layout,
                                          std::uint32_t vocabSize, std::uint64_t maxTokens) {
  const TokenShard shard = TokenShard::open(path, layout);
  const std::uint64_t n = maxTokens > 0 ? std::min(maxTokens, shard.size()) : shard.size();
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  shard.copyTo(0, n, ids.data());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= static_cast<std::int64_t>(vocabSize)) {
      throw Error(ErrorCode::BadData, path.string() + ": token " + std::to_string(ids[i]) + " at index " +
                                          std::to_string(i) + " is outside the model's vocabulary (" +
                                          std::to_string(vocabSize) + ")");
    }
  }
  return ids;
}

}  // namespace latentlab
