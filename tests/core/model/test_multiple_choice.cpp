// Zero-shot multiple choice scored as lm-evaluation-harness does: the summed
// log-likelihood of each choice equals an independent Python implementation
// of lm-eval's convention on transformers and tokenizers (trailing context
// spaces, an empty context, CJK), and so do acc and acc_norm; stderr is lm-eval's;
// bad task files name the file, line and field.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/tokenizer.h"
#include "latentlab/convert.h"
#include "latentlab/error.h"
#include "latentlab/multiple_choice.h"
#include "model/cpu_block_cache.h"
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
    trainTutorialTokenizer(root / "tokenizer.json", 400);
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

}  // namespace

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
    for (std::size_t c = 0; c < lls[i].size(); ++c) {
      worst = std::max(worst, std::abs(ours.logLikelihoods[i][c] - lls[i][c]));
      // fp32: relative to the log-likelihood (this random model's run to ~ -100)
      EXPECT_LT(std::abs(ours.logLikelihoods[i][c] - lls[i][c]) / std::max(1.0, std::abs(lls[i][c])), 1e-6);
    }
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
  ASSERT_EQ(runCommand(shellQuote(LATENTLAB_ENGINE_EXE) + " eval " + shellQuote(model.string()) +
                           " --quiet --json --task " + shellQuote("toy=" + items.string()),
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
  EXPECT_NE(errorOf(good + "\n" + R"({"context": "a", "choices": ["b", "c"], "gold": 2})")
                .find("t.jsonl:2: field 'gold' (2)"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"context": "a", "choices": ["b"], "gold": 0})").find("t.jsonl:1: field 'choices'"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"choices": ["b", "c"], "gold": 0})").find("field 'context'"), std::string::npos);
  EXPECT_NE(errorOf("{not json").find("t.jsonl:1: not valid JSON"), std::string::npos);
  EXPECT_NE(errorOf("\n\n").find("no items"), std::string::npos);
  EXPECT_EQ(errorOf(good), "no error");
  // A gold past every integer type is shown as written, not wrapped to -1.
  EXPECT_NE(errorOf(R"({"context": "a", "choices": ["b", "c"], "gold": 18446744073709551615})")
                .find("field 'gold' (18446744073709551615)"),
            std::string::npos);
  // Not a file, or no end to it: a folder, a FIFO and /dev/zero are refused at once, naming the path.
  auto refused = [&](const fs::path& p, const std::string& format) {
    try {
      readTaskFile(format, p, format == "piqa" ? p : fs::path(), 0);
    } catch (const Error& e) {
      return e.message();
    }
    return std::string("no error");
  };
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string format : {"jsonl", "hellaswag", "piqa", "mmlu"}) {
    EXPECT_NE(refused(dir, format).find(dir.string() + ": is a folder"), std::string::npos) << format;
    EXPECT_NE(refused(fifo, format).find("is not a regular file"), std::string::npos) << format;
    EXPECT_NE(refused("/dev/zero", format).find("/dev/zero: is not a regular file"), std::string::npos) << format;
  }
}

// lm-eval's parsing, strictly: HellaSwag and PIQA labels are whole integers,
// an ARC answer key picks the first choice with that label.
TEST(MultipleChoice, LabelsAreReadAsLmEvalReadsThem) {
  const fs::path dir = scratchDir("mc-labels");
  auto hellaswag = [&](const std::string& label) {
    std::ofstream(dir / "hs.jsonl")
        << R"({"activity_label": "A", "ctx_a": "b", "ctx_b": "c", "endings": ["d", "e", "f", "g"], "label": )" << label
        << "}\n";
    return readTaskFile("hellaswag", dir / "hs.jsonl");
  };
  EXPECT_EQ(hellaswag("\"3\"")[0].gold, 3);
  EXPECT_EQ(hellaswag("2")[0].gold, 2);
  for (const std::string bad : {"\"3abc\"", "\"\"", "\"-1\"", "\"1.5\"", "18446744073709551615"}) {
    EXPECT_THROW(hellaswag(bad), Error) << bad;
  }
  std::ofstream(dir / "piqa.jsonl") << R"({"goal": "g", "sol1": "a", "sol2": "b"})"
                                    << "\n";
  for (const std::string bad : {"1x", "2", "01", "x"}) {
    std::ofstream(dir / "labels.lst") << bad << "\n";
    try {
      readTaskFile("piqa", dir / "piqa.jsonl", dir / "labels.lst");
      ADD_FAILURE() << "PIQA label '" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("labels.lst:1: '" + bad + "'"), std::string::npos) << e.message();
    }
  }
  std::ofstream(dir / "labels.lst") << " 1 \n";
  EXPECT_EQ(readTaskFile("piqa", dir / "piqa.jsonl", dir / "labels.lst")[0].gold, 1);
  std::ofstream(dir / "arc.jsonl")
      << R"({"question": {"stem": "q", "choices": [{"text": "x", "label": "A"}, {"text": "y", "label": "A"}, {"text": "z", "label": "B"}]}, "answerKey": "A"})"
      << "\n";
  EXPECT_EQ(readTaskFile("arc", dir / "arc.jsonl")[0].gold, 0);
}

