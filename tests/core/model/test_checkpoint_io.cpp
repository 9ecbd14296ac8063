// Save/load round trips, sharding, half-precision files, and bad input that
// must fail with a message naming the file and the problem.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <sys/resource.h>

#include <chrono>

#include <fstream>
#include <nlohmann/json.hpp>

#include "io/hf_checkpoint.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "model/weights.h"
#include "model_test_util.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::shared_ptr<CausalLm> savedTiny(const fs::path& dir, TinyShape s = {}, DType dtype = DType::F32) {
  auto model = randomModel(tinyConfig(s), torch::kFloat32, 11);
  saveModel(*model, dir, dtype);
  return model;
}

// Expects fn to throw latentlab::Error whose message contains every needle.
template <typename Fn>
void expectError(Fn&& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    std::string expected;
    for (const auto& n : needles) expected += " '" + n + "'";
    ADD_FAILURE() << "no error was thrown (expected one saying" << expected << ")";
  } catch (const Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(e.message().find(n), std::string::npos) << "message: " << e.message() << "\nmissing: " << n;
  }
}

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// Rewrites the JSON header of a safetensors file with `edit` (keeping the data).
void editHeader(const fs::path& file, const std::function<void(json&)>& edit) {
  std::string bytes = readAll(file);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  json h = json::parse(bytes.substr(8, n));
  edit(h);
  std::string text = h.dump();
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[static_cast<std::size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  writeAll(file, len + text + bytes.substr(8 + n));
}

void editConfig(const fs::path& dir, const std::function<void(json&)>& edit) {
  json c = json::parse(readAll(dir / "config.json"));
  edit(c);
  writeAll(dir / "config.json", c.dump(2));
}

}  // namespace

TEST(CheckpointIo, SaveThenLoadGivesIdenticalLogits) {
  for (TinyShape s :
       {TinyShape{}, TinyShape{.kvHeads = 4, .tied = true}, TinyShape{.attentionBias = true, .mlpBias = true},
        TinyShape{.kvHeads = 1, .modelType = "qwen2"}}) {
    fs::path dir = scratchDir("roundtrip") / "m";
    auto model = savedTiny(dir, s);
    auto loaded = loadModel(dir, torch::kCPU, torch::kFloat32);
    auto ids = torch::randint(0, s.vocab, {2, 33}, torch::kInt64);
    torch::NoGradGuard g;
    EXPECT_TRUE(torch::equal(model->forward(ids), loaded->forward(ids)));
    EXPECT_EQ(loaded->config().tieWordEmbeddings, s.tied);
    EXPECT_EQ(loaded->config().modelType, s.modelType);
  }
}

TEST(CheckpointIo, ShardedCheckpointLoadsLikeUnsharded) {
  auto model = randomModel(tinyConfig({}), torch::kFloat32, 5);
  fs::path base = scratchDir("sharded");
  saveModel(*model, base / "single", DType::F32);
  saveModel(*model, base / "sharded", DType::F32, {}, /*maxShardBytes=*/20000);
  ASSERT_TRUE(fs::exists(base / "sharded" / "model.safetensors.index.json"));
  HfCheckpoint ck(base / "sharded");
  EXPECT_GT(ck.files().size(), 3u);
  auto a = loadModel(base / "single", torch::kCPU, torch::kFloat32);
  auto b = loadModel(base / "sharded", torch::kCPU, torch::kFloat32);
  auto ids = torch::randint(0, 128, {1, 40}, torch::kInt64);
  torch::NoGradGuard g;
  EXPECT_TRUE(torch::equal(a->forward(ids), b->forward(ids)));
}

