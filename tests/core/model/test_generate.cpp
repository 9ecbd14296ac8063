// Generation with the model's own cache: greedy ids equal transformers'
// generate (a plain and a Llama-3-scaled model), a converted model generates
// through its latent cache holding exactly the formula's bytes, sampling is
// seeded, the streamed text is the result's text, and the CLI verb works.
#include <gtest/gtest.h>

#include <sstream>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "convert/converter.h"
#include "io/tokenizer.h"
#include "latentlab/architectures.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "latentlab/generate.h"
#include "latentlab/kv_budget.h"
#include "model/weights.h"
#include "model_test_util.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

GenerateOptions greedy(const fs::path& model, int newTokens) {
  GenerateOptions o;
  o.model = model;
  o.temperature = 0;
  o.maxNewTokens = newTokens;
  return o;
}

}  // namespace

TEST(Generate, GreedyIdsEqualTransformersGenerate) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed";
  for (const auto& [name, extra] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"gqa", {}},
           {"llama3", {"--rope-type", "llama3", "--rope-factor", "8", "--original-max", "16", "--max-pos", "256"}},
           {"qwen3", {"--type", "qwen3", "--head-dim", "32", "--qk-gain", "1.5,3"}},
           {"smollm3", {"--type", "smollm3", "--layers", "4", "--no-rope-layers", "1,1,1,0", "--tied"}},
           // Gemma-3 with a window of 16 over the 52 positions.
           {"gemma3",
            {"--type", "gemma3", "--layers", "3", "--layer-types", "s,f,s", "--window", "16", "--tied", "--theta",
             "1000000"}},
           {"qwen3_moe", {"--type", "qwen3_moe", "--layers", "3", "--mlp-only-layers", "1", "--norm-topk"}},
           // longrope switches to its long factors once the 12 + 40 positions pass 32.
           {"phi4mini",
            {"--type", "phi3", "--partial-rotary", "0.75", "--rope-type", "longrope", "--original-max", "32",
             "--max-pos", "256", "--tied"}}}) {
    const fs::path dir = scratchDir("gen-" + name) / "model";
    std::vector<std::string> args = {"make", dir.string(), "--std", "0.3"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string log;
    ASSERT_EQ(runPython("hf_llama.py", args, &log), 0) << log;
    const std::vector<std::int32_t> prompt = {5, 17, 99, 3, 64, 12, 80, 7, 33, 41, 2 + 100, 9};
    Generator gen(greedy(dir, 40));
    CancelToken cancel;
    const GenerateResult ours = gen.generateIds(prompt, {}, cancel);
    const auto theirs = hfGreedy(dir, prompt, 40, &log);
    ASSERT_FALSE(theirs.empty()) << log;
    EXPECT_EQ(ours.generatedIds, theirs) << name;
    EXPECT_GE(ours.generatedIds.size(), 2u);
  }
}

TEST(Generate, ConvertedModelGeneratesThroughItsLatentCacheWithTheFormulasBytes) {
  const ModelConfig cfg = tinyConfig({.kvHeads = 2});
  auto base = randomModel(cfg, torch::kFloat32, 11);
  const fs::path root = scratchDir("gen-mla");
  saveModel(*base, root / "base", DType::F32);
  ConversionOptions full;
  full.rope = RopeStrategy::Full;
  full.dKv = cfg.headDim;  // full rank: the same model
  saveModel(*convertModel(*base, full), root / "full", DType::F32);
  ConversionOptions small;
  small.rope = RopeStrategy::High;
  small.ropePairs = 2;
  small.dKv = 4;
  saveModel(*convertModel(*base, small), root / "small", DType::F32);

  const std::vector<std::int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  CancelToken cancel;
  auto run = [&](const std::string& which) {
    GenerateOptions o = greedy(root / which, 24);
    o.stopAtEos = false;
    Generator gen(o);
    return std::make_pair(gen.generateIds(prompt, {}, cancel), gen.config());
  };
  const auto [original, baseCfg] = run("base");
  const auto [converted, fullCfg] = run("full");
  const auto [latent, smallCfg] = run("small");
  EXPECT_EQ(converted.generatedIds, original.generatedIds) << "full rank + full RoPE is the same model";
  ASSERT_EQ(latent.generatedIds.size(), 24u);
  // The cache holds every token but the last generated one, at the model's bytes per token.
  const std::int64_t cached = static_cast<std::int64_t>(prompt.size() + 24 - 1);
  EXPECT_EQ(original.kvBytes, currentKvBudget(baseCfg, DType::F32).bytesPerToken * cached);
  EXPECT_EQ(latent.kvBytes, currentKvBudget(smallCfg, DType::F32).bytesPerToken * cached);
  EXPECT_LT(latent.kvBytes, original.kvBytes);
}