// A choice that merges into the context's last token ("...the f" + "unction")
// still scores at least one token (lm-eval's split moved back to where the two
// encodings part), so it cannot win with a log-likelihood of 0; a window past
// the model's context and a continuation longer than the window are refused.
TEST(MultipleChoice, AMergingChoiceScoresATokenAndWindowsStayInTheContext) {
  const fs::path model = modelWithTokenizer();
  const fs::path dir = scratchDir("mc-merge");
  // With this tokenizer "This is th" + "e" encodes in as many tokens as the
  // context alone, and "It is a functio" + "n" in fewer.
  const Tokenizer tok = Tokenizer::fromFile(model / "tokenizer.json");
  ASSERT_EQ(tok.encode("This is th", false).size(), tok.encode("This is the", false).size());
  ASSERT_GT(tok.encode("It is a functio", false).size(), tok.encode("It is a function", false).size());
  std::ofstream(dir / "t.jsonl") << R"({"context": "This is th", "choices": ["e", " banana split"], "gold": 1})"
                                 << "\n"
                                 << R"({"context": "It is a functio", "choices": ["n", " banana split"], "gold": 1})"
                                 << "\n";
  ChoiceEvalOptions o;
  o.model = model;
  NullProgress quiet;
  CancelToken cancel;
  const ChoiceEvalResult r = evaluateChoices(o, readChoiceItems(dir / "t.jsonl"), quiet, cancel);
  ASSERT_EQ(r.logLikelihoods.size(), 2u);
  EXPECT_LT(r.logLikelihoods[0][0], 0.0) << "the merged choice scored no token";
  EXPECT_LT(r.logLikelihoods[1][0], 0.0) << "the merged choice scored no token";
  o.maxLength = 1 << 20;
  try {
    evaluateChoices(o, readChoiceItems(dir / "t.jsonl"), quiet, cancel);
    ADD_FAILURE() << "a window past the context was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("max_position_embeddings"), std::string::npos) << e.message();
  }
  o.maxLength = 2;
  std::ofstream(dir / "long.jsonl") << R"({"context": "a", "choices": [" the longest answer of all", " b"], "gold": 1})"
                                    << "\n";
  try {
    evaluateChoices(o, readChoiceItems(dir / "long.jsonl"), quiet, cancel);
    ADD_FAILURE() << "a continuation longer than the window was cut silently";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("item 1, choice 0"), std::string::npos) << e.message();
  }
}

