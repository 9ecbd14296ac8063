// The passkey test: every prompt is exactly its cell's length, the key sits at
// its depth of the filler, keys are reproducible from the seed, answers are
// scored by their first number, and lengths past the model's context or a
// missing haystack are refused naming the file. A small model with a real
// tokenizer trained on the Python tutorial; the CLI prints the same grid.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "io/tokenizer.h"
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

// Scripted answerers instead of a model: one that reads the key from the
// prompt (a model given the answer) scores every cell; one that finds the key
// only in the first half of the prompt scores exactly the cells whose key sits
// there.
TEST(Passkey, AModelGivenTheAnswerScoresEveryCellAndTheGridIsExact) {
  const Tokenizer tok = Tokenizer::fromFile(smallModel() / "tokenizer.json");
  auto keyIn = [&](const std::vector<std::int32_t>& ids, std::size_t& at) {
    const std::string text = tok.decode(ids, true);
    const std::regex sentence("The pass key is ([0-9]{5})");
    std::smatch m;
    if (!std::regex_search(text, m, sentence)) return std::string();
    at = static_cast<std::size_t>(m.position(0));
    return m[1].str();
  };
  PasskeyOptions o;
  o.model = smallModel();
  o.haystack = kHaystack;
  o.lengths = {128, 256, 400};
  o.depths = {0.0, 0.25, 0.75, 1.0};
  o.trials = 3;
  o.seed = 4;
  std::vector<std::pair<int, double>> reported;
  o.onCell = [&](const PasskeyCell& c) { reported.emplace_back(c.length, c.depth); };
  o.answerer = [&](const std::vector<std::int32_t>& ids, int maxNew) {
    std::size_t at = 0;
    auto answer = tok.encode(" " + keyIn(ids, at) + ". Remember it.", false);
    if (answer.size() > static_cast<std::size_t>(maxNew)) answer.resize(static_cast<std::size_t>(maxNew));
    return answer;
  };
  NullProgress quiet;
  CancelToken cancel;
  const PasskeyResult given = runPasskey(o, quiet, cancel);
  ASSERT_EQ(given.cells.size(), 12u);
  for (const PasskeyCell& c : given.cells) EXPECT_EQ(c.correct(), 3) << c.length << " " << c.depth;
  EXPECT_EQ(reported.size(), 12u);

  // Answers right only when the key's sentence ends in the first half of the
  // prompt's tokens (the shortest prefix that holds it).
  o.answerer = [&](const std::vector<std::int32_t>& ids, int) {
    std::size_t at = 0;
    const std::string key = keyIn(ids, at);
    std::size_t lo = 1, hi = ids.size();
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      std::size_t unused = 0;
      if (keyIn(std::vector<std::int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(mid)), unused) ==
          key) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return tok.encode(lo < ids.size() / 2 ? " " + key : " 12345", false);
  };
  o.lengths = {256, 400};
  const PasskeyResult half = runPasskey(o, quiet, cancel);
  for (const PasskeyCell& c : half.cells) {
    EXPECT_EQ(c.correct(), c.depth < 0.5 ? 3 : 0) << c.length << " " << c.depth;
    for (const PasskeyTrial& t : c.trials)
      EXPECT_EQ(t.correct, c.depth < 0.5) << t.key << " answered '" << t.answer << "'";
  }
}

}  // namespace latentlab::test