TEST(Generate, SamplingIsSeededAndTopKOfOneIsGreedy) {
  auto model = randomModel(tinyConfig({.kvHeads = 2}), torch::kFloat32, 3);
  const fs::path dir = scratchDir("gen-sample") / "model";
  saveModel(*model, dir, DType::F32);
  const std::vector<std::int32_t> prompt = {4, 8, 15, 16, 23, 42};
  CancelToken cancel;
  auto sample = [&](std::uint64_t seed, int topK, double topP) {
    GenerateOptions o = greedy(dir, 30);
    o.temperature = 1.0;
    o.topK = topK;
    o.topP = topP;
    o.seed = seed;
    o.stopAtEos = false;
    return Generator(o).generateIds(prompt, {}, cancel).generatedIds;
  };
  EXPECT_EQ(sample(7, 0, 1.0), sample(7, 0, 1.0));
  EXPECT_NE(sample(7, 0, 1.0), sample(8, 0, 1.0));
  GenerateOptions g = greedy(dir, 30);
  g.stopAtEos = false;
  const auto argmax = Generator(g).generateIds(prompt, {}, cancel).generatedIds;
  EXPECT_EQ(sample(7, 1, 1.0), argmax);
  EXPECT_EQ(sample(9, 0, 1e-6), argmax) << "a tiny top_p keeps only the most likely token";
}

TEST(Generate, StreamedTextIsTheResultAndTheCliVerbReportsItsFigures) {
  // A small model with a real tokenizer trained on the Python tutorial.
  const fs::path dir = scratchDir("gen-text") / "model";
  writeSmallTextModel(dir);
  CancelToken cancel;

  GenerateOptions o;
  o.model = dir;
  o.maxNewTokens = 20;
  o.seed = 3;
  Generator gen(o);
  std::string streamed;
  const GenerateResult r = gen.generate(
      "The tutorial", [&](std::string_view piece) { streamed += piece; }, cancel);
  EXPECT_EQ(streamed, r.text);
  EXPECT_FALSE(r.text.empty());
  EXPECT_GE(r.promptIds.size(), 2u);

  std::string out;
  ASSERT_EQ(runCommand(shellQuote(LATENTLAB_ENGINE_EXE) + " generate --json --model " + shellQuote(dir.string()) +
                           " --prompt 'The tutorial' --max-new-tokens 12 --seed 3",
                       &out),
            0)
      << out;
  const std::size_t start = out.find('{');
  ASSERT_NE(start, std::string::npos) << out;
  const auto j = nlohmann::json::parse(out.substr(start, out.find('\n', start) - start));
  EXPECT_EQ(j.at("prompt_tokens").get<std::size_t>(), r.promptIds.size());
  EXPECT_LE(j.at("generated_tokens").get<int>(), 12);
  EXPECT_GT(j.at("kv_cache_bytes").get<std::int64_t>(), 0);
  EXPECT_GT(j.at("decode_tokens_per_s").get<double>(), 0.0);
  // The first 12 sampled ids are the library call's (same seed, same model).
  const auto ids = j.at("generated_ids").get<std::vector<std::int32_t>>();
  EXPECT_TRUE(std::equal(ids.begin(), ids.end(), r.generatedIds.begin()));

  // --events: a line per token with the figures so far, then the summary;
  // the lines' text is the whole text.
  ASSERT_EQ(runCommand(shellQuote(LATENTLAB_ENGINE_EXE) + " generate --events --model " + shellQuote(dir.string()) +
                           " --prompt 'The tutorial' --max-new-tokens 12 --seed 3 2>/dev/null",
                       &out),
            0)
      << out;
  std::istringstream lines(out);
  std::string l, text;
  std::vector<nlohmann::json> tokens;
  nlohmann::json done;
  while (std::getline(lines, l)) {
    const auto e = nlohmann::json::parse(l);
    if (e.at("event") == "token") {
      tokens.push_back(e);
      text += e.at("text").get<std::string>();
    } else {
      done = e;
    }
  }
  ASSERT_EQ(done.value("event", ""), "done") << out;
  text += done.at("tail").get<std::string>();
  EXPECT_EQ(text, done.at("text").get<std::string>());
  EXPECT_EQ(done.at("generated_ids"), j.at("generated_ids"));
  ASSERT_EQ(tokens.size(),
            done.at("generated_tokens").get<std::size_t>() - (done.at("stopped_at_eos").get<bool>() ? 1 : 0));
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    EXPECT_EQ(tokens[k].at("generated_tokens").get<std::size_t>(), k + 1);
    if (k > 0) {
      EXPECT_GT(tokens[k].at("kv_cache_bytes").get<std::int64_t>(),
                tokens[k - 1].at("kv_cache_bytes").get<std::int64_t>());
    }
  }
  EXPECT_EQ(tokens.back().at("kv_cache_bytes"), done.at("kv_cache_bytes"));
}