// The benchmarks' own files become items with lm-eval's prompts.
TEST(MultipleChoice, PublicBenchmarkFilesGetLmEvalsPrompts) {
  const fs::path dir = scratchDir("mc-public");
  std::ofstream(dir / "arc.jsonl")
      << R"X({"id": "q1", "question": {"stem": "Which gas do plants absorb?", "choices": [{"text": "oxygen", "label": "A"}, {"text": "carbon dioxide", "label": "B"}, {"text": "helium", "label": "C"}]}, "answerKey": "B"})X"
      << "\n"
      << R"X({"id": "q2", "question": {"stem": "2 + 2?", "choices": [{"text": "4", "label": "1"}, {"text": "5", "label": "2"}]}, "answerKey": "1"})X"
      << "\n";
  auto arc = readTaskFile("arc", dir / "arc.jsonl");
  ASSERT_EQ(arc.size(), 2u);
  EXPECT_EQ(arc[0].context, "Question: Which gas do plants absorb?\nAnswer:");
  EXPECT_EQ(arc[0].choices, (std::vector<std::string>{" oxygen", " carbon dioxide", " helium"}));
  EXPECT_EQ(arc[0].gold, 1);
  EXPECT_EQ(arc[1].gold, 0);
  auto obqa = readTaskFile("openbookqa", dir / "arc.jsonl");
  EXPECT_EQ(obqa[0].context, "Which gas do plants absorb?");

  std::ofstream(dir / "hs.jsonl")
      << R"X({"ind": 4, "activity_label": "Removing ice from car", "ctx_a": "Then, the man writes over the snow covering the window of a car, and a woman wearing winter clothes smiles.", "ctx_b": "then", "endings": [", the man adds wax to the windshield and cuts it.", ", a person board a ski lift, while two men supporting the head of the person wearing winter clothes snow as the we girls sled.", ", the man puts on a christmas coat, knitted with netting.", ", the man continues removing the snow on his car."], "label": "3"})X"
      << "\n"
      << R"X({"ind": 9, "activity_label": "Home and Garden", "ctx_a": "[header] How to grow roses [title] Pick a sunny spot.", "ctx_b": "", "endings": ["[step] Roses need  sun. [title] Water them.", "No."], "label": 0})X"
      << "\n";
  auto hs = readTaskFile("hellaswag", dir / "hs.jsonl");
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(
      hs[0].context,
      "Removing ice from car: Then, the man writes over the snow covering the window of a car, and a woman wearing "
      "winter clothes smiles. Then");
  EXPECT_EQ(hs[0].choices[3], " , the man continues removing the snow on his car.");
  EXPECT_EQ(hs[0].gold, 3);
  EXPECT_EQ(hs[1].context, "Home and Garden: How to grow roses. Pick a sunny spot.");
  // As in Python: the ending is trimmed before its "[step]" is dropped, so a space stays.
  EXPECT_EQ(hs[1].choices[0], "  Roses need sun.. Water them.");

  std::ofstream(dir / "piqa.jsonl")
      << R"X({"goal": "Dry wet shoes", "sol1": "Stuff them with newspaper.", "sol2": "Put them in the freezer."})X"
      << "\n";
  std::ofstream(dir / "piqa-labels.lst") << "0\n";
  auto piqa = readTaskFile("piqa", dir / "piqa.jsonl", dir / "piqa-labels.lst");
  ASSERT_EQ(piqa.size(), 1u);
  EXPECT_EQ(piqa[0].context, "Question: Dry wet shoes\nAnswer:");
  EXPECT_EQ(piqa[0].choices, (std::vector<std::string>{" Stuff them with newspaper.", " Put them in the freezer."}));
  EXPECT_EQ(piqa[0].gold, 0);
  std::ofstream(dir / "two-labels.lst") << "0\n1\n";
  EXPECT_THROW(readTaskFile("piqa", dir / "piqa.jsonl", dir / "two-labels.lst"), Error);
  EXPECT_THROW(readTaskFile("winograd", dir / "arc.jsonl"), Error);

  // WinoGrande: partial scoring, one context per option and a shared continuation.
  std::ofstream(dir / "wg.jsonl")
      << R"X({"qID": "3D5G-1", "sentence": "The trophy doesn't fit into the suitcase because _ is too large.", "option1": "the trophy", "option2": "the suitcase", "answer": "1"})X"
      << "\n";
  auto wg = readTaskFile("winogrande", dir / "wg.jsonl");
  ASSERT_EQ(wg.size(), 1u);
  EXPECT_EQ(wg[0].contexts,
            (std::vector<std::string>{"The trophy doesn't fit into the suitcase because the trophy",
                                      "The trophy doesn't fit into the suitcase because the suitcase"}));
  EXPECT_EQ(wg[0].choices, (std::vector<std::string>{" is too large.", " is too large."}));
  EXPECT_EQ(wg[0].gold, 0);

  // MMLU: the subject from the file name, k solved dev examples, letters as choices;
  // quoted CSV fields with commas, doubled quotes and newlines.
  std::ofstream(dir / "college_physics_dev.csv") << "What is 1+1?,1,2,3,4,B\n\"Pick \"\"c\"\"\",a,b,c,d,C\n";
  std::ofstream(dir / "college_physics_test.csv") << "\"Speed, in m/s,\nof light?\",1,3e8,0,-1,B\n";
  auto mmlu = readTaskFile("mmlu", dir / "college_physics_test.csv", dir / "college_physics_dev.csv", 1);
  ASSERT_EQ(mmlu.size(), 1u);
  EXPECT_EQ(mmlu[0].context,
            "The following are multiple choice questions (with answers) about college physics.\n\n"
            "What is 1+1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer: B\n\n"
            "Speed, in m/s,\nof light?\nA. 1\nB. 3e8\nC. 0\nD. -1\nAnswer:");
  EXPECT_EQ(mmlu[0].choices, (std::vector<std::string>{" A", " B", " C", " D"}));
  EXPECT_EQ(mmlu[0].gold, 1);
  const auto zeroShot = readTaskFile("mmlu", dir / "college_physics_dev.csv");
  ASSERT_EQ(zeroShot.size(), 2u);
  EXPECT_EQ(zeroShot[1].context.substr(zeroShot[1].context.find("\n\n") + 2, 12), "Pick \"c\"\nA. ");
  std::ofstream(dir / "bad_test.csv") << "q,1,2,3,4,E\n";
  EXPECT_THROW(readTaskFile("mmlu", dir / "bad_test.csv"), Error);
}

