// The decode kernels on their own, against LibTorch's operators on the same
// tensors in the same process: the small-row linear layer over a model's worth
// of distinct weights (so they stream from memory, as in a decode step), and
// the fused decode attention over a model's worth of distinct caches, as GB/s
// of the bytes each must read and next to a plain streaming read (a sum) of
// as many bytes.
#include <algorithm>
#include <cmath>
#include <functional>

#include "bench_util.h"
#include "model/attention.h"
#include "model/decode_attention.h"
#include "model/decode_linear.h"

namespace latentlab::bench {
namespace {

void benchKernels(BenchReport& report) {
  if (!benchDevice().is_cpu()) return;  // CPU kernels: linear in fp32 or bf16 (--dtype), attention in fp32
  torch::NoGradGuard noGrad;
  torch::manual_seed(5);
  const int rounds = benchOptions().quick ? 2 : 5;
  const torch::Device cpu(torch::kCPU);
  const std::string isa =
      "kernel build " + fusedDecodeIsa() + ", " + std::to_string(at::get_num_threads()) + " threads";

  // A plain read of 512 MiB: the machine's streaming rate in this process.
  {
    auto big = torch::randn({128LL << 20});
    const double s = bestOf(cpu, rounds, [&] { (void)big.sum().item<float>(); });
    report.add({"kernels", "streaming read (sum of 512 MiB)", 512.0 * (1 << 20) / s / 1e9, "GB/s", "LibTorch sum"});
  }

  // SmolLM-135M's layer projections, 30 layers of distinct weights (424 MB in fp32).
  {
    const auto dtype = benchBf16() ? torch::kBFloat16 : torch::kFloat32;
    std::vector<torch::Tensor> weights;
    for (int l = 0; l < 30; ++l) {
      for (auto [out, in] :
           {std::pair{576, 576}, {192, 576}, {192, 576}, {576, 576}, {1536, 576}, {1536, 576}, {576, 1536}})
        weights.push_back(torch::randn({out, in}).to(dtype));
    }
    double bytes = 0;
    for (const auto& w : weights) bytes += static_cast<double>(w.numel() * w.element_size());
    for (std::int64_t rows : {1, 4, 8}) {
      std::vector<torch::Tensor> xs;
      for (const auto& w : weights) xs.push_back(torch::randn({rows, w.size(1)}).to(dtype));
      auto pass = [&] {
        for (std::size_t i = 0; i < weights.size(); ++i) (void)linearForward(xs[i], weights[i]);
      };
      setFusedDecodeEnabled(false);
      const double aten = bestOf(cpu, rounds, pass);
      setFusedDecodeEnabled(true);
      const double fused = bestOf(cpu, rounds, pass);
      report.add(
          {"kernels",
           std::string("linear ") + (benchBf16() ? "bf16 " : "") + std::to_string(rows) + " rows, SmolLM-135M layers",
           bytes / fused / 1e9, "GB/s",
           "weights read once per pass: " + fixed(fused * 1e3, 1) + " ms; LibTorch linear " + fixed(aten * 1e3, 1) +
               " ms (" + fixed(aten / fused, 2) + "x); " + isa});
    }
  }

  if (benchBf16()) return;
  // Decode attention at 8k context, batch 8: the original GQA cache and the
  // MHA2MLA latent. Each is timed over distinct caches of 512 MiB or more in
  // all, one layer's worth after another, so that they stream from memory as
  // a model's layers do (one layer's latent alone would fit the L3 cache).
  {
    const std::int64_t B = 8, T = 8192;
    struct Shape {
      const char* name;
      std::int64_t heads, groups, dk, ropeHeads, dRope;
    };
    for (const Shape& sh : {Shape{"GQA K,V (3 KV heads x 64, 3 queries each)", 3, 3, 64, 0, 0},
                            Shape{"MHA2MLA latent 48 + RoPE keys 3 x 8 (9 queries)", 1, 9, 48, 3, 8}}) {
      double bytes = static_cast<double>(B * sh.heads * T * sh.dk) * 4 * (sh.ropeHeads > 0 ? 1 : 2);
      if (sh.ropeHeads > 0) bytes += static_cast<double>(B * sh.ropeHeads * T * sh.dRope) * 4;
      const int layers = static_cast<int>(std::ceil(512.0 * (1 << 20) / bytes));
      std::vector<DecodeAttentionInputs> caches;
      for (int l = 0; l < layers; ++l) {
        DecodeAttentionInputs in;
        in.q = torch::randn({B, sh.heads, sh.groups, sh.dk});
        in.k = torch::randn({B, sh.heads, T, sh.dk});
        in.v = sh.ropeHeads > 0 ? in.k : torch::randn({B, sh.heads, T, sh.dk});
        if (sh.ropeHeads > 0) {
          in.qRope = torch::randn({B, sh.ropeHeads, sh.heads * sh.groups / sh.ropeHeads, sh.dRope});
          in.kRope = torch::randn({B, sh.ropeHeads, T, sh.dRope});
        }
        in.scale = 0.125;
        caches.push_back(std::move(in));
      }
      const double s = bestOf(cpu, rounds,
                              [&] {
                                for (const auto& in : caches) (void)fusedDecodeAttention(in);
                              }) /
                       layers;
      // LibTorch's operators on the same problem: SDPA for GQA, scores/softmax/bmm for the latent.
      std::function<void(const DecodeAttentionInputs&)> aten;
      if (sh.ropeHeads == 0) {
        aten = [&](const DecodeAttentionInputs& in) {
          auto q = in.q.reshape({B, sh.heads * sh.groups, 1, sh.dk});
          (void)at::scaled_dot_product_attention(q, in.k, in.v, {}, 0.0, false, 0.125, /*enable_gqa=*/true);
        };
      } else {
        aten = [&](const DecodeAttentionInputs& in) {
          auto q = in.q.view({B, sh.groups, sh.dk});
          auto lat = in.k.view({B, T, sh.dk});
          auto qr = in.qRope.reshape({B * sh.ropeHeads, sh.groups / sh.ropeHeads, sh.dRope});
          auto kr = in.kRope.flatten(0, 1).transpose(1, 2);
          auto scores = torch::bmm(q, lat.transpose(1, 2));
          scores.view({B * sh.ropeHeads, sh.groups / sh.ropeHeads, T}).baddbmm_(qr, kr);
          (void)torch::bmm(torch::softmax(scores * 0.125, -1), lat);
        };
      }
      const double atenS = bestOf(cpu, rounds,
                                  [&] {
                                    for (const auto& in : caches) aten(in);
                                  }) /
                           layers;
      report.add({"kernels", std::string("decode attention, ") + sh.name + ", B8 T8192", bytes / s / 1e9, "GB/s",
                  fixed(s * 1e3, 2) + " ms per layer of " + fixed(bytes / (1 << 20), 1) + " MiB (" +
                      std::to_string(layers) + " distinct layers); LibTorch ops " + fixed(atenS * 1e3, 2) + " ms (" +
                      fixed(atenS / s, 2) + "x); " + isa});
    }
  }

  // Training's causal self-attention, forward and backward, of SmolLM-135M's
  // layer (9 query heads on 3 key heads of 64 dims, the projections' layout)
  // through causalAttention: the fp32 kernel (model/fused_attention.h), and
  // LibTorch's SDPA with the kernels off. FLOPs: the causal half's products,
  // twice as many backward (6 T d_h n_h per token, the training benchmark's count).
  {
    torch::AutoGradMode grad(true);
    const std::int64_t B = 4, H = 9, Hk = 3, D = 64;
    for (const std::int64_t T : {256, 1024}) {
      const auto q = torch::randn({B, T, H, D}).transpose(1, 2).requires_grad_(true);
      const auto k = torch::randn({B, T, Hk, D}).transpose(1, 2).requires_grad_(true);
      const auto v = torch::randn({B, T, Hk, D}).transpose(1, 2).requires_grad_(true);
      const auto gy = torch::randn({B, T, H, D}).transpose(1, 2);
      auto pass = [&] {
        for (const auto* t : {&q, &k, &v}) const_cast<torch::Tensor*>(t)->mutable_grad().reset();
        causalAttention(q, k, v, 0.125).backward(gy);
      };
      setFusedDecodeEnabled(false);
      const double aten = bestOf(cpu, rounds, pass);
      setFusedDecodeEnabled(true);
      const double fused = bestOf(cpu, rounds, pass);
      const double flops = 6.0 * static_cast<double>(B * T) * static_cast<double>(T * D * H);
      report.add({"kernels", "training attention, SmolLM-135M layer, B4 T" + std::to_string(T), flops / fused / 1e9,
                  "GFLOP/s",
                  "forward + backward " + fixed(fused * 1e3, 2) + " ms; LibTorch SDPA " + fixed(aten * 1e3, 2) +
                      " ms (" + fixed(aten / fused, 2) + "x); " + isa});
    }
  }
}

}  // namespace

LATENTLAB_BENCH("kernels", benchKernels);

}  // namespace latentlab::bench
