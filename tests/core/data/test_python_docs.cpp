// The readers on real files: the Debian python3.11-doc reST sources, tokenized
// with the byte encoder (skipped when the package is not installed).
#include <gtest/gtest.h>

#include <iostream>
#include <optional>

#include "data/batch_loader.h"
#include "data/token_shard.h"
#include "data_test_util.h"
#include "test_support.h"

namespace latentlab {
namespace {
namespace fs = std::filesystem;
using namespace latentlab::test;

std::optional<Corpus> demoCorpus() {
  try {
    return defaultDemoCorpus();
  } catch (const Error& e) {
    EXPECT_NE(e.hint().find("install python3.11-doc"), std::string::npos) << e.hint();
    return std::nullopt;
  }
}

TEST(PythonDocs, TutorialTokenizesByteForByteAndFeedsTheLoader) {
  auto docs = demoCorpus();
  if (!docs) GTEST_SKIP() << "python3.11-doc is not installed";
  Corpus tutorial = Corpus::open(docs->root() / "tutorial", {CorpusFormat::Text, {".rst.txt"}, "text"});
  ASSERT_GE(tutorial.files().size(), 10u);

  fs::path cache = scratchDir("pydocs") / "tutorial.tok";
  RecordingProgress progress;
  CancelToken cancel;
  auto r = buildOrReuseShard(tutorial, encodeBytes, "byte-v1", kByteVocab, kByteEos, cache, progress, cancel);
  ASSERT_TRUE(r.rebuilt);
  EXPECT_EQ(r.header.documents, tutorial.files().size());
  EXPECT_EQ(r.header.count, tutorial.totalBytes() + tutorial.files().size());  // one id per byte + EOS each

  // The first document decodes back to the first file, followed by EOS.
  TokenShard shard = TokenShard::open(cache);
  const std::string first = readBytes(tutorial.files()[0].path);
  std::string decoded;
  for (std::uint64_t i = 0; i < first.size(); ++i) decoded.push_back(static_cast<char>(shard.at(i)));
  EXPECT_EQ(decoded, first);
  EXPECT_EQ(shard.at(first.size()), static_cast<std::uint32_t>(kByteEos));

  LoaderOptions o;
  o.batchSize = 8;
  o.seqLen = 256;
  o.validationShare = 0.05;
  BatchLoader loader(shard, Split::Train, o);
  Batch b = loader.next();
  for (std::int64_t id : b.ids) ASSERT_LE(id, kByteEos);
  EXPECT_FALSE(
      buildOrReuseShard(tutorial, encodeBytes, "byte-v1", kByteVocab, kByteEos, cache, progress, cancel).rebuilt);
}

TEST(PythonDocs, WholeDemoCorpusThroughput) {
  auto docs = demoCorpus();
  if (!docs) GTEST_SKIP() << "python3.11-doc is not installed";
  fs::path cache = scratchDir("pydocs-all") / "all.tok";
  NullProgress progress;
  CancelToken cancel;
  auto r = buildOrReuseShard(*docs, encodeBytes, "byte-v1", kByteVocab, kByteEos, cache, progress, cancel);
  EXPECT_EQ(r.header.count, docs->totalBytes() + r.header.documents);
  EXPECT_GT(r.header.documents, 400u);
  std::cout << "[ measure  ] " << docs->files().size() << " files, " << docs->totalBytes() / 1e6 << " MB -> "
            << r.header.count << " tokens in " << r.seconds << " s: " << r.bytesPerSecond / 1e6 << " MB/s, "
            << r.tokensPerSecond / 1e6 << " Mtok/s\n";
  RecordProperty("tokens_per_second", static_cast<int>(r.tokensPerSecond));
}

}  // namespace
}  // namespace latentlab