// Partial scoring reaches the scorer: each option's context is scored with
// the shared continuation (WinoGrande), against the Python reference.
TEST(MultipleChoice, PartialScoringUsesEachOptionsContext) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed";
  const fs::path model = modelWithTokenizer();
  ChoiceItem item;
  item.contexts = {"The list is sorted because the list", "The list is sorted because the loop"};
  item.choices = {" was short.", " was short."};
  item.gold = 0;
  ChoiceEvalOptions o;
  o.model = model;
  o.minSharedPrefix = 0;  // whole requests: the same arithmetic in both formats
  NullProgress quiet;
  CancelToken cancel;
  const ChoiceEvalResult r = evaluateChoices(o, {item}, quiet, cancel);
  // The same two requests in the plain format give the same scores.
  ChoiceItem first{item.contexts[0], {" was short.", " was not."}, 0, {}};
  ChoiceItem second{item.contexts[1], {" was short.", " was not."}, 0, {}};
  const ChoiceEvalResult a = evaluateChoices(o, {first, second}, quiet, cancel);
  ASSERT_EQ(r.logLikelihoods[0].size(), 2u);
  EXPECT_NEAR(r.logLikelihoods[0][0], a.logLikelihoods[0][0], 1e-6);
  EXPECT_NEAR(r.logLikelihoods[0][1], a.logLikelihoods[1][0], 1e-6);
  EXPECT_NE(r.logLikelihoods[0][0], r.logLikelihoods[0][1]);
  // With the shared context computed once (the default), the two formats
  // split the prefix differently: equal to fp32 rounding (relative 1e-6).
  o.minSharedPrefix = 1;
  const ChoiceEvalResult rs = evaluateChoices(o, {item}, quiet, cancel);
  const ChoiceEvalResult as = evaluateChoices(o, {first, second}, quiet, cancel);
  EXPECT_NEAR(rs.logLikelihoods[0][0], as.logLikelihoods[0][0], 1e-6 * std::abs(as.logLikelihoods[0][0]));
  EXPECT_NEAR(rs.logLikelihoods[0][1], as.logLikelihoods[1][0], 1e-6 * std::abs(as.logLikelihoods[1][0]));
}

