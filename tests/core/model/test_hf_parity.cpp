// The forward pass matches Hugging Face transformers on the same files, for
// HF-written and LatentLab-written checkpoints (MHA/GQA, tied/untied, biases,
// positions past 1000).
#include <gtest/gtest.h>

#include "model/weights.h"
#include "model_test_util.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

struct Variant {
  std::string name;
  std::vector<std::string> makeArgs;  // for hf_llama.py make
};


torch::Tensor hfLogitsSized(const fs::path& dir, const torch::Tensor& ids, int vocab, std::string* log) {
  const fs::path idsFile = dir.parent_path() / (dir.filename().string() + ".ids");
  const fs::path outFile = dir.parent_path() / (dir.filename().string() + ".logits");
  writeRaw(idsFile, ids.to(torch::kInt64));
  const std::string shape = std::to_string(ids.size(0)) + "," + std::to_string(ids.size(1));
  int rc = runPython("hf_llama.py", {"logits", dir.string(), idsFile.string(), outFile.string(), "--shape", shape}, log);
  if (rc != 0) return {};
  return readRawFloat(outFile, {ids.size(0), ids.size(1), vocab});
}

class HfParity : public ::testing::TestWithParam<Variant> {};

} // namespace

TEST_P(HfParity, HfWrittenCheckpointGivesHfLogits) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed in " << LATENTLAB_PYTHON;
  const auto& v = GetParam();
  fs::path dir = scratchDir("parity-" + v.name) / "model";
  std::vector<std::string> args = {"make", dir.string()};
  args.insert(args.end(), v.makeArgs.begin(), v.makeArgs.end());
  std::string log;
  ASSERT_EQ(runPython("hf_llama.py", args, &log), 0) << log;

  auto model = loadModel(dir, torch::kCPU, torch::kFloat32);
  const int vocab = model->config().vocabSize;
  // Two sequences of 1100 tokens: positions past 1000 exercise the RoPE tables.
  torch::manual_seed(7);
  auto ids = torch::randint(0, vocab, {2, 1100}, torch::kInt64);
  torch::NoGradGuard g;
  auto ours = model->forward(ids);
  auto theirs = hfLogitsSized(dir, ids, vocab, &log);
  ASSERT_TRUE(theirs.defined()) << log;
  // On failure, say which side drifted: both against this model in fp64.
  auto exact = [&] {
    auto m64 = loadModel(dir, torch::kCPU, torch::kFloat64);
    return m64->forward(ids);
  };
  EXPECT_LT(maxAbsDiff(ours, theirs), 1e-4)
      << v.name << ": max |logit| " << theirs.abs().max().item<double>() << ", ours vs fp64 "
      << maxAbsDiff(ours, exact()) << ", transformers vs fp64 " << maxAbsDiff(theirs, exact());
  // The late positions alone, so an error there cannot hide in the average.
  EXPECT_LT(maxAbsDiff(ours.narrow(1, 1000, 100), theirs.narrow(1, 1000, 100)), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, HfParity,
    ::testing::Values(Variant{"mha_untied", {"--heads", "4", "--kv-heads", "4"}},
                      Variant{"gqa_untied", {"--heads", "4", "--kv-heads", "2"}},
                      Variant{"gqa_tied", {"--heads", "4", "--kv-heads", "2", "--tied"}},
                      Variant{"mha_tied_biases", {"--heads", "4", "--kv-heads", "4", "--tied", "--attention-bias", "--mlp-bias"}},
                      Variant{"qwen2_gqa_biases", {"--type", "qwen2", "--heads", "4", "--kv-heads", "1"}},
                      Variant{"gqa_theta_head_dim", {"--heads", "2", "--kv-heads", "1", "--head-dim", "24", "--theta", "500000"}}),
    [](const auto& info) { return info.param.name; });

TEST(HfParity, LatentLabWrittenCheckpointLoadsInTransformers) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed";
  for (bool tied : {false, true}) {
    TinyShape s;
    s.tied = tied;
    s.attentionBias = !tied;
    auto model = randomModel(tinyConfig(s), torch::kFloat32, 3);
    fs::path dir = scratchDir(tied ? "ours-tied" : "ours-untied") / "model";
    saveModel(*model, dir, DType::F32);
    torch::manual_seed(1);
    auto ids = torch::randint(0, s.vocab, {1, 64}, torch::kInt64);
    torch::NoGradGuard g;
    std::string log;
    auto theirs = hfLogitsSized(dir, ids, s.vocab, &log);
    ASSERT_TRUE(theirs.defined()) << log;
    EXPECT_LT(maxAbsDiff(model->forward(ids), theirs), 1e-4);
  }
}

} // namespace latentlab::test
