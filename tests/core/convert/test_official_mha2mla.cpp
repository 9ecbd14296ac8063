// Checkpoints in the official MHA2MLA code's layouts (its "mha2mla" block with
// k_r_proj / kv_proj.*, and the first release's "RoPE"/"SVD" blocks with W_*
// names), written from LatentLab conversions by a script that follows the
// official layout: read back, they choose the same pairs (2-norm from the
// rank or score file torch.save wrote), give the same logits, inspect and
// decode, and a fine-tune saves in LatentLab's own format.
#include <gtest/gtest.h>

#include "convert_test_util.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "model/weights.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

struct Case {
  int format;
  RopeStrategy rope;
  SvdMethod svd = SvdMethod::Joint;
};

std::string caseName(const Case& c) {
  return "format" + std::to_string(c.format) + "-" + ropeStrategyName(c.rope) +
         (c.svd == SvdMethod::Split ? "-split" : "");
}

// A LatentLab conversion of a small GQA model and the same model written in
// the official layout; returns the converted model and the official folder.
std::pair<std::shared_ptr<CausalLm>, fs::path> officialFolder(const Case& c, std::string* log) {
  const ModelConfig cfg = tinyConfig({.kvHeads = 2, .layers = 3});
  auto base = randomModel(cfg, torch::kFloat32, 21);
  auto calib = randomBatches(128, 2, 2, 16, 4);
  ConversionOptions o = mlaOptions(c.rope, 2, 4, c.svd);
  // The official rank file ranks q * k pair norms; the first release's score file sums them.
  o.twoNormScore = c.format == 2 ? TwoNormScore::Product : TwoNormScore::Sum;
  NullProgress progress;
  CancelToken cancel;
  auto mla = convertModel(*base, o, calib, progress, cancel);
  const fs::path root = scratchDir("official-" + caseName(c));
  saveModel(*mla, root / "latentlab", DType::F32);
  std::vector<std::string> args = {"write", (root / "latentlab").string(), (root / "official").string(), "--format",
                                   std::to_string(c.format)};
  if (c.rope == RopeStrategy::TwoNorm) {
    const PairNorms norms = calibratePairNorms(*base, calib, progress, cancel);
    const torch::Tensor scores = twoNormScores(norms, cfg.numKvHeads, o.twoNormScore).contiguous();
    writeRaw(root / "scores.bin", scores);
    args.insert(args.end(), {"--scores", (root / "scores.bin").string(), "--shape",
                             std::to_string(scores.size(0)) + "," + std::to_string(scores.size(1)) + "," +
                                 std::to_string(scores.size(2))});
  }
  if (runPython("mha2mla_official.py", args, log) != 0) return {nullptr, {}};
  return {mla, root / "official"};
}

}  // namespace

TEST(OfficialMha2Mla, EachLayoutReadsBackAsTheSameModel) {
  ASSERT_TRUE(pythonHas("safetensors")) << "the test peer 'safetensors' is not installed";
  for (const Case& c : {Case{2, RopeStrategy::High}, Case{2, RopeStrategy::Uniform}, Case{2, RopeStrategy::TwoNorm},
                        Case{2, RopeStrategy::Low, SvdMethod::Split}, Case{1, RopeStrategy::High},
                        Case{1, RopeStrategy::Uniform}, Case{1, RopeStrategy::TwoNorm}}) {
    SCOPED_TRACE(caseName(c));
    std::string log;
    auto [mla, dir] = officialFolder(c, &log);
    ASSERT_TRUE(mla) << log;
    // inspect reads it without weights: the same parameters and cache as the conversion.
    const ModelSummary s = inspectModel(dir);
    ASSERT_TRUE(s.config.mla.has_value());
    EXPECT_EQ(s.config.mla->official->format, c.format);
    EXPECT_EQ(s.parameters, countParameters(mla->config()));
    EXPECT_EQ(s.kv.bytesPerToken, currentKvBudget(mla->config(), DType::F32).bytesPerToken);
    auto back = loadModel(dir, torch::kCPU, torch::kFloat32);
    EXPECT_EQ(back->config().mla->pairs, mla->config().mla->pairs);
    EXPECT_EQ(back->config().mla->svdMethod, mla->config().mla->svdMethod);
    torch::NoGradGuard g;
    auto ids = torch::randint(0, 128, {2, 20}, torch::kInt64);
    const auto expected = mla->forward(ids);
    EXPECT_LT(maxAbsDiff(back->forward(ids), expected), 1e-5);
    // Decoded through the latent cache, absorbed.
    KvCache cache(back->numLayers());
    EXPECT_LT(maxAbsDiff(decodeIncrementally(*back, ids, cache), expected), 1e-4);
    // Saved again it is a LatentLab folder (latentlab_mla, LatentLab's names) with the same logits.
    saveModel(*back, dir.parent_path() / "resaved", DType::F32);
    const ModelConfig resaved = readHfConfig(dir.parent_path() / "resaved" / "config.json");
    EXPECT_FALSE(resaved.mla->official.has_value());
    EXPECT_LT(
        maxAbsDiff(loadModel(dir.parent_path() / "resaved", torch::kCPU, torch::kFloat32)->forward(ids), expected),
        1e-6);
  }
}

TEST(OfficialMha2Mla, AWrongOrMissingRankFileIsRefusedNamingIt) {
  std::string log;
  auto [mla, dir] = officialFolder({2, RopeStrategy::TwoNorm}, &log);
  ASSERT_TRUE(mla) << log;
  const fs::path rank = dir / "smollm1_tiny-2_norm_rank.pth";
  fs::rename(rank, dir.parent_path() / "aside.pth");
  try {
    loadModel(dir, torch::kCPU, torch::kFloat32);
    ADD_FAILURE() << "a missing rank file was not refused";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("smollm1_tiny-2_norm_rank.pth"), std::string::npos) << e.message();
    EXPECT_NE(e.hint().find("copy that file"), std::string::npos) << e.hint();
  }
  // Not a pickled tensor.
  std::ofstream(rank) << "not a tensor";
  try {
    loadModel(dir, torch::kCPU, torch::kFloat32);
    ADD_FAILURE() << "a corrupt rank file was not refused";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("torch.save"), std::string::npos) << e.message();
  }
  // The first release's score file in place of the rank file: the wrong shape, named.
  std::string log1;
  auto [mla1, dir1] = officialFolder({1, RopeStrategy::TwoNorm}, &log1);
  ASSERT_TRUE(mla1) << log1;
  fs::copy_file(dir1 / "qk_tensor_tiny.pth", rank, fs::copy_options::overwrite_existing);
  try {
    loadModel(dir, torch::kCPU, torch::kFloat32);
    ADD_FAILURE() << "a rank file of the wrong shape was not refused";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("needs [3, 2, 16]"), std::string::npos) << e.message();
  }
}

}  // namespace latentlab::test