// Requests of many items packed into one forward pass (sorted longest
// first, right-padded, only the continuation's positions through the output
// layer) score as each request alone; a cancel returns the items scored so
// far, with their own figures.
TEST(MultipleChoice, BatchesAcrossItemsScoreAsOneRequestAtATime) {
  const fs::path model = modelWithTokenizer();
  std::vector<ChoiceItem> items;
  const std::vector<std::string> stems = {"Lists are",
                                          "A dictionary maps keys to",
                                          "The for statement in Python differs a bit from",
                                          "",
                                          "Strings can be concatenated with the",
                                          "x"};
  for (std::size_t i = 0; i < 30; ++i) {
    const std::string stem = stems[i % stems.size()] + (i % 4 == 0 ? " and, as the tutorial says," : "");
    items.push_back(
        {stem, {" values", " mutable sequences of " + std::to_string(i), "!"}, static_cast<int>(i % 3), {}});
  }
  ChoiceEvalOptions o;
  o.model = model;
  o.minSharedPrefix = 0;  // every request whole: the batching itself is under test
  NullProgress quiet;
  CancelToken cancel;
  o.batchTokens = 1;  // one request a forward pass
  const ChoiceEvalResult alone = evaluateChoices(o, items, quiet, cancel);
  o.batchTokens = 4096;
  const ChoiceEvalResult packed = evaluateChoices(o, items, quiet, cancel);
  ASSERT_EQ(packed.logLikelihoods.size(), items.size());
  double worst = 0;
  for (std::size_t i = 0; i < items.size(); ++i)
    for (std::size_t c = 0; c < 3; ++c)
      worst = std::max(worst, std::abs(packed.logLikelihoods[i][c] - alone.logLikelihoods[i][c]) /
                                  std::max(1.0, std::abs(alone.logLikelihoods[i][c])));
  EXPECT_LT(worst, 1e-6);  // relative: fp32 sums of large log-probabilities (this random model's are ~ -100)
  EXPECT_EQ(packed.predicted, alone.predicted);
  EXPECT_EQ(packed.predictedNorm, alone.predictedNorm);
  EXPECT_DOUBLE_EQ(packed.acc, alone.acc);
  EXPECT_EQ(packed.items, 30);
  EXPECT_FALSE(packed.cancelled);

  // Cancelled after the second forward pass: the figures cover the complete items only.
  struct CancelAfter : ProgressSink {
    CancelToken& token;
    int calls = 0;
    explicit CancelAfter(CancelToken& t) : token(t) {}
    void progress(std::string_view, double, double, std::string_view) override {
      if (++calls == 2) token.request();
    }
    void log(LogLevel, std::string_view) override {}
  } cancelling(cancel);
  std::vector<std::int64_t> partialItems;
  o.batchTokens = 40;
  ChoiceScorer scorer(o);
  const ChoiceEvalResult cut = scorer.score(
      items, 0, cancelling, cancel, [&](const ChoiceEvalResult& sofar) { partialItems.push_back(sofar.items); });
  EXPECT_TRUE(cut.cancelled);
  EXPECT_EQ(cancelling.calls, 2);
  EXPECT_LT(cut.items, 30);
  ASSERT_EQ(cut.scoredItems.size(), static_cast<std::size_t>(cut.items));
  ASSERT_EQ(partialItems.size(), 2u);
  EXPECT_EQ(partialItems.back(), cut.items);
  double hits = 0;
  for (std::size_t k = 0; k < cut.scoredItems.size(); ++k) {
    const std::size_t i = cut.scoredItems[k];
    for (std::size_t c = 0; c < 3; ++c) EXPECT_NEAR(cut.logLikelihoods[k][c], alone.logLikelihoods[i][c], 1e-4);
    hits += cut.predicted[k] == items[i].gold ? 1 : 0;
  }
  if (cut.items > 0) {
    EXPECT_DOUBLE_EQ(cut.acc, hits / static_cast<double>(cut.items));
  }
  cancel.reset();
  EXPECT_THROW(
      {
        CancelToken pre;
        pre.request();
        evaluateChoices(o, items, quiet, pre);
      },
      Error);
}

