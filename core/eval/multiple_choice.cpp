// Multiple-choice log-likelihood scoring (lm-eval's loglikelihood requests).
#include "latentlab/multiple_choice.h"

#include "common/file_util.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/json_util.h"
#include "io/tokenizer.h"
#include "latentlab/error.h"
#include "model/cpu_block_cache.h"
#include "model/kv_quant.h"
#include "model/llama.h"
#include "model/torch_util.h"
#include "model/weights.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kWhitespace = " \t\n\r\f\v";

int argmax(const std::vector<double>& v) {
  int best = 0;
  for (std::size_t k = 1; k < v.size(); ++k)
    if (v[k] > v[static_cast<std::size_t>(best)]) best = static_cast<int>(k);
  return best;
}

// One (context, choice) request: its tokens (context then continuation, the
// last maxLength+1 kept) and how many of them are the continuation's.
struct Request {
  std::vector<std::int64_t> tokens;
  std::int64_t contLen = 0;
  std::size_t item = 0, choice = 0;
};

// The rows of one forward pass, right-padded, and for each continuation
// token its predicting position (row, position), its target and its request's row.
struct PackedBatch {
  torch::Tensor input;  // (B, W) token ids
  std::vector<std::int64_t> rowIdx, posIdx, targets, segment;
};

// An item whose requests, requests[first .. first+count), share `prefix` tokens.
struct SharedItem {
  std::size_t first = 0, count = 0;
  std::int64_t prefix = 0;
};

// How a score runs: items whose choices share enough of a prefix one at a
// time (the prefix once), the other requests batched across items.
struct Plan {
  std::vector<SharedItem> shared;
  std::vector<Request> batched;  // longest first
};

std::int64_t sharedPrefix(const Request* reqs, std::size_t count);

}  // namespace

struct ChoiceScorer::Impl {
  ChoiceEvalOptions options;
  std::optional<Tokenizer> tok;
  std::shared_ptr<CausalLm> model;
  torch::Device device{torch::kCPU};
  std::int64_t maxLength = 0;
  std::optional<std::int32_t> eos;

  // The context and continuation token ids of one (context, choice) request.
  std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>> encodePair(std::string context,
                                                                             std::string continuation) const {
    const std::size_t kept = context.find_last_not_of(kWhitespace);
    const std::size_t spaces = kept == std::string::npos ? context.size() : context.size() - kept - 1;
    if (spaces > 0) {  // the context's trailing whitespace belongs to the continuation
      continuation = context.substr(context.size() - spaces) + continuation;
      context.resize(context.size() - spaces);
    }
    if (context.empty()) {
      if (!eos) throw Error(ErrorCode::BadData, tok->source().string() + ": an empty context needs an EOS token");
      return {{*eos}, tok->encode(continuation, false)};
    }
    const auto whole = tok->encode(context + continuation, false);
    auto ctx = tok->encode(context, false);
    // lm-eval's split: the tokens of the whole past the context's are the
    // continuation. A choice that merges into the context's last token
    // ("...the f" + "unction") would leave none and score 0.0, so the split
    // moves back to where the two encodings first differ, keeping at least one
    // continuation token.
    std::size_t split = std::min(ctx.size(), whole.size());
    if (split == whole.size()) {
      split = 0;
      while (split < ctx.size() && split < whole.size() && ctx[split] == whole[split]) ++split;
      split = std::min(split, whole.size() - 1);
      ctx.assign(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(split));
    }
    std::vector<std::int32_t> cont(whole.begin() + static_cast<std::ptrdiff_t>(split), whole.end());
    return {std::move(ctx), std::move(cont)};
  }