TEST(Generate, PromptFilesNameTheLineAtFault) {
  const fs::path dir = scratchDir("gen-prompts");
  std::ofstream(dir / "p.jsonl") << "{\"prompt\": \"one\"}\n\n{\"prompt\": \"two\"}\n";
  EXPECT_EQ(readPrompts(dir / "p.jsonl"), (std::vector<std::string>{"one", "two"}));
  std::ofstream(dir / "empty.jsonl") << "{\"prompt\": \"one\"}\n{\"prompt\": \"\"}\n";
  try {
    readPrompts(dir / "empty.jsonl");
    ADD_FAILURE() << "an empty prompt was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("empty.jsonl:2: the prompt is empty"), std::string::npos) << e.message();
  }
  EXPECT_THROW(readPromptFile("/dev/zero"), Error);
  std::ofstream(dir / "bad.jsonl") << "{\"prompt\": \"one\"}\n{\"text\": 3}\n";
  try {
    readPrompts(dir / "bad.jsonl");
    ADD_FAILURE() << "a line without a prompt was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("bad.jsonl:2"), std::string::npos) << e.message();
  }
}

// Prompts (with the tokens asked for) past the model's context are refused
// before any work; a tiny temperature is the greedy choice, not inf/nan.
TEST(Generate, PromptsPastTheContextAreRefusedAndTinyTemperaturesSample) {
  const fs::path dir = scratchDir("gen-context") / "model";
  std::string log;
  ASSERT_EQ(runPython("hf_llama.py", {"make", dir.string(), "--std", "0.3", "--max-pos", "64"}, &log), 0) << log;
  GenerateOptions o = greedy(dir, 8);
  Generator gen(o);
  CancelToken cancel;
  try {
    gen.generateIds(std::vector<std::int32_t>(60, 5), {}, cancel);
    ADD_FAILURE() << "60 + 8 tokens in a context of 64 were accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("exceed the model's context of 64"), std::string::npos) << e.message();
  }
  // Perplexity windows past the context are refused the same way.
  EvalOptions e;
  e.model = dir;
  e.seqLen = 100000;
  e.tokenFile = dir / "model.safetensors";  // never read: refused first
  NullProgress quiet;
  try {
    evaluate(e, quiet, cancel);
    ADD_FAILURE() << "--seq-len 100000 in a context of 64 was accepted";
  } catch (const Error& err) {
    EXPECT_NE(err.message().find("max_position_embeddings"), std::string::npos) << err.message();
  }
  o.temperature = 1e-300;
  o.stopAtEos = false;
  const auto tiny = Generator(o).generateIds({5, 17, 99}, {}, cancel);
  o.temperature = 0;
  EXPECT_EQ(tiny.generatedIds, Generator(o).generateIds({5, 17, 99}, {}, cancel).generatedIds);
}

}  // namespace latentlab::test