TEST(CheckpointIo, HfShardedCheckpointLoads) {
  ASSERT_TRUE(pythonHas("transformers")) << "the test peer 'transformers' is not installed";
  fs::path base = scratchDir("hf-sharded");
  std::string log;
  ASSERT_EQ(runPython("hf_llama.py", {"make", (base / "one").string()}, &log), 0) << log;
  ASSERT_EQ(runPython("hf_llama.py", {"make", (base / "many").string(), "--max-shard-size", "30KB"}, &log), 0) << log;
  ASSERT_TRUE(fs::exists(base / "many" / "model.safetensors.index.json"));
  auto a = loadModel(base / "one", torch::kCPU, torch::kFloat32);
  auto b = loadModel(base / "many", torch::kCPU, torch::kFloat32);
  auto ids = torch::randint(0, 128, {1, 40}, torch::kInt64);
  torch::NoGradGuard g;
  EXPECT_TRUE(torch::equal(a->forward(ids), b->forward(ids)));
}

TEST(CheckpointIo, HalfPrecisionFilesLoadWithinDtypeTolerance) {
  for (DType dt : {DType::BF16, DType::F16}) {
    fs::path dir = scratchDir("half") / "m";
    auto model = savedTiny(dir, {}, dt);
    EXPECT_EQ(inspectModel(dir).weightDType, dt);
    auto loaded = loadModel(dir, torch::kCPU, torch::kFloat32);
    // Every weight equals the original rounded to the file's dtype.
    auto want = model->named_parameters();
    for (const auto& p : loaded->named_parameters()) {
      auto rounded = want[p.key()].to(dt == DType::BF16 ? torch::kBFloat16 : torch::kFloat16).to(torch::kFloat32);
      EXPECT_TRUE(torch::equal(p.value(), rounded)) << p.key();
    }
    auto ids = torch::randint(0, 128, {1, 32}, torch::kInt64);
    torch::NoGradGuard g;
    const double tol = dt == DType::BF16 ? 0.1 : 0.02;
    EXPECT_LT(maxAbsDiff(model->forward(ids), loaded->forward(ids)), tol);
  }
}

TEST(CheckpointIo, InspectReportsKvCacheOfSmolLm135mShape) {
  ModelConfig c = tinyConfig({});
  c.numLayers = 30;
  c.numHeads = 9;
  c.numKvHeads = 3;
  c.hiddenSize = 576;
  c.headDim = 64;
  c.intermediateSize = 64;
  c.vocabSize = 64;
  c.tieWordEmbeddings = true;
  fs::path dir = scratchDir("smol-shape") / "m";
  initModel(c, dir, 0, DType::BF16);
  auto s = inspectModel(dir);
  EXPECT_EQ(s.kv.perToken, 2 * 3 * 64 * 30);
  EXPECT_EQ(s.kv.bytesPerToken, 2 * 3 * 64 * 30 * 2);
  EXPECT_EQ(s.parameters, countParameters(c));
}

