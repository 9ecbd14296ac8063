// Token shards: u16/u32 round trips, cache reuse and invalidation, rejected
// headers and truncation, raw nanoGPT files, cancellation and progress.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "data/token_shard.h"
#include "data_test_util.h"
#include "test_support.h"

namespace latentlab {
namespace {
namespace fs = std::filesystem;
using namespace latentlab::test;

std::vector<std::uint32_t> allIds(const TokenShard& s) {
  std::vector<std::uint32_t> ids(s.size());
  for (std::uint64_t i = 0; i < s.size(); ++i) ids[i] = s.at(i);
  return ids;
}

ShardBuildReport buildBytes(const Corpus& c, const fs::path& cache, const std::string& hash = "byte-v1",
                            int* calls = nullptr) {
  NullProgress progress;
  CancelToken cancel;
  EncodeFn fn = [calls](std::string_view t, std::vector<std::int32_t>& out) {
    if (calls) ++*calls;
    encodeBytes(t, out);
  };
  return buildOrReuseShard(c, fn, hash, kByteVocab, kByteEos, cache, progress, cancel);
}

struct FileId {
  ino_t inode;
  std::int64_t mtimeNs;
};
FileId fileId(const fs::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return {st.st_ino, static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

TEST(TokenShard, U16RoundTripKeepsIdsAndSeparatesDocumentsWithEos) {
  fs::path dir = scratchDir("shard-u16");
  writeFile(dir / "src" / "a.txt", "hi");
  writeFile(dir / "src" / "b.txt", "w\xc3\xb6");  // "wö": three bytes
  Corpus c = Corpus::open(dir / "src");
  ShardBuildReport r = buildBytes(c, dir / "cache" / "bytes.tok");
  EXPECT_TRUE(r.rebuilt);
  EXPECT_EQ(r.header.dtype, TokenDtype::U16);
  EXPECT_EQ(r.header.count, 7u);
  EXPECT_EQ(r.header.documents, 2u);

  TokenShard s = TokenShard::open(dir / "cache" / "bytes.tok");
  EXPECT_EQ(s.dtype(), TokenDtype::U16);
  EXPECT_EQ(allIds(s), (std::vector<std::uint32_t>{'h', 'i', 256, 'w', 0xc3, 0xb6, 256}));
  EXPECT_EQ(s.header().tokenizerHash, "byte-v1");
  EXPECT_EQ(s.header().sourceFingerprint, c.fingerprint());
  EXPECT_EQ(s.header().vocabSize, kByteVocab);
  EXPECT_EQ(s.header().eosId, kByteEos);
  EXPECT_EQ(fs::file_size(dir / "cache" / "bytes.tok"), ShardHeader::kSize + 7 * 2);

  std::vector<std::int64_t> window(3);
  s.copyTo(4, 3, window.data());
  EXPECT_EQ(window, (std::vector<std::int64_t>{0xc3, 0xb6, 256}));
  EXPECT_THROW(s.copyTo(5, 3, window.data()), Error);
}

TEST(TokenShard, U32RoundTripForVocabulariesAbove65536) {
  fs::path dir = scratchDir("shard-u32");
  writeFile(dir / "a.txt", "ab");
  NullProgress progress;
  CancelToken cancel;
  auto r = buildOrReuseShard(Corpus::open(dir / "a.txt"), encodeBytesWide, "wide", kWideVocab, kWideEos,
                             dir / "wide.tok", progress, cancel);
  EXPECT_EQ(r.header.dtype, TokenDtype::U32);
  TokenShard s = TokenShard::open(dir / "wide.tok");
  EXPECT_EQ(s.dtype(), TokenDtype::U32);
  EXPECT_EQ(allIds(s), (std::vector<std::uint32_t>{kWideOffset + 'a', kWideOffset + 'b', kWideEos}));
  EXPECT_EQ(fs::file_size(dir / "wide.tok"), ShardHeader::kSize + 3 * 4);
  EXPECT_EQ(dtypeForVocab(65536), TokenDtype::U16);
  EXPECT_EQ(dtypeForVocab(65537), TokenDtype::U32);
}

TEST(TokenShard, UnchangedCorpusAndTokenizerReuseTheShard) {
  fs::path dir = scratchDir("shard-reuse");
  writeFile(dir / "src" / "a.txt", "some text");
  fs::path cache = dir / "a.tok";
  int calls = 0;
  ASSERT_TRUE(buildBytes(Corpus::open(dir / "src"), cache, "byte-v1", &calls).rebuilt);
  EXPECT_EQ(calls, 1);
  FileId before = fileId(cache);

  auto again = buildBytes(Corpus::open(dir / "src"), cache, "byte-v1", &calls);
  EXPECT_FALSE(again.rebuilt);
  EXPECT_EQ(calls, 1);  // the encoder never ran
  EXPECT_EQ(again.header.count, 10u);
  FileId after = fileId(cache);
  EXPECT_EQ(after.inode, before.inode);
  EXPECT_EQ(after.mtimeNs, before.mtimeNs);
}

TEST(TokenShard, ChangedCorpusFileOrTokenizerHashRebuilds) {
  fs::path dir = scratchDir("shard-invalidate");
  writeFile(dir / "src" / "a.txt", "version one");
  fs::path cache = dir / "a.tok";
  buildBytes(Corpus::open(dir / "src"), cache);

  writeFile(dir / "src" / "a.txt", "version two!");  // new size and mtime
  auto edited = buildBytes(Corpus::open(dir / "src"), cache);
  EXPECT_TRUE(edited.rebuilt);
  EXPECT_EQ(TokenShard::open(cache).size(), 13u);

  // Same size, only the modification time moves: still rebuilt.
  auto t = fs::last_write_time(dir / "src" / "a.txt");
  fs::last_write_time(dir / "src" / "a.txt", t + std::chrono::seconds(5));
  EXPECT_TRUE(buildBytes(Corpus::open(dir / "src"), cache).rebuilt);
  EXPECT_FALSE(buildBytes(Corpus::open(dir / "src"), cache).rebuilt);

  writeFile(dir / "src" / "new.txt", "added");
  EXPECT_TRUE(buildBytes(Corpus::open(dir / "src"), cache).rebuilt);

  auto retokenized = buildBytes(Corpus::open(dir / "src"), cache, "byte-v2");
  EXPECT_TRUE(retokenized.rebuilt);
  EXPECT_EQ(TokenShard::open(cache).header().tokenizerHash, "byte-v2");

  // A hash longer than the header field is stored hashed and still compared.
  std::string longHash(200, 'x');
  EXPECT_TRUE(buildBytes(Corpus::open(dir / "src"), cache, longHash).rebuilt);
  EXPECT_FALSE(buildBytes(Corpus::open(dir / "src"), cache, longHash).rebuilt);
  EXPECT_TRUE(buildBytes(Corpus::open(dir / "src"), cache, std::string(200, 'y')).rebuilt);
}

TEST(TokenShard, TruncatedShardIsRejectedNamingTheFile) {
  fs::path dir = scratchDir("shard-truncated");
  writeFile(dir / "a.txt", "truncate me please");
  fs::path cache = dir / "a.tok";
  buildBytes(Corpus::open(dir / "a.txt"), cache);
  fs::resize_file(cache, fs::file_size(cache) - 2);

  Error e = thrownError([&] { TokenShard::open(cache); });
  EXPECT_EQ(e.code(), ErrorCode::BadData);
  EXPECT_NE(e.message().find(cache.string()), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("truncated"), std::string::npos) << e.message();

  fs::resize_file(cache, 100);  // not even a whole header
  Error head = thrownError([&] { TokenShard::open(cache); });
  EXPECT_NE(head.message().find("truncated"), std::string::npos) << head.message();

  // A damaged cache is rebuilt, not fatal.
  EXPECT_TRUE(buildBytes(Corpus::open(dir / "a.txt"), cache).rebuilt);
  EXPECT_EQ(TokenShard::open(cache).size(), 19u);
}

TEST(TokenShard, WrongMagicVersionOrDtypeIsRejected) {
  fs::path dir = scratchDir("shard-header");
  writeFile(dir / "a.txt", "header checks");
  fs::path good = dir / "good.tok";
  buildBytes(Corpus::open(dir / "a.txt"), good);
  const std::string bytes = readBytes(good);

  auto corrupt = [&](std::size_t offset, char value, const std::string& expect) {
    std::string b = bytes;
    b[offset] = value;
    fs::path bad = dir / ("bad" + std::to_string(offset) + ".tok");
    writeFile(bad, b);
    Error e = thrownError([&] { TokenShard::open(bad); });
    EXPECT_EQ(e.code(), ErrorCode::BadData);
    EXPECT_NE(e.message().find(bad.string()), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(expect), std::string::npos) << e.message();
  };
  corrupt(0, 'X', "wrong magic");
  corrupt(8, 9, "version 9");
  corrupt(12, 3, "dtype");
}

TEST(TokenShard, NanoGptBinIsReadByExplicitOption) {
  fs::path dir = scratchDir("shard-raw");
  std::vector<std::uint32_t> ids{50256, 15496, 11, 995, 0, 65535};
  writeRawIds(dir / "train.bin", ids, 2);
  TokenShard s = TokenShard::open(dir / "train.bin", ShardLayout::RawU16);
  EXPECT_EQ(s.dtype(), TokenDtype::U16);
  EXPECT_EQ(allIds(s), ids);

  // Without the option it is not taken for a LatentLab shard.
  Error e = thrownError([&] { TokenShard::open(dir / "train.bin"); });
  EXPECT_EQ(e.code(), ErrorCode::BadData);
  EXPECT_NE(e.message().find("train.bin"), std::string::npos);

  writeRawIds(dir / "wide.bin", {70000, 1, 4000000000u}, 4);
  EXPECT_EQ(allIds(TokenShard::open(dir / "wide.bin", ShardLayout::RawU32)),
            (std::vector<std::uint32_t>{70000, 1, 4000000000u}));

  writeFile(dir / "odd.bin", std::string(7, '\0'));
  Error odd = thrownError([&] { TokenShard::open(dir / "odd.bin", ShardLayout::RawU16); });
  EXPECT_EQ(odd.code(), ErrorCode::BadData);
  EXPECT_NE(odd.message().find("odd.bin"), std::string::npos);
}

TEST(TokenShard, CancelledBuildLeavesNoShard) {
  fs::path dir = scratchDir("shard-cancel");
  writeFile(dir / "a.txt", "first");
  writeFile(dir / "b.txt", "second");
  NullProgress progress;
  CancelToken cancel;
  EncodeFn cancelAfterFirst = [&](std::string_view t, std::vector<std::int32_t>& out) {
    encodeBytes(t, out);
    cancel.request();
  };
  Error e = thrownError([&] {
    buildOrReuseShard(Corpus::open(dir), cancelAfterFirst, "h", kByteVocab, kByteEos, dir / "out" / "c.tok", progress,
                      cancel);
  });
  EXPECT_EQ(e.code(), ErrorCode::Cancelled);
  EXPECT_TRUE(fs::is_empty(dir / "out"));  // neither the shard nor its temporary
}

TEST(TokenShard, ProgressReportsBytesAndRates) {
  fs::path dir = scratchDir("shard-progress");
  writeFile(dir / "a.txt", std::string(5000, 'a'));
  RecordingProgress progress;
  CancelToken cancel;
  auto r =
      buildOrReuseShard(Corpus::open(dir), encodeBytes, "h", kByteVocab, kByteEos, dir / "a.tok", progress, cancel);
  ASSERT_FALSE(progress.calls.empty());
  EXPECT_LE(progress.calls.size(), 3u);  // throttled: start and end for a fast build
  const auto& last = progress.calls.back();
  EXPECT_EQ(last.stage, "tokenize");
  EXPECT_EQ(last.done, 5000.0);
  EXPECT_EQ(last.total, 5000.0);
  EXPECT_NE(last.detail.find("MB/s"), std::string::npos) << last.detail;
  EXPECT_NE(last.detail.find("Mtok/s"), std::string::npos) << last.detail;
  EXPECT_GT(r.tokensPerSecond, 0.0);
}

TEST(TokenShard, CorpusWithoutTextOrBadIdsIsBadData) {
  fs::path dir = scratchDir("shard-bad-data");
  writeFile(dir / "blank.jsonl", "\n   \n{\"text\": \"\"}\n");
  Error empty = thrownError([&] {
    buildBytes(Corpus::open(dir / "blank.jsonl", {CorpusFormat::Jsonl, {}, "text"}), dir / "blank.tok");
  });
  EXPECT_EQ(empty.code(), ErrorCode::BadData);
  EXPECT_NE(empty.message().find("blank.jsonl"), std::string::npos) << empty.message();
  EXPECT_FALSE(fs::exists(dir / "blank.tok"));

  writeFile(dir / "a.txt", "x");
  NullProgress progress;
  CancelToken cancel;
  EncodeFn outOfRange = [](std::string_view, std::vector<std::int32_t>& out) { out.push_back(300); };
  Error bad = thrownError([&] {
    buildOrReuseShard(Corpus::open(dir / "a.txt"), outOfRange, "h", kByteVocab, kByteEos, dir / "x.tok", progress,
                      cancel);
  });
  EXPECT_EQ(bad.code(), ErrorCode::BadData);
  EXPECT_NE(bad.message().find("id 300"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace latentlab