// An item's choices continue its context computed once (a KV cache, the
// latent cache for a converted model) and score as the whole requests do:
// items with and without a shared context, choices merging into the
// context's last token, per-choice contexts, windows cut to --max-length.
TEST(MultipleChoice, ChoicesContinuingTheirSharedContextScoreAsWholeRequests) {
  const fs::path gqa = modelWithTokenizer();
  const fs::path root = gqa.parent_path();
  const fs::path mha = root / "mha";
  if (!fs::exists(mha / "config.json")) {
    std::string log;
    ASSERT_EQ(
        runPython("hf_llama.py", {"make", mha.string(), "--vocab", "400", "--std", "0.3", "--kv-heads", "4"}, &log), 0)
        << log;
    fs::copy_file(gqa / "tokenizer.json", mha / "tokenizer.json", fs::copy_options::overwrite_existing);
  }
  const fs::path mla = root / "mla", deepseek = root / "deepseek";
  for (const auto& [out, target] :
       {std::pair{mla, ConversionTarget::Mha2Mla}, std::pair{deepseek, ConversionTarget::DeepSeek}}) {
    ConvertSpec c;
    c.modelDir = gqa;
    c.outDir = out;
    c.target = target;
    c.ropeStrategy = RopeStrategy::High;
    c.ropePairs = target == ConversionTarget::Mha2Mla ? 2 : 0;
    c.dKv = 4;
    if (target == ConversionTarget::DeepSeek) {
      c.calibration.dataFile = "/usr/share/doc/python3.11/html/_sources/tutorial/controlflow.rst.txt";
      c.calibration.format = TokenFormat::Text;
      c.calibration.numSequences = 4;
      c.calibration.seqLen = 64;
    }
    c.force = true;
    NullProgress quiet;
    CancelToken cancel;
    convert(c, quiet, cancel);
  }
  std::vector<ChoiceItem> items;
  const std::vector<std::string> stems = {"Lists are mutable sequences, typically used to store",
                                          "A dictionary maps keys to",
                                          "The for statement in Python differs a bit from what you may be used to in",
                                          "",
                                          "the f",
                                          "x"};
  for (std::size_t i = 0; i < 24; ++i) {
    ChoiceItem item{stems[i % stems.size()],
                    {" values", "unction of " + std::to_string(i), "!", " C or Pascal"},
                    static_cast<int>(i % 4),
                    {}};
    if (i % 5 == 4) item.contexts = {stems[0], stems[0] + " and", stems[1], stems[0]};  // per-choice contexts
    items.push_back(std::move(item));
  }
  for (const fs::path& dir : {mha, gqa, mla, deepseek}) {
    for (const int maxLength : {0, 12}) {
      ChoiceEvalOptions o;
      o.model = dir;
      o.maxLength = maxLength;
      NullProgress quiet;
      CancelToken cancel;
      o.minSharedPrefix = 0;
      const ChoiceEvalResult whole = evaluateChoices(o, items, quiet, cancel);
      o.minSharedPrefix = 1;
      const ChoiceEvalResult shared = evaluateChoices(o, items, quiet, cancel);
      ASSERT_EQ(shared.logLikelihoods.size(), items.size());
      double worst = 0;
      for (std::size_t i = 0; i < items.size(); ++i)
        for (std::size_t c = 0; c < items[i].choices.size(); ++c)
          worst = std::max(worst, std::abs(shared.logLikelihoods[i][c] - whole.logLikelihoods[i][c]) /
                                      std::max(1.0, std::abs(whole.logLikelihoods[i][c])));
      // Relative to log-likelihoods near -100 (a random model): the context's
      // cache meets the choices in the small-row kernels, the whole request in
      // LibTorch's GEMM and attention, each summing in its own order in fp32.
      EXPECT_LT(worst, 1e-5) << dir << " max length " << maxLength;
      EXPECT_EQ(shared.predicted, whole.predicted) << dir;
      EXPECT_EQ(shared.predictedNorm, whole.predictedNorm) << dir;
    }
  }
}

// 3,000 items of every length scored longest first, as the engine does with
// its block cache installed: each batch width reuses the blocks of the wider
// ones, the cache holds no more than the tensors did at their most, and the
// pass ends with it empty. (Before the bound: 100 MiB cached, 135 MiB of
// growth here; 3.57 GB resident for the CLI on a vocabulary of 2,048.)
TEST(MultipleChoice, ThreeThousandItemsKeepTheBlockCacheSmall) {
  installCpuBlockCache();
  const fs::path model = modelWithTokenizer();
  const std::string words =
      "Lists are mutable sequences and a dictionary maps keys to values while the for statement "
      "iterates over the items of any sequence in the order that they appear in it ";
  std::vector<ChoiceItem> items;
  for (std::size_t i = 0; i < 3000; ++i) {
    const std::string stem = words.substr(0, 4 + (i * 37) % (words.size() - 4));
    items.push_back({stem, {" values", " keys " + std::to_string(i), "!"}, static_cast<int>(i % 3), {}});
  }
  ChoiceEvalOptions o;
  o.model = model;
  NullProgress quiet;
  CancelToken cancel;
  ChoiceScorer scorer(o);
  releaseCpuBlockCache();
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  resetCpuBlockCachePeak();
  std::int64_t mostCached = 0, mostLive = 0, batches = 0;
  const ChoiceEvalResult r = scorer.score(items, 0, quiet, cancel, [&](const ChoiceEvalResult&) {
    const auto s = cpuBlockCacheStats();
    mostCached = std::max(mostCached, s.cachedBytes);
    mostLive = std::max(mostLive, s.peakLiveBytes);
    ++batches;
  });
  ::getrusage(RUSAGE_SELF, &after);
  RecordProperty("most_cached_bytes", std::to_string(mostCached));
  RecordProperty("most_live_bytes", std::to_string(mostLive));
  RecordProperty("peak_growth_kib", std::to_string(after.ru_maxrss - before.ru_maxrss));
  EXPECT_EQ(r.items, 3000);
  EXPECT_GT(batches, 20);
  EXPECT_LE(mostCached, mostLive) << "cached between batches: never more than the tensors held at once";
  EXPECT_EQ(cpuBlockCacheStats().cachedBytes, 0) << "released when the pass ends";
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 128 * 1024) << "peak growth (KiB) over the pass";
}

}  // namespace latentlab::test