TEST(CheckpointIo, BadInputNamesTheFileAndTheProblem) {
  fs::path base = scratchDir("bad");
  // Missing config.json.
  fs::create_directories(base / "empty");
  expectError([&] { HfCheckpoint ck(base / "empty"); }, {"config.json", "not found"});

  auto fresh = [&](const std::string& name) {
    fs::path d = base / name;
    savedTiny(d);
    return d;
  };
  // Unknown model_type.
  fs::path d = fresh("type");
  editConfig(d, [](json& c) { c["model_type"] = "bert"; });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "model_type 'bert'"});
  // Malformed config.json.
  d = fresh("malformed");
  writeAll(d / "config.json", "{\"model_type\": \"llama\", ");
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "invalid JSON"});
  // RoPE scaling: an unknown variant, yarn without its factor, a factor that is no number.
  d = fresh("ropetype");
  editConfig(d, [](json& c) { c["rope_scaling"] = {{"rope_type", "ntk-by-parts"}, {"factor", 2.0}}; });
  expectError([&] { HfCheckpoint ck(d); },
              {"config.json", "rope_scaling", "rope_type 'ntk-by-parts' is not supported"});
  d = fresh("yarnfactor");
  editConfig(d, [](json& c) { c["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}}; });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json rope_parameters", "'factor' is missing"});
  d = fresh("llama3fields");
  editConfig(d, [](json& c) {
    c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}};
  });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json rope_scaling", "'high_freq_factor' is missing"});
  d = fresh("ropefactor");
  editConfig(d, [](json& c) { c["rope_scaling"] = {{"type", "linear"}, {"factor", "four"}}; });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json rope_scaling", "'factor' must be a number"});
  // Sizes that cannot be: no context at all.
  d = fresh("context");
  editConfig(d, [](json& c) { c["max_position_embeddings"] = 0; });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "max_position_embeddings", "must be positive"});
  // Far more layers than the weights hold: refused at once, before any per-layer table is built.
  for (long long layers : {10000000LL, 2147483647LL, 60000LL}) {
    d = fresh("layers" + std::to_string(layers));
    editConfig(d, [&](json& c) { c["num_hidden_layers"] = layers; });
    struct rusage before {};
    ::getrusage(RUSAGE_SELF, &before);
    const auto t0 = std::chrono::steady_clock::now();
    expectError([&] { inspectModel(d); }, {"num_hidden_layers"});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    struct rusage after {};
    ::getrusage(RUSAGE_SELF, &after);
    EXPECT_LT(seconds, 1.0) << layers;
    EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 200 * 1024) << layers << " layers grew the peak (KiB)";
  }
  // The weights file a FIFO (or a device): refused at once, not waited on for ever.
  d = fresh("fifo-weights");
  for (const auto& f : fs::directory_iterator(d)) {
    if (f.path().extension() == ".safetensors") {
      fs::remove(f.path());
      ASSERT_EQ(::mkfifo(f.path().c_str(), 0600), 0);
    }
  }
  {
    const auto t0 = std::chrono::steady_clock::now();
    expectError([&] { inspectModel(d); }, {".safetensors", "is not a regular file"});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  }
  // Heads not divisible by KV heads.
  d = fresh("heads");
  editConfig(d, [](json& c) { c["num_key_value_heads"] = 3; });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "not divisible by num_key_value_heads"});
  // Truncated safetensors.
  d = fresh("truncated");
  std::string bytes = readAll(d / "model.safetensors");
  writeAll(d / "model.safetensors", bytes.substr(0, bytes.size() - 100));
  expectError([&] { HfCheckpoint ck(d); }, {"model.safetensors", "truncated"});
  // Header length beyond the file size.
  d = fresh("headerlen");
  bytes = readAll(d / "model.safetensors");
  bytes[6] = static_cast<char>(0x7f);
  writeAll(d / "model.safetensors", bytes);
  expectError([&] { HfCheckpoint ck(d); }, {"model.safetensors", "header length"});
  // A file too short for a header.
  d = fresh("short");
  writeAll(d / "model.safetensors", "abc");
  expectError([&] { HfCheckpoint ck(d); }, {"model.safetensors", "too short"});
  // Overlapping data_offsets.
  d = fresh("overlap");
  editHeader(d / "model.safetensors", [](json& h) {
    h["model.norm.weight"]["data_offsets"] = h["model.embed_tokens.weight"]["data_offsets"];
    h["model.norm.weight"]["shape"] = h["model.embed_tokens.weight"]["shape"];
  });
  expectError([&] { HfCheckpoint ck(d); }, {"model.safetensors", "overlapping"});
  // Out-of-range data_offsets.
  d = fresh("range");
  editHeader(d / "model.safetensors", [](json& h) {
    h["model.norm.weight"]["data_offsets"] = json::array({100000000, 100000256});
  });
  expectError([&] { HfCheckpoint ck(d); }, {"model.safetensors", "model.norm.weight", "past the data section"});
  // dtype/shape mismatch with the byte size.
  d = fresh("bytes");
  editHeader(d / "model.safetensors", [](json& h) { h["model.norm.weight"]["dtype"] = "F16"; });
  expectError([&] { HfCheckpoint ck(d); }, {"model.norm.weight", "bytes"});
  // Shapes whose byte count overflows 64 bits never match a data range: the
  // product is checked, not wrapped ([2^62, 2^62, 4] once read as "need 0",
  // and 2^62+128 F32 elements as 512 bytes).
  d = fresh("overflow");
  editHeader(d / "model.safetensors", [](json& h) {
    h["model.norm.weight"]["shape"] = json::array({std::uint64_t{1} << 62, std::uint64_t{1} << 62, 4});
  });
  expectError([&] { HfCheckpoint ck(d); }, {"model.safetensors", "model.norm.weight", "overflows 64 bits"});
  d = fresh("wrap");
  editHeader(d / "model.safetensors", [](json& h) {
    h["unused.wraps"] = {{"dtype", "F32"},
                         {"shape", json::array({(std::uint64_t{1} << 62) + 128})},
                         {"data_offsets", json::array({0, 512})}};
  });
  expectError([&] { HfCheckpoint ck(d); }, {"model.safetensors", "overflows 64 bits"});
  // Shape that config.json does not imply.
  d = fresh("shape");
  editConfig(d, [](json& c) { c["intermediate_size"] = 100; });
  expectError([&] { loadModel(d, torch::kCPU, torch::kFloat32); }, {"mlp", "shape", "config.json implies"});
  // Missing tensor.
  d = fresh("missing");
  editHeader(d / "model.safetensors", [](json& h) { h.erase("model.layers.1.mlp.up_proj.weight"); });
  expectError([&] { loadModel(d, torch::kCPU, torch::kFloat32); }, {"model.layers.1.mlp.up_proj.weight", "missing"});
  // A sharded index naming a missing shard.
  d = fresh("index");
  writeAll(d / "model.safetensors.index.json", R"({"weight_map": {"model.norm.weight": "nope.safetensors"}})");
  expectError([&] { HfCheckpoint ck(d); }, {"index.json", "nope.safetensors", "missing"});
  // No weights at all.
  d = fresh("noweights");
  fs::remove(d / "model.safetensors");
  expectError([&] { HfCheckpoint ck(d); }, {"no safetensors weights"});
}

