// The quantized cache's number format (docs/kv_quant.md): codes, scales and
// zero-points equal a numpy reference of the same scheme bit for bit and the
// values within 1e-6, for 8, 4 and 2 bits and several group sizes (a row
// shorter than the group is one group); a row takes the documented bytes;
// bf16 rows come back within half a step; bad settings name their flag.
#include <gtest/gtest.h>

#include <fstream>

#include "latentlab/architectures.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "model/attention.h"
#include "model/kv_cache.h"
#include "model/kv_quant.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {
torch::Tensor readFile(const fs::path& path, torch::ScalarType type, std::vector<std::int64_t> shape) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto t = torch::empty(shape, type);
  EXPECT_EQ(static_cast<std::int64_t>(bytes.size()), t.nbytes()) << path;
  std::memcpy(t.data_ptr(), bytes.data(), std::min<std::size_t>(bytes.size(), t.nbytes()));
  return t;
}
}  // namespace

TEST(KvQuant, MatchesTheNumpyReferenceBitForBit) {
  const fs::path dir = scratchDir("kv-quant");
  torch::manual_seed(3);
  const std::int64_t rows = 37;
  for (const std::int64_t width : {64, 48, 256}) {
    auto x = torch::randn({rows, width}) * 2.5 + 0.3;
    x[5].fill_(0.7f);  // a constant row: scale 0, every value back exactly
    x[6][0] = 40.0f;   // an outlier
    const fs::path in = dir / ("x" + std::to_string(width) + ".f32");
    std::ofstream(in, std::ios::binary).write(static_cast<const char*>(x.data_ptr()), x.nbytes());
    for (const int bits : {8, 4, 2}) {
      for (const int group : {16, 32, 64, 128}) {
        const std::int64_t g = groupOf(group, width);
        if (width % g != 0) continue;
        const std::string tag = std::to_string(width) + "-" + std::to_string(bits) + "-" + std::to_string(group);
        const fs::path out = dir / tag;
        std::string log;
        ASSERT_EQ(runPython("kv_quant_ref.py",
                            {in.string(), std::to_string(rows), std::to_string(width), std::to_string(bits),
                             std::to_string(group), out.string()},
                            &log),
                  0)
            << log;
        const QuantizedRows q = quantizeRows(x.view({rows, 1, width}), bits, group);
        const std::int64_t groups = width / g;
        EXPECT_EQ(q.codes.sizes(), (std::vector<std::int64_t>{rows, 1, width * bits / 8})) << tag;
        EXPECT_TRUE(torch::equal(q.codes.view({rows, -1}),
                                 readFile(out.string() + ".codes", torch::kUInt8, {rows, width * bits / 8})))
            << tag;
        EXPECT_TRUE(
            torch::equal(q.scale.view({rows, -1}), readFile(out.string() + ".scale", torch::kFloat32, {rows, groups})))
            << tag;
        EXPECT_TRUE(
            torch::equal(q.zero.view({rows, -1}), readFile(out.string() + ".zero", torch::kFloat32, {rows, groups})))
            << tag;
        const auto back = dequantizeRows(q, bits, group, width).view({rows, width});
        EXPECT_LT((back - readFile(out.string() + ".deq", torch::kFloat32, {rows, width})).abs().max().item<double>(),
                  1e-6)
            << tag;
        EXPECT_TRUE(torch::equal(back[5], x[5])) << "a constant row comes back exactly";
        // Round to nearest: within half a step of its group.
        const auto step = q.scale.view({rows, groups, 1}).expand({rows, groups, g}).reshape({rows, width});
        EXPECT_TRUE(((back - x).abs() <= step * 0.5 + 1e-5).all().item<bool>()) << tag;
        EXPECT_EQ(quantizedRowBytes(width, bits, group, 4),
                  q.codes[0].nbytes() + q.scale[0].nbytes() + q.zero[0].nbytes())
            << tag;
      }
    }
  }
}

