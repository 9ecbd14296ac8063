// The training step's optimiser against LibTorch's reference implementations,
// bf16 master weights, and a golden trajectory that shows any change to the step.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "model/llama.h"
#include "model/weights.h"
#include "train/model_builder.h"
#include "train/optimizer.h"
#include "train/train_step.h"
#include "train_test_util.h"

namespace latentlab::test {
namespace {

std::shared_ptr<CausalLm> smallModel(torch::ScalarType dtype, std::uint64_t seed = 1) {
  torch::manual_seed(seed);
  auto m = std::make_shared<CausalLm>(tinyModelConfig());
  m->to(dtype);
  initializeWeights(*m, 0.05, false);
  return m;
}

torch::Tensor windowsFor(int step) {
  torch::manual_seed(1000 + step);
  return torch::randint(0, 64, {4, 17}, torch::kInt64);
}

double maxDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

torch::optim::AdamWOptions options() {
  return torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1);
}

}  // namespace

// FusedAdamW with the trainer's parameter groups (decay on matrices, none on
// norms) and foreach clipping equal torch::optim::AdamW and
// torch::nn::utils::clip_grad_norm_ over 5 real steps in fp32, to 1e-6.
TEST(Optimizer, FusedAdamWAndClippingEqualLibTorchOverFiveSteps) {
  auto fused = smallModel(torch::kFloat32), reference = smallModel(torch::kFloat32);
  ASSERT_EQ(maxDiff(fused->parameters(), reference->parameters()), 0.0);
  FusedAdamW fusedOpt(adamWParamGroups(fused->parameters(), options()), options());
  torch::optim::AdamW referenceOpt(adamWParamGroups(reference->parameters(), options()), options());
  ASSERT_EQ(fusedOpt.param_groups().size(), 2u);
  EXPECT_EQ(static_cast<torch::optim::AdamWOptions&>(fusedOpt.param_groups()[0].options()).weight_decay(), 0.1);
  EXPECT_EQ(static_cast<torch::optim::AdamWOptions&>(fusedOpt.param_groups()[1].options()).weight_decay(), 0.0);
  EXPECT_EQ(std::get<1>(static_cast<torch::optim::AdamWOptions&>(fusedOpt.param_groups()[1].options()).betas()), 0.95);
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE(step);
    for (auto* pair : {&fused, &reference}) {
      (*pair)->zero_grad();
      languageModelLoss(**pair, windowsFor(step)).backward();
    }
    const double clip = step % 2 == 0 ? 0.05 : 1e9;  // clipping active on even steps
    const double norm = clipGradNorm(fused->parameters(), clip).item<double>();
    const double refNorm = torch::nn::utils::clip_grad_norm_(reference->parameters(), clip);
    EXPECT_NEAR(norm, refNorm, 1e-6 * refNorm);
    if (step % 2 == 0) {
      EXPECT_GT(refNorm, clip) << "the clip must bite";
    }
    std::vector<torch::Tensor> g1, g2;
    for (auto& p : fused->parameters()) g1.push_back(p.grad());
    for (auto& p : reference->parameters()) g2.push_back(p.grad());
    EXPECT_LT(maxDiff(g1, g2), 1e-6);
    fusedOpt.step();
    referenceOpt.step();
    EXPECT_LT(maxDiff(fused->parameters(), reference->parameters()), 1e-6);
  }
  // The state is LibTorch's: the same step count and moments.
  for (std::size_t i = 0; i < fused->parameters().size(); ++i) {
    auto& a =
        static_cast<torch::optim::AdamWParamState&>(*fusedOpt.state().at(fused->parameters()[i].unsafeGetTensorImpl()));
    auto& b = static_cast<torch::optim::AdamWParamState&>(
        *referenceOpt.state().at(reference->parameters()[i].unsafeGetTensorImpl()));
    EXPECT_EQ(a.step(), 5);
    EXPECT_EQ(b.step(), 5);
    EXPECT_LT((a.exp_avg_sq() - b.exp_avg_sq()).abs().max().item<double>(), 1e-9);
  }
}