  // The request of item i's choice c (`item` is items[i]); throws when the
  // continuation alone is longer than the window scored.
  Request request(const ChoiceItem& item, std::size_t i, std::size_t c) const {
    auto [ctx, cont] = encodePair(item.contexts.empty() ? item.context : item.contexts[c], item.choices[c]);
    if (static_cast<std::int64_t>(cont.size()) > maxLength) {  // lm-eval refuses it too
      throw Error(ErrorCode::BadData,
                  "item " + std::to_string(i + 1) + ", choice " + std::to_string(c) + ": the continuation is " +
                      std::to_string(cont.size()) + " tokens, longer than the " + std::to_string(maxLength) +
                      "-token window scored",
                  "Shorten the choice, or score with a longer --max-length (up to the model's context).");
    }
    Request q;
    q.tokens.assign(ctx.begin(), ctx.end());
    q.tokens.insert(q.tokens.end(), cont.begin(), cont.end());
    // The model predicts tokens 1..end from 0..end-1; keep the last maxLength+1.
    if (static_cast<std::int64_t>(q.tokens.size()) > maxLength + 1)
      q.tokens.erase(q.tokens.begin(), q.tokens.end() - (maxLength + 1));
    q.contLen = std::min(static_cast<std::int64_t>(cont.size()), static_cast<std::int64_t>(q.tokens.size()) - 1);
    q.item = i;
    q.choice = c;
    return q;
  }

  // Every choice of the first n items as a request, item by item.
  std::vector<Request> requests(const std::vector<ChoiceItem>& items, std::size_t n, const CancelToken& cancel) const {
    std::vector<Request> all;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t c = 0; c < items[i].choices.size(); ++c) {
        Request q = request(items[i], i, c);
        if (i % 256 == 0) throwIfCancelled(cancel, "multiple choice");
        all.push_back(std::move(q));
      }
    }
    return all;
  }

  // One item's requests sharing their first `prefix` tokens: the prefix in
  // one pass into a cache, then every request's rest as a row continuing it
  // (right-padded; only the continuation's positions reach the output
  // layer). (count) float64 on the CPU.
  torch::Tensor sharedPrefixLogLikelihoods(const Request* reqs, std::size_t count, std::int64_t prefix) const {
    const auto n = static_cast<std::int64_t>(count);
    std::int64_t width = 0;
    for (std::size_t b = 0; b < count; ++b)
      width = std::max(width, static_cast<std::int64_t>(reqs[b].tokens.size()) - 1 - prefix);
    KvCache cache(model->numLayers());
    cache.setQuant(options.kvQuant);
    cache.reserve(prefix + width);
    auto ids = torch::from_blob(const_cast<std::int64_t*>(reqs[0].tokens.data()), {1, prefix}, torch::kInt64);
    model->hidden(ids.to(device), &cache);
    cache.repeatRows(n);
    PackedBatch batch;
    batch.input = torch::zeros({n, width}, torch::kInt64);
    for (std::int64_t b = 0; b < n; ++b) {
      const Request& q = reqs[b];
      const auto len = static_cast<std::int64_t>(q.tokens.size()) - 1 - prefix;  // inputs after the prefix
      std::copy(q.tokens.begin() + prefix, q.tokens.begin() + prefix + len, batch.input[b].data_ptr<std::int64_t>());
      for (std::int64_t p = len - q.contLen; p < len; ++p) {
        batch.rowIdx.push_back(b);
        batch.posIdx.push_back(p);
        batch.targets.push_back(q.tokens[static_cast<std::size_t>(prefix + p + 1)]);
        batch.segment.push_back(b);
      }
    }
    return continuationLogLikelihoods(batch, &cache);
  }

  // Items (runs of requests with one item index) that share at least
  // options.minSharedPrefix tokens go one at a time; the rest are batched
  // longest first (as lm-eval orders them), so each batch is padded to its
  // first request's length and the slowest batches come first.
  Plan plan(const std::vector<Request>& requests) const {
    Plan out;
    for (std::size_t first = 0; first < requests.size();) {
      std::size_t end = first + 1;
      while (end < requests.size() && requests[end].item == requests[first].item) ++end;
      const std::size_t count = end - first;
      const std::int64_t prefix = sharedPrefix(&requests[first], count);
      // A quantized cache: every context goes through it.
      const std::int64_t minPrefix = options.kvQuant.on() ? 1 : options.minSharedPrefix;
      if (minPrefix > 0 && prefix >= minPrefix &&
          !model->ropeRegimeChanges(prefix, static_cast<std::int64_t>(requests[first].tokens.size()))) {
        out.shared.push_back({first, count, prefix});
      } else {
        out.batched.insert(out.batched.end(), requests.begin() + static_cast<std::ptrdiff_t>(first),
                           requests.begin() + static_cast<std::ptrdiff_t>(end));
      }
      first = end;
    }
    std::stable_sort(out.batched.begin(), out.batched.end(),
                     [](const Request& a, const Request& b) { return a.tokens.size() > b.tokens.size(); });
    return out;
  }

  // The forward pass of one batch (continuing `cache` when given): each
  // row's continuation log-likelihood, (B) float64 on the CPU.
  torch::Tensor continuationLogLikelihoods(const PackedBatch& batch, KvCache* cache = nullptr) const {
    // Only the continuation's positions reach the output layer.
    auto h = model->hidden(batch.input.to(device), cache);
    auto picked = h.index({torch::tensor(batch.rowIdx).to(device), torch::tensor(batch.posIdx).to(device)});  // (K, d)
    h = torch::Tensor();
    // The output layer and the log-softmax a few rows at a time: a batch of
    // short requests has thousands of continuation tokens, and their (K, V)
    // logits in float64 would be gigabytes.
    const auto targets = torch::tensor(batch.targets).to(device);
    const std::int64_t rows = picked.size(0), vocab = model->config().vocabSize;
    const std::int64_t chunk = std::max<std::int64_t>(1, (std::int64_t{1} << 23) / std::max<std::int64_t>(vocab, 1));
    std::vector<torch::Tensor> parts;
    for (std::int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const std::int64_t n = std::min(chunk, rows - r0);
      auto logprobs = torch::log_softmax(model->logitsFromHidden(picked.narrow(0, r0, n)).to(torch::kFloat64), -1);
      parts.push_back(logprobs.gather(1, targets.narrow(0, r0, n).unsqueeze(1)).squeeze(1).cpu());
    }
    auto tokenLp = torch::cat(parts);
    return torch::zeros({batch.input.size(0)}, torch::kFloat64).index_add_(0, torch::tensor(batch.segment), tokenLp);
  }
};

