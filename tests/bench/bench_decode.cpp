// Decode speed and cache bytes at growing context: the original GQA/MHA
// model, the MHA2MLA-converted model with naive attention (K and V rebuilt
// from the latent each step), and with absorbed attention over the latent
// cache; the original and the absorbed model also with the fused CPU decode
// kernels switched off (LibTorch's SDPA, bmm and linear), the before of those
// kernels. Cache bytes come from the real cache tensors and are printed next
// to the formula of algorithms.md §2.3. All are timed round-robin at each
// context, so machine load hits them alike; each keeps the best round.
// Both models' caches are also timed quantized (int8 and int4, the newest
// 128 tokens exact; docs/kv_quant.md), read back a block at a time.
// LATENTLAB_BENCH_DECODE_ARCH picks the shape (default smollm-135m);
// LATENTLAB_BENCH_DECODE_PROFILE=<decoder name> (e.g. "MLA absorbed") times
// that decoder alone for 14 rounds, for a profiler to sample its steps.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_util.h"
#include "convert/converter.h"
#include "latentlab/architectures.h"
#include "latentlab/kv_budget.h"
#include "latentlab/kv_quant.h"
#include "model/decode_attention.h"
#include "model/mla_attention.h"
#include "train/model_builder.h"

namespace latentlab::bench {
namespace {

struct Decoder {
  std::string name;
  CausalLm* model;
  MlaDecode mode;
  bool fused;  // the CPU decode kernels (model/decode_attention.h, decode_linear.h)
  KvCache cache;
  std::int64_t formulaBytesPerToken;
  double best = 0;          // tokens/s
  KvQuantSettings quant{};  // a quantized cache (docs/kv_quant.md)
};

// A cache of `ctx` tokens holding random tensors of exactly the shapes a
// prefill writes (decode cost does not depend on the values; that decoding
// after a real prefill is right is what tests/core/convert/test_mla_decode.cpp
// checks). Original: K and V (B, n_kv, T, d_h). MLA: the RoPE key
// (B, n_kv, T, 2r), the latent (B, 1, T, n_kv*d_kv), the value latent (split).
void fillCache(KvCache& cache, const CausalLm& model, std::int64_t batch, std::int64_t ctx,
               const torch::TensorOptions& opts, const KvQuantSettings& quant) {
  const ModelConfig& c = model.config();
  cache.clear();
  cache.reserve(ctx + 64);  // the timed steps append without regrowing the cache
  cache.setQuant(quant);
  for (int i = 0; i < c.numLayers; ++i) {
    auto& layer = cache.layer(i);
    // A quantized cache keeps the tokens past its window as codes, as a prefill leaves them.
    const auto put = [&](int slot, const torch::Tensor& t) {
      if (quant.on())
        layer.appendQuantized(slot, t);
      else
        layer.append(slot, t);
    };
    if (!c.mla) {
      for (int slot = 0; slot < 2; ++slot) put(slot, torch::randn({batch, c.numKvHeads, ctx, c.headDim}, opts));
    } else {
      const std::int64_t latent = static_cast<std::int64_t>(c.numKvHeads) * c.mla->dKv;
      put(0, torch::randn({batch, c.numKvHeads, ctx, 2 * c.mla->ropePairs}, opts));
      put(1, torch::randn({batch, 1, ctx, latent}, opts));
      if (c.mla->svdMethod == SvdMethod::Split) put(2, torch::randn({batch, 1, ctx, latent}, opts));
    }
    layer.advance(ctx);
  }
}

void benchDecode(BenchReport& report) {
  const char* archEnv = std::getenv("LATENTLAB_BENCH_DECODE_ARCH");
  const std::string arch = archEnv != nullptr ? archEnv : "smollm-135m";
  const bool quick = benchOptions().quick;
  const torch::Device device = benchDevice();
  const auto dtype = benchBf16() ? torch::kBFloat16 : torch::kFloat32;
  const DType cacheType = benchBf16() ? DType::BF16 : DType::F32;
  torch::NoGradGuard noGrad;
  torch::manual_seed(3);

  const ModelConfig cfg = builtinArchitecture(arch);
  auto original = std::make_shared<CausalLm>(cfg);
  initializeWeights(*original, 0.02, false);
  original->eval();
  ConversionOptions opts;
  opts.rope = RopeStrategy::Uniform;
  opts.ropePairs = defaultRopePairs(cfg.headDim);
  opts.dKv = std::max(4, cfg.headDim / 4);
  auto mla = convertModel(*original, opts);
  original->to(device, dtype);
  mla->to(device, dtype);
  mla->eval();

  const auto origBudget = currentKvBudget(cfg, cacheType);
  const auto mlaBudget = currentKvBudget(mla->config(), cacheType);
  std::vector<Decoder> decoders;
  const int L = cfg.numLayers;
  decoders.push_back({"original", original.get(), MlaDecode::Absorbed, true, KvCache(L), origBudget.bytesPerToken});
  decoders.push_back({"MLA absorbed", mla.get(), MlaDecode::Absorbed, true, KvCache(L), mlaBudget.bytesPerToken});
  decoders.push_back({"MLA naive", mla.get(), MlaDecode::Naive, true, KvCache(L), mlaBudget.bytesPerToken});
  // Both caches quantized (the newest 128 tokens exact), read a block at a time.
  for (const int bits : {8, 4}) {
    decoders.push_back({std::string("original, ") + kvQuantName(bits) + " cache", original.get(), MlaDecode::Absorbed,
                        true, KvCache(L), origBudget.bytesPerToken, 0, KvQuantSettings{bits, 64, 128}});
  }
  for (const int bits : {8, 4}) {
    decoders.push_back({std::string("MLA absorbed, ") + kvQuantName(bits) + " cache", mla.get(), MlaDecode::Absorbed,
                        true, KvCache(L), mlaBudget.bytesPerToken, 0, KvQuantSettings{bits, 64, 128}});
  }
  const std::size_t quantized = decoders.size() - 4;  // the first of the four quantized decoders
  if (device.is_cpu() && !benchBf16()) {              // where the kernels apply: their before
    decoders.push_back(
        {"original, LibTorch ops", original.get(), MlaDecode::Absorbed, false, KvCache(L), origBudget.bytesPerToken});
    decoders.push_back(
        {"MLA absorbed, LibTorch ops", mla.get(), MlaDecode::Absorbed, false, KvCache(L), mlaBudget.bytesPerToken});
  }
  const std::string setup = arch + " r=" + std::to_string(opts.ropePairs) + " d_kv=" + std::to_string(opts.dKv) +
                            " joint, " + device.str() + " " + (benchBf16() ? "bf16" : "fp32");

  const auto tensorOpts = torch::TensorOptions().dtype(dtype).device(device);
  const char* profiled = std::getenv("LATENTLAB_BENCH_DECODE_PROFILE");
  if (profiled != nullptr) std::erase_if(decoders, [&](const Decoder& d) { return d.name != profiled; });
  // 14 rounds of 4 steps stay within the 64 tokens each cache is reserved beyond the context.
  const int steps = 4, rounds = profiled != nullptr ? 14 : 3;
  // Batch 1 over the context sweep; a batch of 8 at the longest context (serving
  // several sequences, where the cache rather than the weights is what is read).
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;  // (batch, context)
  for (std::int64_t ctx :
       quick ? std::vector<std::int64_t>{512, 2048} : std::vector<std::int64_t>{512, 1024, 2048, 4096, 8192})
    runs.emplace_back(1, ctx);
  runs.emplace_back(8, quick ? 2048 : 8192);
  // LATENTLAB_BENCH_DECODE_ONLY=BxT (e.g. 8x8192) keeps one run, for profiling.
  if (const char* only = std::getenv("LATENTLAB_BENCH_DECODE_ONLY")) {
    long long b = 0, t = 0;
    if (std::sscanf(only, "%lldx%lld", &b, &t) == 2) runs = {{b, t}};
  }
  for (const auto& [batch, ctx] : runs) {
    const std::string at = " @ ctx " + std::to_string(ctx) + (batch > 1 ? " batch " + std::to_string(batch) : "");
    for (auto& d : decoders) {
      fillCache(d.cache, *d.model, batch, ctx, tensorOpts, d.quant);
      d.best = 0;
    }
    for (int r = 0; r < rounds; ++r) {
      for (auto& d : decoders) {
        setMlaDecode(*d.model, d.mode);
        setFusedDecodeEnabled(d.fused);
        auto ids =
            torch::randint(0, cfg.vocabSize, {batch, 1}, torch::TensorOptions().dtype(torch::kInt64).device(device));
        const double s = timed(device, [&] {
          for (int i = 0; i < steps; ++i) d.model->forward(ids, &d.cache);
        });
        d.best = std::max(d.best, static_cast<double>(batch * steps) / s);
      }
    }
    setFusedDecodeEnabled(true);
    for (auto& d : decoders) {
      const auto len = d.cache.length();
      const double mib = static_cast<double>(d.cache.bytes()) / (1 << 20);
      const double formula =
          static_cast<double>(d.quant.on() ? kvQuantBudget(d.model->config(), d.quant, cacheType).bytesFor(len) * batch
                                           : d.formulaBytesPerToken * len * batch) /
          (1 << 20);
      report.add({"decode", "decode " + d.name + at, d.best, "tok/s",
                  "cache " + fixed(mib, 2) + " MiB measured, formula " + fixed(formula, 2) + " MiB at " +
                      std::to_string(len) + " tokens; " + setup});
    }
    if (profiled != nullptr) continue;  // the ratios need every decoder
    const Decoder &orig = decoders[0], &absorbed = decoders[1], &naive = decoders[2];
    std::string note = "naive / original " + fixed(naive.best / orig.best, 2) + "x; cache " +
                       fixed(static_cast<double>(absorbed.cache.bytes()) / orig.cache.bytes(), 3) + " of original";
    for (std::size_t k = quantized; k < quantized + 4; ++k) {
      const Decoder& q = decoders[k];
      const Decoder& plain = q.model == orig.model ? orig : absorbed;
      report.add({"decode", q.name + " / " + plain.name + at, q.best / plain.best, "x",
                  "cache " + fixed(static_cast<double>(q.cache.bytes()) / orig.cache.bytes(), 3) + " of original's"});
    }
    if (decoders.size() > quantized + 4) {
      const Decoder &origOps = decoders[quantized + 4], &absorbedOps = decoders[quantized + 5];
      note += "; with LibTorch ops alone " + fixed(absorbedOps.best / origOps.best, 2) +
              "x; the kernels speed the original " + fixed(orig.best / origOps.best, 2) + "x, absorbed " +
              fixed(absorbed.best / absorbedOps.best, 2) + "x; " + fusedDecodeIsa() + " kernels";
    }
    report.add({"decode", "absorbed / original" + at, absorbed.best / orig.best, "x", note});
  }
}

}  // namespace

LATENTLAB_BENCH("decode", benchDecode);

}  // namespace latentlab::bench
