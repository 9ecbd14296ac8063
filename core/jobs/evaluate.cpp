// evaluate: mean next-token loss and perplexity of a model over a token stream.
#include <chrono>
#include <cmath>
#include <fstream>

#include "common/file_util.h"
#include "data/token_shard.h"
#include "jobs/held_out_loss.h"
#include "latentlab/engine.h"
#include "model/kv_cache.h"
#include "model/kv_quant.h"
#include "model/torch_util.h"
#include "model/weights.h"

namespace latentlab {
namespace fs = std::filesystem;

std::vector<std::int64_t> tokenizeForModel(const fs::path& modelDir, const fs::path& textFile);

EvalResult evaluate(const EvalOptions& opts, ProgressSink& progress, const CancelToken& cancel) {
  return withTorchErrors("eval", [&]() {
    if (opts.seqLen < 1) throw Error(ErrorCode::BadInput, "--seq-len must be at least 1");
    if (opts.batchSize < 1) throw Error(ErrorCode::BadInput, "--batch must be at least 1");
    const fs::path configJson = opts.model / "config.json";
    const int context = readHfConfig(configJson).maxPositionEmbeddings;
    if (opts.seqLen > context) {  // refused before the weights are loaded
      throw Error(ErrorCode::BadInput,
                  "--seq-len " + std::to_string(opts.seqLen) + " exceeds the model's context of " +
                      std::to_string(context) + " tokens (" + configJson.string() + " max_position_embeddings)",
                  "Evaluate windows of at most the model's context.");
    }
    const auto device = parseDevice(opts.device);
    LoadReport report;
    auto model = loadModel(opts.model, device, toTorch(opts.dtype), &report);
    requireQuantizableCache(model->config(), opts.kvQuant, opts.model);
    if (opts.kvQuant.on() && opts.kvChunk < 1) throw Error(ErrorCode::BadInput, "--kv-chunk must be at least 1");
    const int vocab = model->config().vocabSize;
    std::vector<std::int64_t> ids;
    if (!opts.tokens.empty()) {
      ids = opts.tokens;
      for (const std::int64_t id : ids) {
        if (id < 0 || id >= vocab)
          throw Error(ErrorCode::BadData, "token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                                              std::to_string(vocab) + " (" + configJson.string() + ")");
      }
    } else if (!opts.tokenFile.empty()) {
      ids = readRawTokenIds(opts.tokenFile, rawLayout(opts.tokenFormat, "eval --token-format"),
                            static_cast<std::uint32_t>(vocab));
    } else if (!opts.textFile.empty()) {
      ids = tokenizeForModel(opts.model, opts.textFile);
    } else {
      throw Error(ErrorCode::BadInput, "eval needs --text FILE or --tokens FILE");
    }
    if (opts.maxTokens > 0 && static_cast<std::int64_t>(ids.size()) > opts.maxTokens + 1) {
      ids.resize(static_cast<std::size_t>(opts.maxTokens + 1));
    }
    return heldOutLoss(*model, ids, opts, progress, cancel);
  });
}

EvalResult heldOutLoss(CausalLm& model, const std::vector<std::int64_t>& ids, const EvalOptions& opts,
                       ProgressSink& progress, const CancelToken& cancel) {
  const auto device = model.model->embed_tokens->weight.device();
  if (ids.size() < 2) {
    throw Error(ErrorCode::BadData,
                "the evaluation stream has " + std::to_string(ids.size()) + " tokens; at least 2 are needed");
  }
  // Non-overlapping windows of seqLen+1 tokens with stride seqLen: every
  // token after the first is predicted exactly once.
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  const std::int64_t L = opts.seqLen;
  auto all = torch::tensor(ids, torch::kInt64);
  const std::int64_t fullWindows = (n - 1) / L;
  double lossSum = 0.0;
  std::int64_t predicted = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto lastReport = t0;
  torch::NoGradGuard noGrad;
  bool dumped = opts.logitsOut.empty();
  // With a quantized cache the window goes through the cache a chunk at a
  // time: each chunk after the first reads the older tokens from codes.
  const auto forward = [&](const torch::Tensor& inputs) {
    if (!opts.kvQuant.on()) return model.forward(inputs);
    KvCache cache(model.config().numLayers);
    cache.setQuant(opts.kvQuant);
    cache.reserve(inputs.size(1));
    std::vector<torch::Tensor> parts;
    for (std::int64_t s = 0; s < inputs.size(1); s += opts.kvChunk) {
      parts.push_back(
          model.forward(inputs.narrow(1, s, std::min<std::int64_t>(opts.kvChunk, inputs.size(1) - s)), &cache));
    }
    return torch::cat(parts, 1);
  };
  auto evalWindows = [&](const torch::Tensor& windows) {
    auto logits = forward(windows.narrow(1, 0, windows.size(1) - 1).to(device));
    if (!dumped) {
      dumped = true;
      auto first = logits[0].to(torch::kCPU, torch::kFloat32).contiguous();
      auto inputs = windows[0].narrow(0, 0, windows.size(1) - 1).to(torch::kCPU, torch::kInt64).contiguous();
      auto dump = [](const fs::path& path, const torch::Tensor& t) {
        atomicWrite(path, [&](int fd) { writeAll(fd, t.data_ptr(), static_cast<std::size_t>(t.nbytes()), path); });
      };
      dump(opts.logitsOut, first);
      fs::path idsPath = opts.logitsOut;
      idsPath += ".ids";
      dump(idsPath, inputs);
    }
    auto targets = windows.narrow(1, 1, windows.size(1) - 1).to(device);
    auto loss = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32), targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    lossSum += loss.item<double>();
    predicted += targets.numel();
  };
  for (std::int64_t w = 0; w < fullWindows; w += opts.batchSize) {
    throwIfCancelled(cancel, "eval");
    const std::int64_t b = std::min<std::int64_t>(opts.batchSize, fullWindows - w);
    auto starts = (torch::arange(b, torch::kInt64) + w) * L;                              // (b,)
    auto index = starts.unsqueeze(1) + torch::arange(L + 1, torch::kInt64).unsqueeze(0);  // (b, L+1)
    evalWindows(all.index({index}));
    const auto now = std::chrono::steady_clock::now();
    if (now - lastReport > std::chrono::milliseconds(250)) {
      progress.progress("eval", static_cast<double>(w + b), static_cast<double>(fullWindows), "");
      lastReport = now;
    }
  }
  const std::int64_t tail = (n - 1) - fullWindows * L;  // predicted tokens left over
  if (tail > 0) evalWindows(all.narrow(0, fullWindows * L, tail + 1).unsqueeze(0));
  progress.progress("eval", static_cast<double>(fullWindows), static_cast<double>(fullWindows), "");
  EvalResult r;
  r.tokens = predicted;
  r.meanLoss = lossSum / static_cast<double>(predicted);
  r.perplexity = std::exp(r.meanLoss);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.tokensPerSecond = static_cast<double>(predicted) / std::max(r.seconds, 1e-9);
  return r;
}

}  // namespace latentlab
