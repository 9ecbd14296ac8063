// CUDA checks (label gpu; skipped without a CUDA device): a bf16-autocast
// training step on the GPU against the same step in fp32 on the CPU, and the
// absorbed latent decode on the GPU against the CPU and against naive decode.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "convert/converter.h"
#include "latentlab/architectures.h"
#include "model/mla_attention.h"
#include "train/model_builder.h"
#include "train/optimizer.h"
#include "train/train_step.h"

namespace latentlab::test {
namespace {

std::shared_ptr<CausalLm> demoModel(std::uint64_t seed) {
  torch::manual_seed(seed);
  auto model = std::make_shared<CausalLm>(builtinArchitecture("demo-gqa", 512));
  initializeWeights(*model, 0.02, false);
  return model;
}

std::shared_ptr<CausalLm> copyTo(CausalLm& src, const torch::Device& device) {
  auto dst = std::make_shared<CausalLm>(src.config());
  torch::NoGradGuard g;
  auto from = src.named_parameters();
  for (auto& item : dst->named_parameters()) item.value().copy_(from[item.key()]);
  dst->to(device);
  return dst;
}

// One step of the trainer's own (train/train_step.h); returns (loss, grad
// norm) and leaves the updated parameters.
std::pair<double, double> trainStep(CausalLm& model, const torch::Tensor& windows, bool bf16) {
  FusedAdamW opt(model.parameters(), torch::optim::AdamWOptions(1e-3).betas({0.9, 0.95}));
  StepSettings settings;
  settings.autocastBf16 = bf16;
  settings.clip = 1.0;
  const StepOutcome out = latentlab::trainStep(
      model, opt, model.parameters(), [&] { return windows; }, settings);
  return {out.loss, out.gradNorm};
}

}  // namespace

TEST(Cuda, Bf16TrainingStepAgreesWithCpuFp32) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  auto cpu = demoModel(21);
  auto gpu = copyTo(*cpu, cuda);
  auto before = copyTo(*cpu, torch::kCPU);
  auto windows = torch::randint(0, 512, {8, 65}, torch::kInt64);
  const auto [cpuLoss, cpuNorm] = trainStep(*cpu, windows, false);
  const auto [gpuLoss, gpuNorm] = trainStep(*gpu, windows.to(cuda), true);
  EXPECT_NEAR(gpuLoss, cpuLoss, 0.01 * cpuLoss);
  EXPECT_NEAR(gpuNorm, cpuNorm, 0.05 * cpuNorm);
  // AdamW's first step moves every weight by about lr in the gradient's
  // direction: the two devices must agree on the direction almost everywhere.
  auto p0 = before->named_parameters();
  auto pg = gpu->named_parameters();
  std::int64_t agree = 0, total = 0;
  for (auto& item : cpu->named_parameters()) {
    auto dCpu = item.value() - p0[item.key()];
    auto dGpu = pg[item.key()].cpu() - p0[item.key()];
    agree += (dCpu.sign() == dGpu.sign()).sum().item<std::int64_t>();
    total += dCpu.numel();
  }
  EXPECT_GT(static_cast<double>(agree) / total, 0.9);
}

TEST(Cuda, AbsorbedDecodeOnCudaMatchesCpuAndNaive) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  auto base = demoModel(22);
  ConversionOptions opts;
  opts.rope = RopeStrategy::Uniform;
  opts.ropePairs = 2;
  opts.dKv = 8;
  auto mla = convertModel(*base, opts);
  torch::NoGradGuard g;
  auto ids = torch::randint(0, 512, {2, 40}, torch::kInt64);
  auto decode = [&](CausalLm& model, MlaDecode mode, const torch::Device& device) {
    setMlaDecode(model, mode);
    KvCache cache(model.numLayers());
    std::vector<torch::Tensor> parts{model.forward(ids.narrow(1, 0, 16).to(device), &cache)};
    for (std::int64_t t = 16; t < ids.size(1); ++t)
      parts.push_back(model.forward(ids.narrow(1, t, 1).to(device), &cache));
    return torch::cat(parts, 1).to(torch::kCPU, torch::kFloat32);
  };
  auto reference = decode(*mla, MlaDecode::Absorbed, torch::kCPU);
  mla->to(cuda);
  auto fp32 = decode(*mla, MlaDecode::Absorbed, cuda);
  EXPECT_LT((fp32 - reference).abs().max().item<double>(), 1e-3);  // TF32 may be on
  mla->to(cuda, torch::kBFloat16);
  auto absorbed = decode(*mla, MlaDecode::Absorbed, cuda);
  auto naive = decode(*mla, MlaDecode::Naive, cuda);
  const double scale = reference.abs().max().item<double>();
  EXPECT_LT((absorbed - reference).abs().max().item<double>(), 0.05 * scale);
  EXPECT_LT((absorbed - naive).abs().max().item<double>(), 0.05 * scale);
}

}  // namespace latentlab::test