// The families' own fields: what a family does not have is refused naming the
// file and the field, and each family's variants are read.
TEST(CheckpointIo, FamilyFieldsAreCheckedNamingTheFileAndField) {
  fs::path base = scratchDir("family-bad");
  auto fresh = [&](const std::string& name, const std::string& type) {
    fs::path d = base / name;
    savedTiny(d);
    editConfig(d, [&](json& c) { c["model_type"] = type; });
    return d;
  };
  // longrope and partial rotary belong to Phi-3.
  fs::path d = fresh("llama-longrope", "llama");
  editConfig(d, [](json& c) {
    c["rope_scaling"] = {{"rope_type", "longrope"},
                         {"short_factor", json::array({1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0})},
                         {"long_factor", json::array({2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0})}};
  });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "rope_scaling", "longrope is Phi-3's"});
  d = fresh("llama-partial", "llama");
  editConfig(d, [](json& c) { c["partial_rotary_factor"] = 0.5; });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "partial_rotary_factor", "only Phi-3"});
  // A longrope list that does not cover the rotating pairs (d_h 16, factor 0.5: 4 pairs).
  d = fresh("phi3-factors", "phi3");
  editConfig(d, [](json& c) {
    c["partial_rotary_factor"] = 0.5;
    c["rope_scaling"] = {{"type", "longrope"},
                         {"short_factor", json::array({1.0, 1.0, 1.0})},
                         {"long_factor", json::array({2.0, 2.0, 2.0, 2.0})}};
  });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "rope_scaling", "4 entries", "got 3 and 4"});
  d = fresh("phi3-odd", "phi3");
  editConfig(d, [](json& c) { c["partial_rotary_factor"] = 0.1; });  // int(16 * 0.1) = 1 dim
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "partial_rotary_factor", "positive even number"});
  // SmolLM3's no_rope_layers: one 0/1 per layer.
  d = fresh("smollm3-list", "smollm3");
  editConfig(d, [](json& c) { c["no_rope_layers"] = json::array({1, 0, 1}); });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "no_rope_layers", "one 0 or 1 per layer"});
  d = fresh("smollm3-value", "smollm3");
  editConfig(d, [](json& c) { c["no_rope_layers"] = json::array({1, 2}); });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "no_rope_layers", "entry 1"});
  // Sliding windows of the Qwen family.
  d = fresh("qwen3-window", "qwen3");
  editConfig(d, [](json& c) { c["use_sliding_window"] = true; });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "use_sliding_window", "not supported"});
  d = fresh("qwen3-layers", "qwen3");
  editConfig(d, [](json& c) { c["layer_types"] = json::array({"full_attention", "sliding_attention"}); });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "layer_types", "sliding_attention"});
  // A Qwen3 folder without its QK-norm weights.
  d = fresh("qwen3-norms", "qwen3");
  expectError([&] { loadModel(d, torch::kCPU, torch::kFloat32); }, {"q_norm.weight", "missing"});
  // Gemma-3: the multimodal type, bidirectional attention, the wrong activation, a layer list of the wrong length.
  d = fresh("gemma3-vision", "gemma3");
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "model_type 'gemma3'"});
  auto gemma = [&](const std::string& name, const std::function<void(json&)>& edit) {
    fs::path g = fresh(name, "gemma3_text");
    editConfig(g, [&](json& c) {
      c["hidden_activation"] = "gelu_pytorch_tanh";
      edit(c);
    });
    return g;
  };
  d = gemma("gemma3-bidi", [](json& c) { c["use_bidirectional_attention"] = true; });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "use_bidirectional_attention"});
  d = gemma("gemma3-act", [](json& c) { c["hidden_activation"] = "silu"; });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "hidden_activation", "gelu_pytorch_tanh"});
  d = gemma("gemma3-types", [](json& c) { c["layer_types"] = json::array({"sliding_attention"}); });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "layer_types", "one type per layer"});
  d = gemma("gemma3-local", [](json& c) {
    c["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}},
                            {"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}};
  });
  expectError([&] { HfCheckpoint ck(d); }, {"rope_parameters.sliding_attention", "rope_type", "plain"});
  // Qwen3-MoE: a config of experts over weights without them, more experts per token than there are.
  auto moe = [&](const std::string& name, int perToken) {
    // A Qwen3 folder (QK norms and all) whose config then asks for experts.
    ModelConfig q = tinyConfig({});
    q.modelType = "qwen3";
    q.qkNorm = true;
    fs::path m = base / name;
    saveModel(*randomModel(q, torch::kFloat32, 1), m, DType::F32);
    editConfig(m, [&](json& c) {
      c["model_type"] = "qwen3_moe";
      c["num_experts"] = 4;
      c["num_experts_per_tok"] = perToken;
      c["moe_intermediate_size"] = 16;
    });
    return m;
  };
  d = moe("moe-weights", 2);
  expectError([&] { loadModel(d, torch::kCPU, torch::kFloat32); }, {"model.layers.0.mlp.gate.weight", "missing"});
  d = moe("moe-topk", 5);
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "num_experts_per_tok", "[1, 4]"});
  // Defaults where a field is left out, as transformers' config classes have them:
  // SmolLM3 tied with theta 2e6, Gemma-3 without windows when sliding_window is
  // null, Phi-3's "yarn" read as longrope with a 4096 original context.
  d = fresh("smollm3-defaults", "smollm3");
  editConfig(d, [](json& c) {
    c.erase("tie_word_embeddings");
    c.erase("rope_theta");
  });
  EXPECT_TRUE(readHfConfig(d / "config.json").tieWordEmbeddings);
  EXPECT_EQ(readHfConfig(d / "config.json").ropeTheta, 2000000.0);
  d = gemma("gemma3-nowindow", [](json& c) { c["sliding_window"] = nullptr; });
  EXPECT_FALSE(readHfConfig(d / "config.json").slidingWindow.has_value());
  EXPECT_EQ(readHfConfig(d / "config.json").windowOf(0), 0);
  d = fresh("phi3-yarn", "phi3");
  editConfig(d, [](json& c) {
    c["rope_scaling"] = {{"type", "yarn"},
                         {"short_factor", json::array({1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0})},
                         {"long_factor", json::array({2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0})},
                         {"original_max_position_embeddings", 64}};
  });
  EXPECT_EQ(readHfConfig(d / "config.json").ropeScaling.type, "longrope");
  EXPECT_EQ(readHfConfig(d / "config.json").ropeScaling.originalMaxPositionEmbeddings, 4096);
  d = fresh("phi3-mlp-bias", "phi3");
  editConfig(d, [](json& c) { c["mlp_bias"] = true; });
  expectError([&] { HfCheckpoint ck(d); }, {"config.json", "'mlp_bias'", "Phi-3"});
  // Read: SmolLM3's default layers without RoPE (every 4th) and Phi-3's fused tensors.
  d = fresh("smollm3-default", "smollm3");
  editConfig(d, [](json& c) {
    c["num_hidden_layers"] = 2;
    c["no_rope_layer_interval"] = 2;
  });
  EXPECT_EQ(readHfConfig(d / "config.json").nopeLayers, std::vector<int>{1});
  d = fresh("phi3-unfused", "phi3");
  expectError([&] { loadModel(d, torch::kCPU, torch::kFloat32); }, {"qkv_proj.weight", "missing"});
}

