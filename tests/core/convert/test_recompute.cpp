// Activation recompute gives the training forward and backward of every
// attention (MHA, GQA, an MHA2MLA conversion, MLA / GLA / MLRA from scratch)
// the same loss and the same gradients as keeping the activations, in fp32
// and under bf16 autocast (backward runs the layers again under the
// forward's autocast state).
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include "convert_test_util.h"
#include "latentlab/architectures.h"
#include "model/autocast_scope.h"

namespace latentlab::test {
namespace {

struct Result {
  double loss = 0;
  std::vector<torch::Tensor> grads;
};

Result lossAndGrads(CausalLm& model, const torch::Tensor& windows, bool recompute, bool autocastBf16) {
  model.setRecompute(recompute);
  model.zero_grad();
  torch::Tensor loss;
  at::autocast::set_autocast_enabled(torch::kCPU, autocastBf16);
  at::autocast::set_autocast_dtype(torch::kCPU, torch::kBFloat16);
  loss = languageModelLoss(model, windows);
  at::autocast::set_autocast_enabled(torch::kCPU, false);
  at::autocast::clear_cache();
  loss.backward();
  Result r;
  r.loss = loss.item<double>();
  for (const auto& p : model.parameters())
    r.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return r;
}

std::vector<std::pair<std::string, std::shared_ptr<CausalLm>>> models() {
  std::vector<std::pair<std::string, std::shared_ptr<CausalLm>>> out;
  out.emplace_back("mha", randomModel(tinyConfig({.kvHeads = 4}), torch::kFloat32, 1));
  auto gqa = randomModel(tinyConfig({.kvHeads = 2}), torch::kFloat32, 2);
  out.emplace_back("gqa", gqa);
  out.emplace_back("mha2mla", convertModel(*gqa, mlaOptions(RopeStrategy::High, 2, 8)));
  for (const std::string v : {"mla", "gla-2", "mlra-2"}) {
    AttentionOptions o;
    o.dC = 24;
    o.dRope = 8;
    o.qLoraRank = 20;
    o.match = "none";
    out.emplace_back(v, randomModel(attentionVariant(tinyConfig({.kvHeads = 4}), v, o, "test"), torch::kFloat32, 3));
  }
  return out;
}

}  // namespace

TEST(Recompute, SameLossAndGradientsForEveryAttention) {
  torch::manual_seed(5);
  const auto windows = torch::randint(0, 128, {3, 17}, torch::kInt64);
  for (auto& [name, model] : models()) {
    model->train();
    for (bool autocast : {false, true}) {
      const Result kept = lossAndGrads(*model, windows, /*recompute=*/false, autocast);
      const Result again = lossAndGrads(*model, windows, /*recompute=*/true, autocast);
      const std::string what = name + (autocast ? " bf16 autocast" : " fp32");
      EXPECT_EQ(kept.loss, again.loss) << what;
      ASSERT_EQ(kept.grads.size(), again.grads.size());
      double worst = 0;
      for (std::size_t i = 0; i < kept.grads.size(); ++i) {
        worst = std::max(worst, (kept.grads[i] - again.grads[i]).abs().max().item<double>());
      }
      EXPECT_LT(worst, 1e-6) << what;
      EXPECT_GT(kept.grads.front().abs().sum().item<double>(), 0.0) << what;  // gradients reached the embedding
    }
  }
}

TEST(Recompute, OnlyTheTrainingForwardRecomputes) {
  // Under no-grad (evaluation) and with a decode cache, recompute changes nothing.
  auto model = randomModel(tinyConfig({}), torch::kFloat32, 4);
  model->setRecompute(true);
  torch::NoGradGuard g;
  const auto ids = torch::randint(0, 128, {2, 9}, torch::kInt64);
  const auto withFlag = model->forward(ids);
  model->setRecompute(false);
  EXPECT_TRUE(torch::equal(withFlag, model->forward(ids)));
}

}  // namespace latentlab::test

namespace latentlab::test {

TEST(AutocastScope, SetsAndRestoresTheStateHoweverTheScopeEnds) {
  ASSERT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
  {
    AutocastScope outer(torch::kCPU, true);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(torch::kCPU));
    EXPECT_EQ(at::autocast::get_autocast_dtype(torch::kCPU), at::kBFloat16);
    {
      AutocastScope inner(torch::kCPU, false);  // a scope turning it off inside another
      EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
    }
    EXPECT_TRUE(at::autocast::is_autocast_enabled(torch::kCPU));  // the outer scope's state again
    // Under it a matmul computes in bf16.
    const auto a = torch::randn({4, 4});
    EXPECT_EQ(torch::matmul(a, a).scalar_type(), at::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
  try {
    AutocastScope scope(torch::kCPU, true);
    throw std::runtime_error("inside");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU)) << "an exception left autocast on";
}

}  // namespace latentlab::test
