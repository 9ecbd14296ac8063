// Helpers for model tests: tiny configs, random weights, raw file I/O.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "io/tokenizer.h"
#include "latentlab/architectures.h"
#include "latentlab/engine.h"
#include "latentlab/model_config.h"
#include "model/kernels/cpu_kernels.h"
#include "model/llama.h"
#include "test_support.h"

namespace latentlab::test {

struct TinyShape {
  int hidden = 64;
  int heads = 4;
  int kvHeads = 2;
  int layers = 2;
  int inter = 96;
  int vocab = 128;
  bool tied = false;
  bool attentionBias = false;
  bool mlpBias = false;
  std::string modelType = "llama";
};

inline ModelConfig tinyConfig(const TinyShape& s) {
  ModelConfig c;
  c.modelType = s.modelType;
  c.architecture = s.modelType == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
  c.hiddenSize = s.hidden;
  c.numHeads = s.heads;
  c.numKvHeads = s.kvHeads;
  c.headDim = s.hidden / s.heads;
  c.numLayers = s.layers;
  c.intermediateSize = s.inter;
  c.vocabSize = s.vocab;
  c.tieWordEmbeddings = s.tied;
  c.attentionBias = s.attentionBias || s.modelType == "qwen2";
  c.oProjBias = s.modelType == "qwen2" ? false : s.attentionBias;
  c.mlpBias = s.mlpBias;
  c.rmsNormEps = 1e-5;
  c.maxPositionEmbeddings = 4096;
  return c;
}

// A model with weights large enough that every layer shapes the logits.
inline std::shared_ptr<CausalLm> randomModel(const ModelConfig& cfg, torch::ScalarType dtype, std::uint64_t seed) {
  torch::manual_seed(seed);
  auto m = std::make_shared<CausalLm>(cfg);
  m->to(dtype);
  torch::NoGradGuard g;
  for (auto& p : m->named_parameters()) {
    if (p.key().find("norm") != std::string::npos)
      p.value().uniform_(0.5, 1.5);
    else
      p.value().normal_(0.0, 0.1);
  }
  m->eval();
  return m;
}

// The CPU kernel builds this machine runs (the baseline always).
inline std::vector<kernels::CpuKernels> runnableBuilds() {
  std::vector<kernels::CpuKernels> out;
  for (const auto& v : kernels::cpuKernelBuilds())
    if (v.supported) out.push_back(v);
  EXPECT_FALSE(out.empty());
  return out;
}

inline double maxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

inline void writeRaw(const std::filesystem::path& p, const torch::Tensor& t) {
  auto c = t.contiguous();
  std::ofstream out(p, std::ios::binary);
  out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * c.element_size()));
}

inline torch::Tensor readRawFloat(const std::filesystem::path& p, std::vector<std::int64_t> shape) {
  auto t = torch::empty(shape, torch::kFloat32);
  std::ifstream in(p, std::ios::binary);
  in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * 4));
  return in.gcount() == t.numel() * 4 ? t : torch::Tensor();
}

// Decodes ids (B, T) through the cache the way generation does: a prefill of
// 7 tokens, a chunk of 4, then one token at a time; returns the logits of all T.
inline torch::Tensor decodeIncrementally(CausalLm& model, const torch::Tensor& ids, KvCache& cache) {
  std::vector<torch::Tensor> parts;
  parts.push_back(model.forward(ids.narrow(1, 0, 7), &cache));
  parts.push_back(model.forward(ids.narrow(1, 7, 4), &cache));
  for (std::int64_t t = 11; t < ids.size(1); ++t) parts.push_back(model.forward(ids.narrow(1, t, 1), &cache));
  return torch::cat(parts, 1);
}

// `ids` fed through `cache` in chunks of the given lengths, then one token at
// a time; the logits of every position fed after the first chunk.
inline torch::Tensor decodeAfterPrompt(CausalLm& model, const torch::Tensor& ids, KvCache& cache,
                                       const std::vector<std::int64_t>& chunks) {
  std::vector<torch::Tensor> parts;
  std::int64_t at = 0;
  for (const std::int64_t len : chunks) {
    auto logits = model.forward(ids.narrow(1, at, len), &cache);
    if (at > 0) parts.push_back(logits);
    at += len;
  }
  for (; at < ids.size(1); ++at) parts.push_back(model.forward(ids.narrow(1, at, 1), &cache));
  return torch::cat(parts, 1);
}

// A byte-level BPE tokenizer of `vocab` entries trained on the Python tutorial
// that Debian ships, written to `out` (its folder is created).
inline void trainTutorialTokenizer(const std::filesystem::path& out, int vocab) {
  BpeTrainOptions opts;
  opts.vocabSize = vocab;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/doc/python3.11/html/_sources/tutorial")) {
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::filesystem::create_directories(out.parent_path());
  NullProgress quiet;
  CancelToken cancel;
  trainBpeTokenizer(files, opts, out, quiet, cancel);
}

// An HF folder `dir` holding a randomly initialised demo-gqa of vocabulary 400
// (init std 0.2, `maxPositions` positions) and a BPE tokenizer trained on the
// Python tutorial that Debian ships: a small model with a real tokenizer.
inline void writeSmallTextModel(const std::filesystem::path& dir, int maxPositions = 2048) {
  trainTutorialTokenizer(dir.parent_path() / "tokenizer.json", 400);
  ModelConfig cfg = builtinArchitecture("demo-gqa", 400);
  cfg.maxPositionEmbeddings = maxPositions;
  initModel(cfg, dir, 1, DType::F32, 0.2);
  std::filesystem::copy_file(dir.parent_path() / "tokenizer.json", dir / "tokenizer.json");
}

// transformers' greedy generation (its own KV cache) of `newTokens` after
// `prompt` for the folder `dir`, via hf_llama.py generate; `extra` adds its
// options. The generated ids only; empty when the script failed (see `log`).
inline std::vector<std::int32_t> hfGreedy(const std::filesystem::path& dir, const std::vector<std::int32_t>& prompt,
                                          int newTokens, std::string* log, std::vector<std::string> extra = {}) {
  const std::filesystem::path idsFile = dir.parent_path() / "prompt.ids";
  const std::filesystem::path outFile = dir.parent_path() / "generated.ids";
  writeRaw(idsFile, torch::tensor(std::vector<std::int64_t>(prompt.begin(), prompt.end()), torch::kInt64));
  std::vector<std::string> args = {"generate",       dir.string(),
                                   idsFile.string(), outFile.string(),
                                   "--shape",        "1," + std::to_string(prompt.size()),
                                   "--new",          std::to_string(newTokens)};
  args.insert(args.end(), extra.begin(), extra.end());
  if (runPython("hf_llama.py", args, log) != 0) return {};
  std::ifstream in(outFile, std::ios::binary);
  std::vector<std::int32_t> out;
  std::int64_t v = 0;
  while (in.read(reinterpret_cast<char*>(&v), sizeof v)) out.push_back(static_cast<std::int32_t>(v));
  if (out.size() < prompt.size()) return {};
  return std::vector<std::int32_t>(out.begin() + static_cast<std::ptrdiff_t>(prompt.size()), out.end());
}

}  // namespace latentlab::test