ChoiceScorer::ChoiceScorer(const ChoiceEvalOptions& options) : m_impl(std::make_unique<Impl>()) {
  Impl& d = *m_impl;
  d.options = options;
  d.tok.emplace(Tokenizer::fromFile(options.model / "tokenizer.json"));
  const int context = readHfConfig(options.model / "config.json").maxPositionEmbeddings;
  if (options.maxLength > context) {  // refused before the weights are loaded
    throw Error(ErrorCode::BadInput,
                "--max-length " + std::to_string(options.maxLength) + " exceeds the model's context of " +
                    std::to_string(context) + " tokens (" + (options.model / "config.json").string() +
                    " max_position_embeddings)",
                "Score with a window of at most the model's context.");
  }
  withTorchErrors("eval", [&] {
    d.device = parseDevice(options.device);
    d.model = loadModel(options.model, d.device, toTorch(options.dtype));
    d.model->eval();
  });
  requireTokenizerFits(*d.tok, d.model->config().vocabSize, options.model / "config.json");
  requireQuantizableCache(d.model->config(), options.kvQuant, options.model);
  d.maxLength = options.maxLength > 0 ? options.maxLength : d.model->config().maxPositionEmbeddings;
  d.eos = d.tok->eosId() ? d.tok->eosId() : d.model->config().eosTokenId;  // lm-eval: the tokenizer's EOS
}

ChoiceScorer::~ChoiceScorer() = default;

