// A briefly trained model (real text, so its next-token choices are not
// near-ties as a random model's are) generating greedily in bf16 through its
// cache and the CPU decode kernels picks, token for token, what its full
// forward over the whole sequence picks (no cache; LibTorch's GEMM on every
// row), and the same with the kernels switched off; fed a real text one token
// at a time, it predicts what the full forward predicts, parting at most once,
// at a near-tie of the full forward's logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>

#include "latentlab/generate.h"
#include "latentlab/train.h"
#include "model/decode_attention.h"
#include "model/kv_cache.h"
#include "model/llama.h"
#include "model/weights.h"
#include "test_support.h"
#include "train_test_util.h"

namespace latentlab::test {
namespace fs = std::filesystem;

TEST(TrainedDecode, Bf16DecodeEqualsTheFullForwardTokenForToken) {
  const RunResult trained = trainTinyBase(scratchDir("trained-decode"), 500);
  CancelToken cancel;
  ASSERT_EQ(trained.status, RunStatus::Completed) << trained.errorText();

  constexpr int kNew = 32;
  GenerateOptions o;
  o.model = trained.finalModel;
  o.temperature = 0;
  o.maxNewTokens = kNew;
  o.stopAtEos = false;
  o.dtype = DType::BF16;
  Generator generator(o);
  const std::string prompt = "Python is an easy to learn, powerful programming language. It has efficient";
  const GenerateResult fused = generator.generate(prompt, {}, cancel);
  ASSERT_EQ(fused.generatedIds.size(), static_cast<std::size_t>(kNew));
  setFusedDecodeEnabled(false);
  const GenerateResult plain = generator.generate(prompt, {}, cancel);
  setFusedDecodeEnabled(true);

  // The full forward, from the same bf16 weights: each token the argmax of
  // the last position of the whole sequence so far.
  const auto model = loadModel(trained.finalModel, torch::kCPU, torch::kBFloat16);
  torch::NoGradGuard noGrad;
  std::vector<std::int64_t> ids(fused.promptIds.begin(), fused.promptIds.end());
  std::vector<std::int32_t> full;
  for (int i = 0; i < kNew; ++i) {
    const auto logits = model->forward(torch::tensor(ids).unsqueeze(0));
    const auto next = logits[0][-1].argmax().item<std::int64_t>();
    full.push_back(static_cast<std::int32_t>(next));
    ids.push_back(next);
  }
  EXPECT_EQ(fused.generatedIds, full) << "the kernels' decode against the full forward";
  EXPECT_EQ(plain.generatedIds, full) << "LibTorch's decode against the full forward";

  // A model this small soon repeats itself when it picks its own tokens, so
  // the same holds on a real text too: each of its tokens fed one at a time
  // through the cache (one row a step, the kernels' shape) predicts the next
  // token the full forward predicts at that position.
  const auto text = generator.generate(
      "Python is an easy to learn, powerful programming language. It has efficient high-level data structures "
      "and a simple but effective approach to object-oriented programming.",
      {}, cancel);
  const auto textIds = torch::tensor(std::vector<std::int64_t>(text.promptIds.begin(), text.promptIds.end()));
  const std::int64_t n = textIds.size(0);
  ASSERT_GE(n, 32);
  const auto wholeLogits = model->forward(textIds.unsqueeze(0))[0].to(torch::kFloat32);  // (n, V)
  const auto wholeArgmax = wholeLogits.argmax(-1);                                       // (n)
  KvCache cache(model->config().numLayers);
  std::vector<std::int64_t> stepArgmax;
  for (std::int64_t t = 0; t < n; ++t)
    stepArgmax.push_back(
        model->forward(textIds.narrow(0, t, 1).unsqueeze(0), &cache)[0][-1].argmax().item<std::int64_t>());
  const std::vector<std::int64_t> want(wholeArgmax.data_ptr<std::int64_t>(), wholeArgmax.data_ptr<std::int64_t>() + n);
  // Each position's choice is the full forward's, or (one position at most)
  // its runner-up where the full forward's two logits are within two bf16
  // steps: one bf16 rounding elsewhere in the layers decides such a near-tie,
  // and where it falls moves with every retraining of the base.
  int parted = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    if (stepArgmax[t] == want[t]) continue;
    ++parted;
    const double top = wholeLogits[t][want[t]].item<double>(), other = wholeLogits[t][stepArgmax[t]].item<double>();
    const double bf16Step = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(std::abs(top)))) - 7);
    std::printf("position %ld of %ld: step decode %ld, full forward %ld, logits %.4f against %.4f (bf16 step %.4f)\n",
                static_cast<long>(t), static_cast<long>(n), static_cast<long>(stepArgmax[t]),
                static_cast<long>(want[t]), other, top, bf16Step);
    EXPECT_LE(top - other, 2 * bf16Step) << "position " << t << ": not a near-tie";
  }
  EXPECT_LE(parted, 1) << "positions where the step decode and the full forward part";
  EXPECT_GE(std::set<std::int64_t>(want.begin(), want.end()).size(), 8u) << "the predictions vary along the text";
}

}  // namespace latentlab::test
