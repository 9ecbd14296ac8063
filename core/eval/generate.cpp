// Generation: prefill the prompt into the model's cache, then one token at a
// time — argmax, or temperature / top-k / top-p sampling from a seeded
// generator — streaming the decoded text and stopping at EOS.
#include "latentlab/generate.h"

#include "common/file_util.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>

#include "common/json_util.h"
#include "io/tokenizer.h"
#include "latentlab/error.h"
#include "model/kv_cache.h"
#include "model/kv_quant.h"
#include "model/llama.h"
#include "model/torch_util.h"
#include "model/weights.h"

namespace latentlab {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::vector<std::string> readPrompts(const fs::path& jsonl) {
  std::vector<std::string> prompts;
  const std::string hint = "One {\"prompt\": \"...\"} a line.";
  forEachJsonLine(jsonl, ErrorCode::BadInput, hint, [&](const nlohmann::json& j, const std::string& where) {
    if (!j.is_object() || !j.contains("prompt") || !j.at("prompt").is_string())
      throw Error(ErrorCode::BadInput, where + ": needs a string field \"prompt\"", hint);
    if (j.at("prompt").get<std::string>().empty())
      throw Error(ErrorCode::BadInput, where + ": the prompt is empty", hint);
    prompts.push_back(j.at("prompt").get<std::string>());
  });
  return prompts;
}

std::string readPromptFile(const fs::path& path) {
  return readFileBounded(path, 256ULL << 20);
}

double GenerateResult::prefillTokensPerSecond() const {
  return prefillSeconds > 0 ? static_cast<double>(promptIds.size()) / prefillSeconds : 0.0;
}

double GenerateResult::decodeTokensPerSecond() const {
  const double steps = generatedIds.size() > 1 ? static_cast<double>(generatedIds.size() - 1) : 0.0;
  return decodeSeconds > 0 ? steps / decodeSeconds : 0.0;
}

struct Generator::Impl {
  GenerateOptions options;
  torch::Device device{torch::kCPU};
  std::shared_ptr<CausalLm> model;
  std::optional<Tokenizer> tokenizer;
  std::optional<std::int32_t> eos;

  // (1, 1, vocab): the logits at the last of `ids`, run through the model into `cache`.
  torch::Tensor lastLogits(const std::vector<std::int64_t>& ids, KvCache& cache) const {
    const auto h = model->hidden(torch::tensor(ids, torch::kInt64).view({1, -1}).to(device), &cache);
    return model->logitsFromHidden(h.narrow(1, h.size(1) - 1, 1));
  }