namespace {

// acc, acc_norm and their standard errors from the hit counts of the `done`
// items scored so far (lm-eval's mean_stderr of 0/1 hits: the sample
// standard deviation over sqrt(n)).
void setFigures(ChoiceEvalResult& r, std::int64_t done, std::int64_t hits, std::int64_t hitsNorm) {
  auto mean = [&](std::int64_t k) { return done > 0 ? static_cast<double>(k) / static_cast<double>(done) : 0.0; };
  auto stderrOf = [&](double p) {
    if (done < 2) return 0.0;
    const double n = static_cast<double>(done);
    return std::sqrt(p * (1 - p) * n / (n - 1)) / std::sqrt(n);
  };
  r.items = done;
  r.acc = mean(hits);
  r.accNorm = mean(hitsNorm);
  r.accStderr = stderrOf(r.acc);
  r.accNormStderr = stderrOf(r.accNorm);
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// What score() counts as the batches come back.
struct Tally {
  std::vector<std::size_t> unscored;  // choices of each item not scored yet
  std::int64_t done = 0, hits = 0, hitsNorm = 0;
};

// The result's lists sized for the first n items (every log-likelihood 0, no
// prediction yet), and every choice of them not scored yet.
Tally startItems(const std::vector<ChoiceItem>& items, std::size_t n, ChoiceEvalResult& r) {
  Tally t;
  r.logLikelihoods.resize(n);
  r.predicted.assign(n, -1);
  r.predictedNorm.assign(n, -1);
  t.unscored.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.logLikelihoods[i].assign(items[i].choices.size(), 0.0);
    t.unscored[i] = items[i].choices.size();
  }
  return t;
}

// How many leading tokens the requests of one item (all its choices) share
// that none of them scores: the prefix computed once. It stops before each
// request's last context token, whose output predicts the continuation.
std::int64_t sharedPrefix(const Request* reqs, std::size_t count) {
  if (count < 2) return 0;
  const std::vector<std::int64_t>& a = reqs[0].tokens;
  auto p = static_cast<std::int64_t>(a.size()) - 1 - reqs[0].contLen;
  for (std::size_t k = 1; k < count; ++k) {
    const std::vector<std::int64_t>& b = reqs[k].tokens;
    p = std::min(p, static_cast<std::int64_t>(b.size()) - 1 - reqs[k].contLen);
    const auto common = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
    p = std::min<std::int64_t>(p, common);
  }
  return std::max<std::int64_t>(p, 0);
}

// How far one forward pass reaches from `next`: as many requests as fit the
// token budget at the batch's width (at least one).
std::size_t batchEnd(const std::vector<Request>& requests, std::size_t next, std::int64_t budget) {
  const auto W = static_cast<std::int64_t>(requests[next].tokens.size()) - 1;
  std::size_t end = next + 1;
  while (end < requests.size() && static_cast<std::int64_t>(end - next + 1) * W <= budget) ++end;
  return end;
}

// Rows of one forward pass: requests [next, end), right-padded to the batch's width.
PackedBatch packBatch(const std::vector<Request>& requests, std::size_t next, std::size_t end) {
  const auto W = static_cast<std::int64_t>(requests[next].tokens.size()) - 1;
  const auto B = static_cast<std::int64_t>(end - next);
  PackedBatch batch;
  batch.input = torch::zeros({B, W}, torch::kInt64);
  for (std::int64_t b = 0; b < B; ++b) {
    const Request& q = requests[next + static_cast<std::size_t>(b)];
    const auto len = static_cast<std::int64_t>(q.tokens.size()) - 1;
    std::copy(q.tokens.begin(), q.tokens.begin() + len, batch.input[b].data_ptr<std::int64_t>());
    for (std::int64_t p = len - q.contLen; p < len; ++p) {  // the continuation's predicting positions
      batch.rowIdx.push_back(b);
      batch.posIdx.push_back(p);
      batch.targets.push_back(q.tokens[static_cast<std::size_t>(p + 1)]);
      batch.segment.push_back(b);
    }
  }
  return batch;
}

// The item's last choice was scored: its predictions and hits.
void recordItem(const ChoiceItem& item, std::size_t i, ChoiceEvalResult& r, Tally& t) {
  const std::vector<double>& lls = r.logLikelihoods[i];
  std::vector<double> norm(lls.size());
  for (std::size_t c = 0; c < lls.size(); ++c) norm[c] = lls[c] / static_cast<double>(item.choices[c].size());
  r.predicted[i] = argmax(lls);
  r.predictedNorm[i] = argmax(norm);
  ++t.done;
  t.hits += r.predicted[i] == item.gold ? 1 : 0;
  t.hitsNorm += r.predictedNorm[i] == item.gold ? 1 : 0;
}

// The log-likelihoods of one batch, requests from `next` on, into the result.
void recordBatch(const std::vector<ChoiceItem>& items, const std::vector<Request>& requests, std::size_t next,
                 const torch::Tensor& sums, ChoiceEvalResult& r, Tally& t) {
  for (std::int64_t b = 0; b < sums.size(0); ++b) {
    const Request& q = requests[next + static_cast<std::size_t>(b)];
    r.logLikelihoods[q.item][q.choice] = sums[b].item<double>();
    if (--t.unscored[q.item] > 0) continue;
    recordItem(items[q.item], q.item, r, t);
  }
}

// A cancelled score: the items left unscored are dropped.
void dropUnscored(ChoiceEvalResult& r) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < r.logLikelihoods.size(); ++i) {
    if (r.predicted[i] < 0) continue;
    r.logLikelihoods[kept] = r.logLikelihoods[i];
    r.predicted[kept] = r.predicted[i];
    r.predictedNorm[kept] = r.predictedNorm[i];
    r.scoredItems.push_back(i);
    ++kept;
  }
  r.logLikelihoods.resize(kept);
  r.predicted.resize(kept);
  r.predictedNorm.resize(kept);
}

}  // namespace

