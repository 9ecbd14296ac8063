// The passkey test: every prompt is exactly its cell's length, the key sits at
// its depth of the filler, keys are reproducible from the seed, answers are
// scored by their first number, and lengths past the model's context or a
// missing haystack are refused naming the file. A small model with a real
// tokenizer trained on the Python tutorial; the CLI prints the same grid.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "latentlab/error.h"
#include "latentlab/passkey.h"
#include "model_test_util.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

fs::path smallModel() {
  static const fs::path dir = [] {
    const fs::path d = scratchDir("passkey") / "model";
    writeSmallTextModel(d, /*maxPositions=*/512);
    return d;
  }();
  return dir;
}

const char* kHaystack = "/usr/share/doc/python3.11/html/_sources/tutorial/controlflow.rst.txt";

}  // namespace

TEST(Passkey, PromptsHaveTheirLengthAndTheKeyAtItsDepth) {
  PasskeyOptions o;
  o.model = smallModel();
  o.haystack = kHaystack;
  o.lengths = {128, 400};
  o.depths = {0.0, 0.5, 1.0};
  o.trials = 2;
  o.seed = 9;
  NullProgress quiet;
  CancelToken cancel;
  const PasskeyResult r = runPasskey(o, quiet, cancel);
  ASSERT_EQ(r.cells.size(), 6u);
  for (const PasskeyCell& c : r.cells) {
    ASSERT_EQ(c.trials.size(), 2u);
    for (const PasskeyTrial& t : c.trials) {
      EXPECT_EQ(t.promptTokens, c.length);
      EXPECT_EQ(t.key.size(), 5u);
      EXPECT_EQ(t.correct, passkeyAnswered(t.answer, t.key));
    }
  }
  // Depth 0: the key right after the introduction, whatever the length; depth
  // 1: after all the filler, so a longer prompt moves it by the difference;
  // 0.5 halfway between.
  auto at = [&](int length, double depth) {
    for (const PasskeyCell& c : r.cells) {
      if (c.length == length && c.depth == depth) return c.trials[0].keyPosition;
    }
    return std::int64_t{-1};
  };
  EXPECT_EQ(at(128, 0.0), at(400, 0.0));
  EXPECT_GT(at(400, 0.0), 0);
  EXPECT_EQ(at(400, 1.0) - at(128, 1.0), 400 - 128);
  EXPECT_NEAR(static_cast<double>(at(400, 0.5)), (at(400, 0.0) + at(400, 1.0)) / 2.0, 1.0);
  // The same seed, the same keys and answers.
  const PasskeyResult again = runPasskey(o, quiet, cancel);
  EXPECT_EQ(again.cells[3].trials[1].key, r.cells[3].trials[1].key);
  EXPECT_EQ(again.cells[3].trials[1].answer, r.cells[3].trials[1].answer);
}

TEST(Passkey, AnswersAreScoredByTheirFirstNumber) {
  EXPECT_TRUE(passkeyAnswered(" 48213. Remember", "48213"));
  EXPECT_TRUE(passkeyAnswered("48213", "48213"));
  EXPECT_FALSE(passkeyAnswered(" 482135", "48213"));
  EXPECT_FALSE(passkeyAnswered(" 4821", "48213"));
  EXPECT_FALSE(passkeyAnswered(" 12345 48213", "48213"));
  EXPECT_FALSE(passkeyAnswered(" the key", "48213"));
}

TEST(Passkey, BadInputIsRefusedNamingTheFile) {
  PasskeyOptions o;
  o.model = smallModel();
  o.haystack = kHaystack;
  o.lengths = {600};  // the model's context is 512
  NullProgress quiet;
  CancelToken cancel;
  try {
    runPasskey(o, quiet, cancel);
    FAIL() << "a length past the context ran";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("max_position_embeddings"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("512"), std::string::npos) << e.message();
  }
  o.lengths = {128};
  o.haystack = scratchDir("passkey-bad") / "missing.txt";
  try {
    runPasskey(o, quiet, cancel);
    FAIL() << "a missing haystack ran";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("missing.txt"), std::string::npos) << e.message();
  }
}

TEST(Passkey, TheCliPrintsTheGrid) {
  std::string out;
  ASSERT_EQ(runCommand(shellQuote(LATENTLAB_ENGINE_EXE) + " eval " + shellQuote(smallModel().string()) + " --passkey " +
                           kHaystack + " --lengths 128,256 --depths 0,1 --trials 1 --json --quiet",
                       &out),
            0)
      << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  ASSERT_EQ(j.at("cells").size(), 4u);
  EXPECT_EQ(j.at("cells")[1].at("length").get<int>(), 128);
  EXPECT_EQ(j.at("cells")[1].at("depth").get<double>(), 1.0);
  EXPECT_EQ(j.at("cells")[2].at("runs")[0].at("prompt_tokens").get<int>(), 256);
  std::string bad;
  EXPECT_NE(runCommand(shellQuote(LATENTLAB_ENGINE_EXE) + " eval " + shellQuote(smallModel().string()) + " --passkey " +
                           kHaystack + " --depths 0,1.5",
                       &bad),
            0);
  EXPECT_NE(bad.find("--depths"), std::string::npos) << bad;
}

}  // namespace latentlab::test
