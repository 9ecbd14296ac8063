// trainBpeTokenizer: the written tokenizer.json loads in HF `tokenizers` and
// in ours with identical encodings; training is deterministic and cancellable.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "io/tokenizer.h"
#include "latentlab/error.h"
#include "test_support.h"
#include "tok_test_util.h"

namespace latentlab::test {
namespace {
namespace fs = std::filesystem;

struct CountingProgress : ProgressSink {
  int calls = 0;
  int logs = 0;
  void progress(std::string_view, double, double, std::string_view) override { ++calls; }
  void log(LogLevel, std::string_view) override { ++logs; }
};

fs::path trainSmall(const fs::path& dir, int vocab, CountingProgress* progress = nullptr) {
  fs::path out = dir / "tokenizer.json";
  BpeTrainOptions opts;
  opts.vocabSize = vocab;
  CountingProgress local;
  CancelToken cancel;
  trainBpeTokenizer(referenceCorpus(), opts, out, progress ? *progress : local, cancel);
  return out;
}

TEST(BpeTrainer, OutputLoadsInHfAndEncodesIdentically) {
  ASSERT_EQ(peerProblem(), "");
  CountingProgress progress;
  fs::path path = trainSmall(scratchDir("tok-train"), 1500, &progress);
  EXPECT_GT(progress.calls, 2);
  EXPECT_EQ(progress.logs, 1);
  Tokenizer tok = Tokenizer::fromFile(path);
  EXPECT_EQ(tok.vocabSize(), 1500);
  EXPECT_EQ(tok.eosId(), tok.tokenId("<|endoftext|>"));
  EXPECT_EQ(*tok.eosId(), 1499);  // the special token follows the merges

  std::vector<std::string> cases = fixedCases();
  for (auto& s : randomUtf8Strings(77, 200)) cases.push_back(std::move(s));
  cases.push_back(generatedCorpus(30000, 5));
  HfOutput ref = hfEncode(path, cases);
  EXPECT_EQ(ref.vocabSize, 1500);
  for (std::size_t i = 0; i < cases.size(); ++i)
    ASSERT_EQ(tok.encode(cases[i]), ref.ids[i]) << "case " << i << " " << printable(cases[i].substr(0, 200));
  for (const auto& s : cases) ASSERT_EQ(tok.decode(tok.encode(s)), s);
}

TEST(BpeTrainer, StandardFileLayout) {
  fs::path path = trainSmall(scratchDir("tok-layout"), 600);
  auto j = nlohmann::json::parse(readTextFile(path));
  EXPECT_EQ(j.at("version"), "1.0");
  EXPECT_EQ(j.at("model").at("type"), "BPE");
  EXPECT_EQ(j.at("pre_tokenizer").at("type"), "ByteLevel");
  EXPECT_EQ(j.at("pre_tokenizer").at("add_prefix_space"), false);
  EXPECT_EQ(j.at("pre_tokenizer").at("trim_offsets"), true);
  EXPECT_EQ(j.at("pre_tokenizer").at("use_regex"), true);
  EXPECT_EQ(j.at("decoder").at("type"), "ByteLevel");
  EXPECT_EQ(j.at("post_processor").at("type"), "ByteLevel");
  EXPECT_EQ(j.at("added_tokens").size(), 1u);
  EXPECT_EQ(j.at("added_tokens")[0].at("special"), true);
  EXPECT_EQ(j.at("model").at("vocab").size(), 600u);
  EXPECT_EQ(j.at("model").at("merges").size(), 600u - 256u - 1u);
  EXPECT_EQ(j.at("model").at("vocab").at("Ġ"), 32);  // byte alphabet first, id = byte
}

TEST(BpeTrainer, DeterministicAndHonoursMinFrequency) {
  fs::path a = trainSmall(scratchDir("tok-det-a"), 800);
  fs::path b = trainSmall(scratchDir("tok-det-b"), 800);
  EXPECT_EQ(readTextFile(a), readTextFile(b));

  fs::path dir = scratchDir("tok-minfreq");
  fs::path tiny = dir / "tiny.txt";
  std::ofstream(tiny) << "abab abab cd";
  BpeTrainOptions opts;
  opts.vocabSize = 1000;
  opts.minFrequency = 2;
  NullProgress progress;
  CancelToken cancel;
  trainBpeTokenizer({tiny}, opts, dir / "tok.json", progress, cancel);
  Tokenizer tok = Tokenizer::fromFile(dir / "tok.json");
  EXPECT_EQ(tok.encode("abab").size(), 1u);
  EXPECT_EQ(tok.encode(" cd").size(), 3u);  // seen once: below min frequency, never merged
}

TEST(BpeTrainer, CancelThrowsCancelledAndWritesNothing) {
  fs::path dir = scratchDir("tok-cancel");
  BpeTrainOptions opts;
  NullProgress progress;
  CancelToken cancel;
  cancel.request();
  try {
    trainBpeTokenizer(referenceCorpus(), opts, dir / "tokenizer.json", progress, cancel);
    FAIL() << "expected Error(Cancelled)";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Cancelled);
  }
  EXPECT_FALSE(fs::exists(dir / "tokenizer.json"));
}

TEST(BpeTrainer, RejectsTooSmallVocabulary) {
  BpeTrainOptions opts;
  opts.vocabSize = 100;
  NullProgress progress;
  CancelToken cancel;
  EXPECT_THROW(trainBpeTokenizer(referenceCorpus(), opts, scratchDir("tok-small") / "t.json", progress, cancel), Error);
}

}  // namespace
}  // namespace latentlab::test