ChoiceEvalResult ChoiceScorer::score(const std::vector<ChoiceItem>& items, std::int64_t limit, ProgressSink& progress,
                                     const CancelToken& cancel, const ChoiceResultSink& partial) {
  Impl& d = *m_impl;
  return withTorchErrors("eval", [&] {
    // Declared first, so it runs after every tensor of the pass is freed: the
    // blocks of the batch widths seen here are of no use to the next pass.
    struct ReleaseBlocks {
      ~ReleaseBlocks() { releaseCpuBlockCache(); }
    } releaseBlocks;
    torch::NoGradGuard noGrad;
    ChoiceEvalResult r;
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t n =
        limit > 0 ? std::min<std::size_t>(items.size(), static_cast<std::size_t>(limit)) : items.size();
    Tally t = startItems(items, n, r);
    const std::vector<Request> requests = d.requests(items, n, cancel);
    const Plan plan = d.plan(requests);
    const std::int64_t budget = std::max<std::int64_t>(d.options.batchTokens, 1);
    std::size_t scored = 0;
    const auto report = [&](std::size_t more) {
      scored += more;
      progress.progress("eval", static_cast<double>(scored), static_cast<double>(requests.size()), "");
      if (partial && scored < requests.size()) {
        ChoiceEvalResult sofar;  // the figures only
        setFigures(sofar, t.done, t.hits, t.hitsNorm);
        sofar.seconds = secondsSince(t0);
        partial(sofar);
      }
    };
    std::size_t next = 0;
    while (next < plan.batched.size() && !(r.cancelled = cancel.requested())) {
      const std::size_t end = batchEnd(plan.batched, next, budget);
      const torch::Tensor sums = d.continuationLogLikelihoods(packBatch(plan.batched, next, end));
      recordBatch(items, plan.batched, next, sums, r, t);
      report(end - next);
      next = end;
    }
    for (std::size_t k = 0; k < plan.shared.size() && !r.cancelled && !(r.cancelled = cancel.requested()); ++k) {
      const SharedItem& s = plan.shared[k];
      const torch::Tensor sums = d.sharedPrefixLogLikelihoods(&requests[s.first], s.count, s.prefix);
      recordBatch(items, requests, s.first, sums, r, t);
      report(s.count);
    }
    setFigures(r, t.done, t.hits, t.hitsNorm);
    if (r.cancelled) dropUnscored(r);  // the items left unscored are dropped
    r.seconds = secondsSince(t0);
    return r;
  });
}

ChoiceEvalResult evaluateChoices(const ChoiceEvalOptions& options, const std::vector<ChoiceItem>& items,
                                 ProgressSink& progress, const CancelToken& cancel) {
  ChoiceEvalResult r = ChoiceScorer(options).score(items, options.limit, progress, cancel);
  if (r.cancelled) throwIfCancelled(cancel, "eval");
  return r;
}

}  // namespace latentlab
