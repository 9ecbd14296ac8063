// Text generation with a model's own cache: the KV cache of an original
// model, the latent cache with absorbed attention of a converted or
// from-scratch latent model. Greedy, or sampling with temperature, top-k and
// top-p (applied in that order, as transformers does), seeded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "latentlab/kv_quant.h"
#include "latentlab/model_config.h"
#include "latentlab/progress.h"

namespace latentlab {

struct GenerateOptions {
  std::filesystem::path model;  // an HF folder with tokenizer.json
  int maxNewTokens = 128;
  double temperature = 1.0;  // 0: greedy (argmax)
  int topK = 0;              // 0: off
  double topP = 1.0;         // 1: off
  std::uint64_t seed = 0;
  std::string device = "cpu";
  DType dtype = DType::F32;
  bool stopAtEos = true;
  // A quantized cache (docs/kv_quant.md): K and V, or a latent model's latent and RoPE key.
  KvQuantSettings kvQuant;
};

struct GenerateResult;
// Called after each generated token with the result so far (ids, timings,
// the cache's bytes now), for live figures.
using TokenSink = std::function<void(const GenerateResult& sofar)>;

struct GenerateResult {
  std::string text;                        // the generated text (the prompt not included)
  std::vector<std::int32_t> promptIds;     // as encoded, with the tokenizer's BOS when it has one
  std::vector<std::int32_t> generatedIds;  // EOS included when it ended the text
  bool stoppedAtEos = false;
  double prefillSeconds = 0, decodeSeconds = 0;
  std::int64_t kvBytes = 0;  // cache bytes held at the end
  double prefillTokensPerSecond() const;
  double decodeTokensPerSecond() const;  // generated tokens after the first, per second
};

// The prompts of a JSONL file, one {"prompt": "..."} a line (errors name the
// file, the line and the field).
std::vector<std::string> readPrompts(const std::filesystem::path& jsonl);
// A whole prompt file: a regular file of at most 256 MiB (errors name it).
std::string readPromptFile(const std::filesystem::path& path);

// Receives the text as it is produced (whole UTF-8 characters only).
using TextSink = std::function<void(std::string_view piece)>;

// Loads the model and its tokenizer once; generates for any number of prompts.
class Generator {
 public:
  explicit Generator(const GenerateOptions& options);  // throws Error naming the file
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  GenerateResult generate(const std::string& prompt, const TextSink& sink, const CancelToken& cancel,
                          const TokenSink& onToken = {});
  // The same from token ids (no text is decoded when `sink` is empty).
  GenerateResult generateIds(const std::vector<std::int32_t>& promptIds, const TextSink& sink,
                             const CancelToken& cancel, const TokenSink& onToken = {});
  const ModelConfig& config() const;
  // Throws what generate() would throw for this prompt before any work (no
  // tokens, ids outside the vocabulary, prompt and new tokens past the context).
  void checkPrompt(const std::string& prompt) const;
  void checkPromptIds(const std::vector<std::int32_t>& promptIds) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace latentlab