// Mistral's sliding window: within it the model is the full-attention one,
// past it each query sees the last `sliding_window` keys, and decoding through
// the cache (one token at a time and in chunks) equals the whole-sequence
// forward. (test_hf_parity compares both with transformers.)
TEST(CheckpointIo, MistralSlidingWindowAppliesPastTheWindowAndInTheCache) {
  fs::path d = scratchDir("window") / "m";
  savedTiny(d);
  editConfig(d, [](json& c) {
    c["model_type"] = "mistral";
    c["architectures"] = json::array({"MistralForCausalLM"});
    c["sliding_window"] = 6;  // the decode test's chunk of 4 at position 7 starts past it
    c["max_position_embeddings"] = 4096;
  });
  auto model = loadModel(d, torch::kCPU, torch::kFloat32);
  ASSERT_TRUE(model->config().slidingWindow.has_value());
  editConfig(d, [](json& c) { c["sliding_window"] = nullptr; });
  auto full = loadModel(d, torch::kCPU, torch::kFloat32);
  torch::NoGradGuard g;
  auto ids = torch::randint(0, model->config().vocabSize, {2, 40}, torch::kInt64);
  const auto windowed = model->forward(ids);
  const auto plain = full->forward(ids);
  EXPECT_LT(maxAbsDiff(windowed.narrow(1, 0, 6), plain.narrow(1, 0, 6)), 1e-5);    // within the window
  EXPECT_GT(maxAbsDiff(windowed.narrow(1, 6, 34), plain.narrow(1, 6, 34)), 1e-3);  // past it
  KvCache cache(model->numLayers());
  EXPECT_LT(maxAbsDiff(decodeIncrementally(*model, ids, cache), windowed), 1e-4);
}

TEST(CheckpointIo, SavingIntoAnExistingFolderIsRefusedAndLeavesItIntact) {
  fs::path dir = scratchDir("exists") / "m";
  savedTiny(dir);
  const auto before = readAll(dir / "model.safetensors");
  auto model = randomModel(tinyConfig({}), torch::kFloat32, 99);
  expectError([&] { saveModel(*model, dir, DType::F32); }, {"already exists"});
  EXPECT_EQ(readAll(dir / "model.safetensors"), before);
}

}  // namespace latentlab::test