  // The next token from the last position's logits (1, vocab).
  std::int32_t pick(const torch::Tensor& logits, at::Generator& gen) const {
    auto l = logits.to(torch::kCPU, torch::kFloat64).reshape({-1});
    if (options.temperature <= 0) return static_cast<std::int32_t>(l.argmax().item<std::int64_t>());
    if (!torch::isfinite(l).all().item<bool>()) {
      throw Error(ErrorCode::Numeric, "generate: the model's logits are not finite (inf or nan)",
                  "The weights or the dtype overflowed; try --dtype f32.");
    }
    // Shifted so the largest is 0 before dividing: a tiny temperature (1e-300)
    // then sends the others to -inf instead of overflowing to inf/nan.
    l = (l - l.max()) / options.temperature;
    const auto ninf = -std::numeric_limits<double>::infinity();
    if (options.topK > 0 && options.topK < l.size(0)) {
      const auto kth = std::get<0>(l.topk(options.topK)).min();
      l = l.masked_fill(l < kth, ninf);
    }
    if (options.topP < 1.0) {
      // Keep the smallest set of most likely tokens whose probability reaches top_p.
      auto [sorted, order] = l.sort(/*dim=*/0, /*descending=*/true);
      const auto sortedProbs = sorted.softmax(0);
      auto drop = (sortedProbs.cumsum(0) - sortedProbs) >= options.topP;  // mass before the token already reaches p
      drop[0] = false;
      l = l.scatter(0, order.masked_select(drop), ninf);
    }
    auto probs = l.softmax(0);
    return static_cast<std::int32_t>(at::multinomial(probs, 1, /*replacement=*/false, gen).item<std::int64_t>());
  }
};

Generator::Generator(const GenerateOptions& options) : m_impl(std::make_unique<Impl>()) {
  Impl& d = *m_impl;
  d.options = options;
  if (options.maxNewTokens < 1) throw Error(ErrorCode::BadInput, "max_new_tokens must be at least 1");
  if (!(options.temperature >= 0)) throw Error(ErrorCode::BadInput, "temperature must be >= 0 (0: greedy)");
  if (options.topK < 0) throw Error(ErrorCode::BadInput, "top_k must be >= 0 (0: off)");
  if (!(options.topP > 0 && options.topP <= 1)) throw Error(ErrorCode::BadInput, "top_p must be in (0, 1]");
  withTorchErrors("generate", [&] {
    d.device = parseDevice(options.device);
    d.model = loadModel(options.model, d.device, toTorch(options.dtype));
    d.model->eval();
  });
  const fs::path tokPath = options.model / "tokenizer.json";
  std::error_code ec;
  if (fs::exists(tokPath, ec)) {
    d.tokenizer.emplace(Tokenizer::fromFile(tokPath));
    requireTokenizerFits(*d.tokenizer, d.model->config().vocabSize, options.model / "config.json");
  }
  d.eos = d.model->config().eosTokenId;
  if (!d.eos && d.tokenizer) d.eos = d.tokenizer->eosId();
  requireQuantizableCache(d.model->config(), options.kvQuant, options.model);
}

Generator::~Generator() = default;

const ModelConfig& Generator::config() const {
  return m_impl->model->config();
}

GenerateResult Generator::generate(const std::string& prompt, const TextSink& sink, const CancelToken& cancel,
                                   const TokenSink& onToken) {
  if (!m_impl->tokenizer) {
    throw Error(ErrorCode::BadData, (m_impl->options.model / "tokenizer.json").string() +
                                        ": not found; text generation "
                                        "needs the model's tokenizer");
  }
  return generateIds(m_impl->tokenizer->encode(prompt, /*addSpecial=*/true), sink, cancel, onToken);
}

void Generator::checkPromptIds(const std::vector<std::int32_t>& promptIds) const {
  const Impl& d = *m_impl;
  if (promptIds.empty()) throw Error(ErrorCode::BadInput, "the prompt has no tokens");
  const int vocab = d.model->config().vocabSize;
  for (std::int32_t id : promptIds) {
    if (id < 0 || id >= vocab) {
      throw Error(ErrorCode::BadInput, "prompt token id " + std::to_string(id) +
                                           " is outside the model's vocabulary (" + std::to_string(vocab) + ")");
    }
  }
  const int context = d.model->config().maxPositionEmbeddings;
  if (static_cast<std::int64_t>(promptIds.size()) + d.options.maxNewTokens > context) {
    throw Error(ErrorCode::BadInput,
                "the prompt (" + std::to_string(promptIds.size()) + " tokens) and " +
                    std::to_string(d.options.maxNewTokens) + " new tokens exceed the model's context of " +
                    std::to_string(context) + " tokens (" + (d.options.model / "config.json").string() +
                    " max_position_embeddings)",
                "Shorten the prompt or ask for fewer new tokens.");
  }
}

void Generator::checkPrompt(const std::string& prompt) const {
  if (!m_impl->tokenizer) {
    throw Error(ErrorCode::BadData, (m_impl->options.model / "tokenizer.json").string() +
                                        ": not found; text generation "
                                        "needs the model's tokenizer");
  }
  checkPromptIds(m_impl->tokenizer->encode(prompt, /*addSpecial=*/true));
}

GenerateResult Generator::generateIds(const std::vector<std::int32_t>& promptIds, const TextSink& sink,
                                      const CancelToken& cancel, const TokenSink& onToken) {
  Impl& d = *m_impl;
  checkPromptIds(promptIds);
  throwIfCancelled(cancel, "generate");
  GenerateResult r;
  r.promptIds = promptIds;
  return withTorchErrors("generate", [&] {
    torch::NoGradGuard noGrad;
    at::Generator gen = at::detail::createCPUGenerator(d.options.seed);
    KvCache cache(d.model->config().numLayers);
    cache.reserve(static_cast<std::int64_t>(promptIds.size()) + d.options.maxNewTokens);
    cache.setQuant(d.options.kvQuant);
    std::vector<std::int64_t> ids64(promptIds.begin(), promptIds.end());
    auto t0 = Clock::now();
    // The prompt's logits at its last position only: the output layer over
    // every position would be a fifth of a SmolLM-sized prefill's work.
    auto logits = d.lastLogits(ids64, cache);
    std::int32_t next = d.pick(logits.select(1, 0), gen);
    r.prefillSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::string shown;
    const auto t1 = Clock::now();
    while (true) {
      r.generatedIds.push_back(next);
      if (d.options.stopAtEos && d.eos && next == *d.eos) {
        r.stoppedAtEos = true;
        break;
      }
      if (sink && d.tokenizer) {
        // Whole characters only: a byte token may end in the middle of one.
        const std::string text = d.tokenizer->decode(r.generatedIds, /*skipSpecial=*/true);
        const bool partial = text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
        if (!partial && text.size() > shown.size() && text.compare(0, shown.size(), shown) == 0) {
          sink(std::string_view(text).substr(shown.size()));
          shown = text;
        }
      }
      if (onToken) {
        r.decodeSeconds = std::chrono::duration<double>(Clock::now() - t1).count();
        r.kvBytes = cache.bytes();
        onToken(r);
      }
      if (static_cast<int>(r.generatedIds.size()) >= d.options.maxNewTokens) break;
      throwIfCancelled(cancel, "generate");
      ids64.push_back(next);
      if (d.model->ropeRegimeChanges(cache.length(), 1)) {
        // longrope past the original context: the whole sequence again under
        // the long factors, as Phi-3's own generation drops its cache there.
        cache.clear();
        logits = d.lastLogits(ids64, cache);
      } else {
        logits = d.model->forward(
            torch::tensor({static_cast<std::int64_t>(next)}, torch::kInt64).view({1, 1}).to(d.device), &cache);
      }
      next = d.pick(logits.select(1, 0), gen);
    }
    r.decodeSeconds = std::chrono::duration<double>(Clock::now() - t1).count();
    r.kvBytes = cache.bytes();
    if (d.tokenizer) {
      std::vector<std::int32_t> body = r.generatedIds;
      if (r.stoppedAtEos) body.pop_back();
      r.text = d.tokenizer->decode(body, /*skipSpecial=*/true);
      if (sink && r.text.size() > shown.size() && r.text.compare(0, shown.size(), shown) == 0)
        sink(std::string_view(r.text).substr(shown.size()));
    }
    return r;
  });
}

}  // namespace latentlab