TEST(KvQuant, Bf16RowsKeepTheirScalesInBf16AndComeBackWithinHalfAStep) {
  torch::manual_seed(4);
  const auto x = torch::randn({16, 4, 64}).to(torch::kBFloat16);
  for (const int bits : {8, 4, 2}) {
    const QuantizedRows q = quantizeRows(x, bits, 32);
    EXPECT_EQ(q.scale.scalar_type(), torch::kBFloat16);
    EXPECT_EQ(q.scale.sizes(), (std::vector<std::int64_t>{16, 4, 2}));
    const auto back = dequantizeRows(q, bits, 32, 64);
    EXPECT_EQ(back.scalar_type(), torch::kBFloat16);
    const auto step = q.scale.to(torch::kFloat32).unsqueeze(-1).expand({16, 4, 2, 32}).reshape({16, 4, 64});
    // Half a step, plus the bf16 rounding of the result (2^-8 relative).
    const auto err = (back.to(torch::kFloat32) - x.to(torch::kFloat32)).abs();
    EXPECT_TRUE((err <= step * 0.5 + x.to(torch::kFloat32).abs() * (1.0 / 128) + 1e-6).all().item<bool>())
        << bits << " bits";
  }
  // Fewer bits, more error.
  const auto err = [&](int bits) {
    return (dequantizeRows(quantizeRows(x, bits, 32), bits, 32, 64).to(torch::kFloat32) - x.to(torch::kFloat32))
        .abs()
        .mean()
        .item<double>();
  };
  EXPECT_LT(err(8), err(4));
  EXPECT_LT(err(4), err(2));
}

namespace {
// SmolLM-135M (3 KV heads of 64 dims, 30 layers) converted by MHA2MLA at r and d_kv.
ModelConfig smolConverted(int r, int dKv, SvdMethod svd = SvdMethod::Joint) {
  ModelConfig cfg = builtinArchitecture("smollm-135m");
  MlaConversion m;
  m.ropeStrategy = RopeStrategy::High;
  m.ropePairs = r;
  m.dKv = dKv;
  m.svdMethod = svd;
  std::vector<int> pairs;
  for (int k = 0; k < r; ++k) pairs.push_back(k);
  m.pairs.assign(static_cast<std::size_t>(cfg.numLayers), std::vector<std::vector<int>>(3, pairs));
  cfg.mla = m;
  return cfg;
}
}  // namespace

TEST(KvQuant, BadSettingsNameTheirFlag) {
  const ModelConfig smol = builtinArchitecture("smollm-135m");
  const auto why = [](KvQuantSettings s, const ModelConfig& cfg, std::int64_t context = 2048) {
    return checkKvQuant(s, cfg, context).value_or("");
  };
  EXPECT_EQ(why({4, 64, 128}, smol), "");
  EXPECT_EQ(why({4, 64, 128}, smolConverted(4, 16)), "") << "rows shorter than the group (8, 48) are one group each";
  const std::string latent96 = why({4, 64, 128}, smolConverted(4, 32));
  EXPECT_NE(latent96.find("--kv-group 64"), std::string::npos) << latent96;
  EXPECT_NE(latent96.find("latent rows of 96 channels"), std::string::npos) << latent96;
  EXPECT_EQ(why({4, 32, 128}, smolConverted(4, 32)), "");
  EXPECT_NE(why({2, 2, 128}, smol).find("whole bytes"), std::string::npos);
  EXPECT_NE(why({3, 64, 128}, smol).find("--kv-quant"), std::string::npos);
  EXPECT_NE(why({8, 0, 128}, smol).find("--kv-group"), std::string::npos);
  EXPECT_NE(why({8, 64, 4096}, smol).find("--kv-residual 4096"), std::string::npos);
  EXPECT_NE(why({8, 64, -1}, smol).find("--kv-residual"), std::string::npos);
  EXPECT_EQ(parseKvQuantBits("int4", "--kv-quant"), 4);
  EXPECT_EQ(parseKvQuantBits("none", "--kv-quant"), 0);
  try {
    parseKvQuantBits("int3", "--kv-quant");
    ADD_FAILURE() << "int3 accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("--kv-quant 'int3'"), std::string::npos) << e.message();
  }
}

