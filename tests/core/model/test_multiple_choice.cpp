// Zero-shot multiple choice scored as lm-evaluation-harness does: the summed
// log-likelihood of each choice equals an independent Python implementation
// of lm-eval's convention on transformers and tokenizers (trailing context
// spaces, an empty context, CJK), and so do acc and acc_norm; stderr is lm-eval's;
// bad task files name the file, line and field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/tokenizer.h"
#include "latentlab/error.h"
#include "latentlab/multiple_choice.h"
#include "model_test_util.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

// An HF-written random model (vocab 400) with a byte-level BPE tokenizer
// trained on the Python tutorial.
fs::path modelWithTokenizer() {
  static const fs::path dir = [] {
    const fs::path root = scratchDir("mc-model");
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator("/usr/share/doc/python3.11/html/_sources/tutorial")) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    BpeTrainOptions opts;
    opts.vocabSize = 400;
    NullProgress quiet;
    CancelToken cancel;
    trainBpeTokenizer(files, opts, root / "tokenizer.json", quiet, cancel);
    std::string log;
    if (runPython("hf_llama.py", {"make", (root / "model").string(), "--vocab", "400", "--std", "0.3"}, &log) != 0)
      ADD_FAILURE() << log;
    fs::copy_file(root / "tokenizer.json", root / "model" / "tokenizer.json");
    return root / "model";
  }();
  return dir;
}

const char* const kItems =
    R"ITEMS({"context": "The capital of France is", "choices": [" Paris", " London", " a list"], "gold": 0}
{"context": "Python is a programming ", "choices": ["language", "snake"], "gold": 0}
{"context": "", "choices": ["Hello world", "for x in range(10):"], "gold": 1}
{"context": "A list is written with", "choices": [" square brackets", " curly braces", " parentheses"], "gold": 0}
{"context": "def f(x):\n   ", "choices": [" return x", " print(x)"], "gold": 0}
{"context": "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "choices": ["\u3067\u3059", "\u3067\u306f\u306a\u3044"], "gold": 1}
)ITEMS";

} // namespace

TEST(MultipleChoice, LogLikelihoodsAndAccuracyEqualLmEvalsConvention) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed";
  const fs::path model = modelWithTokenizer();
  const fs::path items = model.parent_path() / "items.jsonl";
  std::ofstream(items) << kItems;
  ChoiceEvalOptions o;
  o.model = model;
  NullProgress quiet;
  CancelToken cancel;
  const ChoiceEvalResult ours = evaluateChoices(o, readChoiceItems(items), quiet, cancel);
  std::string out;
  ASSERT_EQ(runPython("mc_reference.py", {model.string(), items.string()}, &out), 0) << out;
  const auto ref = nlohmann::json::parse(out.substr(out.rfind("{\"lls\"")));
  const auto lls = ref.at("lls").get<std::vector<std::vector<double>>>();
  ASSERT_EQ(ours.logLikelihoods.size(), lls.size());
  double worst = 0;
  for (std::size_t i = 0; i < lls.size(); ++i) {
    ASSERT_EQ(ours.logLikelihoods[i].size(), lls[i].size());
    for (std::size_t c = 0; c < lls[i].size(); ++c) worst = std::max(worst, std::abs(ours.logLikelihoods[i][c] - lls[i][c]));
  }
  EXPECT_LT(worst, 1e-4);
  EXPECT_DOUBLE_EQ(ours.acc, ref.at("acc").get<double>());
  EXPECT_DOUBLE_EQ(ours.accNorm, ref.at("acc_norm").get<double>());
  EXPECT_EQ(ours.items, 6);
  // lm-eval's stderr: sample standard deviation of the 0/1 hits over sqrt(n).
  const double p = ours.acc, n = 6;
  EXPECT_NEAR(ours.accStderr, std::sqrt(p * (1 - p) * n / (n - 1)) / std::sqrt(n), 1e-12);
  std::cout << "[ multiple choice ] max |log-likelihood diff| vs the lm-eval convention in Python: " << worst << "\n";

  // The CLI verb reports the same figures.
  ASSERT_EQ(runCommand(shellQuote(LATENTLAB_ENGINE_EXE) + " eval " + shellQuote(model.string()) + " --quiet --json --task " +
                           shellQuote("toy=" + items.string()),
                       &out),
            0)
      << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{'), out.find('\n', out.find('{')) - out.find('{')));
  EXPECT_EQ(j.at("task"), "toy");
  EXPECT_DOUBLE_EQ(j.at("acc").get<double>(), ours.acc);
  EXPECT_DOUBLE_EQ(j.at("acc_norm").get<double>(), ours.accNorm);
}

TEST(MultipleChoice, BadTaskFilesNameTheFileLineAndField) {
  const fs::path dir = scratchDir("mc-bad");
  auto errorOf = [&](const std::string& content) {
    std::ofstream(dir / "t.jsonl") << content;
    try {
      readChoiceItems(dir / "t.jsonl");
    } catch (const Error& e) {
      return e.message();
    }
    return std::string("no error");
  };
  const std::string good = R"({"context": "a", "choices": ["b", "c"], "gold": 1})";
  EXPECT_NE(errorOf(good + "\n" + R"({"context": "a", "choices": ["b", "c"], "gold": 2})").find("t.jsonl:2: field 'gold' (2)"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"context": "a", "choices": ["b"], "gold": 0})").find("t.jsonl:1: field 'choices'"), std::string::npos);
  EXPECT_NE(errorOf(R"({"choices": ["b", "c"], "gold": 0})").find("field 'context'"), std::string::npos);
  EXPECT_NE(errorOf("{not json").find("t.jsonl:1: not valid JSON"), std::string::npos);
  EXPECT_NE(errorOf("\n\n").find("no items"), std::string::npos);
  EXPECT_EQ(errorOf(good), "no error");
}

} // namespace latentlab::test