// Clipping inside the fused step (the trainer's way with FusedAdamW): the
// same parameters, state and clipped gradients as clipping first, over five
// steps with the clip biting on every other one.
TEST(Optimizer, ClippingInsideTheFusedStepEqualsClippingFirst) {
  auto inside = smallModel(torch::kFloat32), first = smallModel(torch::kFloat32);
  FusedAdamW insideOpt(adamWParamGroups(inside->parameters(), options()), options());
  FusedAdamW firstOpt(adamWParamGroups(first->parameters(), options()), options());
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE(step);
    for (auto* m : {&inside, &first}) {
      (*m)->zero_grad();
      languageModelLoss(**m, windowsFor(step)).backward();
    }
    const double clip = step % 2 == 0 ? 0.05 : 1e9;
    const auto norm = gradNorm(inside->parameters());
    insideOpt.scaleGradientsInStep(clipCoefficient(norm, clip));
    EXPECT_NEAR(norm.item<double>(), clipGradNorm(first->parameters(), clip).item<double>(),
                1e-6 * norm.item<double>());
    if (step % 2 == 0) {
      EXPECT_GT(norm.item<double>(), clip) << "the clip must bite";
    }
    insideOpt.step();
    firstOpt.step();
    std::vector<torch::Tensor> g1, g2;
    for (auto& p : inside->parameters()) g1.push_back(p.grad());
    for (auto& p : first->parameters()) g2.push_back(p.grad());
    EXPECT_LT(maxDiff(g1, g2), 1e-7) << "the gradients are left clipped";
    EXPECT_LT(maxDiff(inside->parameters(), first->parameters()), 1e-6);
  }
  // A factor set and cancelled scales nothing.
  inside->zero_grad();
  languageModelLoss(*inside, windowsFor(7)).backward();
  const auto before = inside->parameters().front().grad().clone();
  insideOpt.scaleGradientsInStep(torch::tensor(0.5));
  insideOpt.scaleGradientsInStep({});
  insideOpt.step();
  EXPECT_TRUE(torch::equal(inside->parameters().front().grad(), before));
}

// bf16 weights with fp32 masters: one step through trainStep equals an fp32
// AdamW step on the masters with the bf16 gradients, and the model receives
// the masters rounded. Updates far below bf16's resolution accumulate in the
// masters instead of vanishing.
TEST(Optimizer, MasterWeightsStepInFp32AndRoundIntoTheModel) {
  auto model = smallModel(torch::kFloat32);
  MasterWeights master(model->parameters());
  model->to(torch::kBFloat16);
  master.bind(model->parameters());
  const auto before = [&] {
    std::vector<torch::Tensor> v;
    for (const auto& m : master.masters()) v.push_back(m.detach().clone());
    return v;
  }();
  auto opts = options().lr(1e-6).weight_decay(0.0);
  FusedAdamW opt(adamWParamGroups(master.masters(), opts), opts);
  int calls = 0;
  StepSettings settings;
  settings.master = &master;
  const StepOutcome out = trainStep(
      *model, opt, master.masters(), [&] { return windowsFor(calls++); }, settings);
  ASSERT_TRUE(out.finite);
  EXPECT_EQ(calls, 1);
  for (const auto& p : model->parameters()) {
    EXPECT_EQ(p.scalar_type(), torch::kBFloat16);
    EXPECT_FALSE(p.grad().defined()) << "the bf16 gradient is released once moved to the master";
  }
  double moved = 0;
  for (std::size_t i = 0; i < before.size(); ++i) {
    const auto& m = master.masters()[i];
    EXPECT_EQ(m.scalar_type(), torch::kFloat32);
    moved = std::max(moved, (m - before[i]).abs().max().item<double>());
    // The model holds the masters rounded to bf16.
    EXPECT_TRUE(torch::equal(model->parameters()[i], m.detach().to(torch::kBFloat16)));
  }
  // Adam's first step moves each weight by about lr: far below bf16's
  // resolution at 0.05 (2^-12), kept by the masters only.
  EXPECT_GT(moved, 5e-7);
  EXPECT_LT(moved, 2e-6);
}

// A fixed tiny run (fp64, fixed data, clip 1.0, weight decay on matrices)
// through trainStep: the ten losses are checked in, so that any change to
// the step (loss, optimiser, clipping, groups, accumulation) shows here.
TEST(Optimizer, GoldenTenStepTrajectory) {
  const std::vector<double> golden = {
      4.215937077806527, 4.206439500323704, 4.224616905173255, 4.187976752351016, 4.199183709299465,
      4.171464345489289, 4.206653573107642, 4.180981722636959, 4.211376096614338, 4.182046875233558,
  };
  auto model = smallModel(torch::kFloat64, 7);
  auto opts = options();
  FusedAdamW opt(adamWParamGroups(model->parameters(), opts), opts);
  StepSettings settings;
  settings.gradAccum = 2;
  settings.clip = 1.0;
  int calls = 0;
  std::vector<double> losses;
  for (int step = 0; step < 10; ++step) {
    losses.push_back(trainStep(
                         *model, opt, model->parameters(), [&] { return windowsFor(calls++); }, settings)
                         .loss);
  }
  EXPECT_EQ(calls, 20);
  std::string printed;
  char buf[40];
  for (double l : losses) {
    std::snprintf(buf, sizeof(buf), "      %.15f,\n", l);
    printed += buf;
  }
  for (std::size_t i = 0; i < golden.size(); ++i)
    EXPECT_NEAR(losses[i], golden[i], 1e-10) << "step " << i + 1 << "; this run's trajectory:\n" << printed;
}

}  // namespace latentlab::test