TEST(KvQuant, BytesFollowEveryCachedRow) {
  // The rows of each layer add up to the cache the model keeps.
  ModelConfig qk = smolConverted(4, 16);
  qk.qkNorm = true;
  for (const ModelConfig& cfg :
       {builtinArchitecture("smollm-135m"), smolConverted(4, 16), smolConverted(4, 8, SvdMethod::Split), qk,
        attentionVariant(builtinArchitecture("demo-gqa"), "mla", AttentionOptions{}, "test")}) {
    const KvBudget kv = currentKvBudget(cfg, DType::BF16);
    for (int l = 0; l < cfg.numLayers; ++l) {
      std::int64_t elements = 0;
      for (const CacheRow& row : layerCacheRows(cfg, l)) elements += row.count * row.width;
      EXPECT_EQ(elements, kv.layerElements[static_cast<std::size_t>(l)]) << cfg.architecture << " layer " << l;
    }
    EXPECT_EQ(kvQuantBudget(cfg, {}, DType::BF16).fullBytesPerToken, kv.bytesPerToken);
    EXPECT_EQ(kvQuantBudget(cfg, {}, DType::BF16).bytesFor(100), 100 * kv.bytesPerToken);
  }
  // The settings' cache shape without converting: the bytes of the converted config.
  KvSettings settings;
  settings.method = KvMethod::Mha2Mla;
  settings.ropePairs = 4;
  settings.dKv = 16;
  for (const int bits : {0, 8, 4, 2}) {
    const KvQuantSettings q{bits, 16, 32};
    const KvQuantBudget fromSettings =
        kvQuantBudget(convertedCacheConfig(builtinArchitecture("smollm-135m"), settings), q, DType::BF16);
    const KvQuantBudget converted = kvQuantBudget(smolConverted(4, 16), q, DType::BF16);
    EXPECT_EQ(fromSettings.quantizedBytesPerToken, converted.quantizedBytesPerToken) << bits;
    EXPECT_EQ(fromSettings.fullBytesPerToken, converted.fullBytesPerToken) << bits;
  }
  EXPECT_EQ(kvQuantBudget(convertedCacheConfig(builtinArchitecture("smollm-135m"), settings), {}, DType::BF16)
                .fullBytesPerToken,
            computeKvBudget(builtinArchitecture("smollm-135m"), settings, DType::BF16).bytesPerToken);
  // SmolLM-135M in bf16, int4 in groups of 64: each K or V row of 64 dims is
  // 32 bytes of codes and 2 + 2 of scale and zero-point; 30 layers x 6 rows.
  const KvQuantBudget smol = kvQuantBudget(builtinArchitecture("smollm-135m"), {4, 64, 128}, DType::BF16);
  EXPECT_EQ(smol.fullBytesPerToken, 30 * 6 * 64 * 2);
  EXPECT_EQ(smol.codeBytesPerToken, 30 * 6 * 32);
  EXPECT_EQ(smol.scaleBytesPerToken, 30 * 6 * 4);
  EXPECT_EQ(smol.quantizedBytesPerToken, 30 * 6 * 36);
  EXPECT_EQ(smol.bytesFor(8192), 128 * smol.fullBytesPerToken + 8064 * smol.quantizedBytesPerToken);
  EXPECT_EQ(smol.bytesFor(100), 100 * smol.fullBytesPerToken) << "inside the residual window";
  // Converted at r = 4, d_kv 16 with key norms: the key scales stay in bf16.
  const KvQuantBudget conv = kvQuantBudget(qk, {8, 64, 0}, DType::BF16);
  EXPECT_EQ(conv.quantizedBytesPerToken, 30 * (3 * (8 + 2 * 2) + (48 + 2 * 2) + 3 * 2));
  EXPECT_EQ(conv.bytesFor(10), 10 * conv.quantizedBytesPerToken);
  EXPECT_EQ(quantizedRowBytes(48, 2, 64, 4), 12 + 8);
}

TEST(KvQuant, CacheSlotKeepsTheWindowExactAndTheOlderTokensAsCodes) {
  torch::manual_seed(5);
  for (const int residual : {32, 0, 500}) {
    const KvQuantSettings q{4, 16, residual};
    LayerCache cache;
    cache.setQuant(q);
    std::vector<torch::Tensor> chunks = {torch::randn({2, 3, 50, 32})};
    for (int i = 0; i < 20; ++i) chunks.push_back(torch::randn({2, 3, 1, 32}));
    chunks.push_back(torch::randn({2, 3, 7, 32}));
    for (const auto& c : chunks) cache.appendQuantized(1, c);
    const auto all = torch::cat(chunks, 2);  // (2, 3, 77, 32)
    const QuantizedSlot& slot = cache.quantizedSlot(1);
    const std::int64_t full = std::min<std::int64_t>(77, residual), coded = 77 - full;
    EXPECT_EQ(slot.length(), 77);
    EXPECT_EQ(slot.quantizedLength(), coded) << "residual " << residual;
    EXPECT_TRUE(torch::equal(slot.fullView(), all.narrow(2, coded, full))) << "the window is exact";
    if (coded > 0) {
      // Per token and group, so the same codes whenever a token was quantized.
      const auto expect = dequantizeRows(quantizeRows(all.narrow(2, 0, coded), 4, 16), 4, 16, 32);
      EXPECT_TRUE(torch::equal(slot.dequantized(0, coded), expect));
      EXPECT_TRUE(torch::equal(slot.dequantized(3, 5), expect.narrow(2, 3, 5)));
    }
    // Bytes: the window at fp32, each older token's row as 16 bytes of codes and 2 groups x 2 x 4 bytes.
    const std::int64_t rows = 2 * 3;
    EXPECT_EQ(cache.bytes(), rows * (full * 32 * 4 + coded * quantizedRowBytes(32, 4, 16, 4)));
    EXPECT_EQ(quantizedRowBytes(32, 4, 16, 4), 16 + 16);
    cache.repeatRows(3);
    EXPECT_EQ(cache.bytes(), 3 * rows * (full * 32 * 4 + coded * quantizedRowBytes(32, 4, 16, 4)));
    const QuantizedSlot& repeated = cache.quantizedSlot(1);
    EXPECT_TRUE(torch::equal(repeated.fullView().narrow(0, 3, 3),
                             all.narrow(2, coded, full)[1].unsqueeze(0).expand({3, 3, full, 32})));
    if (coded > 0) {
      EXPECT_TRUE(torch::equal(repeated.dequantized(0, coded).narrow(0, 0, 3),
                               slot.dequantized(0, coded).narrow(0, 0, 1).expand({3, 3, coded, 32})));
    }
  }
}

TEST(KvQuant, AttentionOverCodesEqualsAttentionOverTheDequantizedCache) {
  torch::manual_seed(6);
  // GQA (8 query heads on 2 KV heads of 32 dims): a prompt of 300 tokens,
  // then one token, then a chunk of 5; the window of 40 and blocks of 64
  // (read block by block), or of 8,192 (the codes one block, read with the
  // window in one pass).
  for (const auto& [window, block] : {std::pair{0, 64}, std::pair{100, 64}, std::pair{0, 8192}, std::pair{100, 8192}}) {
    LayerCache cache;
    cache.setQuant({4, 16, 40, block});
    std::vector<torch::Tensor> ks, vs;
    for (const std::int64_t t : {300, 1, 5}) {
      ks.push_back(torch::randn({2, 2, t, 32}));
      vs.push_back(torch::randn({2, 2, t, 32}));
      const QuantizedSlot& k = cache.appendQuantized(0, ks.back());
      const QuantizedSlot& v = cache.appendQuantized(1, vs.back());
      if (t == 300) continue;  // a first chunk attends to itself in full precision
      const auto q = torch::randn({2, 8, t, 32});
      const auto out = quantizedCausalAttention(q, k, v, 0.17, window);
      // The reference: the cache as it reads back, dequantized whole, through causalAttention.
      const auto kAll = torch::cat({k.dequantized(0, k.quantizedLength()), k.fullView()}, 2);
      const auto vAll = torch::cat({v.dequantized(0, v.quantizedLength()), v.fullView()}, 2);
      const auto ref = causalAttention(q, kAll, vAll, 0.17, window);
      EXPECT_LT((out - ref).abs().max().item<double>(), 1e-5)
          << "chunk of " << t << ", window " << window << ", blocks of " << block;
      EXPECT_EQ(k.quantizedLength(), k.length() - 40);
    }
  }
}

}  // namespace latentlab::test
