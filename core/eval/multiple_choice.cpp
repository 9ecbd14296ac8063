// Multiple-choice log-likelihood scoring (lm-eval's loglikelihood requests).
#include "latentlab/multiple_choice.h"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "common/json_util.h"
#include "io/tokenizer.h"
#include "latentlab/error.h"
#include "model/llama.h"
#include "model/torch_util.h"
#include "model/weights.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;

std::vector<ChoiceItem> readChoiceItems(const fs::path& path) {
  const std::string hint = "One {\"context\": str, \"choices\": [str, ...], \"gold\": int} a line.";
  std::vector<ChoiceItem> items;
  forEachJsonLine(path, ErrorCode::BadData, hint, [&](const json& j, const std::string& where) {
    auto bad = [&](const std::string& problem) { throw Error(ErrorCode::BadData, where + ": " + problem, hint); };
    if (!j.is_object()) bad("not a JSON object");
    ChoiceItem item;
    if (!j.contains("context") || !j.at("context").is_string()) bad("field 'context' is missing or not a string");
    item.context = j.at("context").get<std::string>();
    if (!j.contains("choices") || !j.at("choices").is_array() || j.at("choices").size() < 2)
      bad("field 'choices' must be an array of at least two strings");
    for (const auto& c : j.at("choices")) {
      if (!c.is_string() || c.get<std::string>().empty()) bad("field 'choices' must hold non-empty strings");
      item.choices.push_back(c.get<std::string>());
    }
    if (!j.contains("gold") || !j.at("gold").is_number_integer()) bad("field 'gold' is missing or not an integer");
    const auto gold = j.at("gold").get<long long>();
    if (gold < 0 || gold >= static_cast<long long>(item.choices.size()))
      bad("field 'gold' (" + std::to_string(gold) + ") is not the index of a choice");
    item.gold = static_cast<int>(gold);
    items.push_back(std::move(item));
  });
  if (items.empty()) throw Error(ErrorCode::BadData, path.string() + ": no items");
  return items;
}

namespace {

const char* const kWhitespace = " \t\n\r\f\v";

// Python's str.strip() for ASCII whitespace.
std::string trimmed(const std::string& text) {
  const auto b = text.find_first_not_of(kWhitespace);
  if (b == std::string::npos) return {};
  return text.substr(b, text.find_last_not_of(kWhitespace) - b + 1);
}

// HellaSwag's cleaning (WikiHow artifacts): trim, " [title]" -> ". ", drop
// [bracketed] spans, then each double space becomes one.
std::string cleanHellaSwag(const std::string& raw) {
  const std::string text = trimmed(raw);
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    if (text.compare(at, 8, " [title]") == 0) {
      out += ". ";
      at += 8;
    } else {
      out += text[at++];
    }
  }
  std::string unbracketed;
  for (std::size_t at = 0; at < out.size();) {
    const auto close = out[at] == '[' ? out.find(']', at) : std::string::npos;
    if (close != std::string::npos) {
      at = close + 1;
    } else {
      unbracketed += out[at++];
    }
  }
  std::string single;
  for (std::size_t at = 0; at < unbracketed.size();) {
    if (unbracketed.compare(at, 2, "  ") == 0) {
      single += ' ';
      at += 2;
    } else {
      single += unbracketed[at++];
    }
  }
  return single;
}

// Python's str.capitalize for ASCII: the first letter upper case, the rest lower.
std::string capitalized(std::string s) {
  for (std::size_t k = 0; k < s.size(); ++k) {
    const auto c = static_cast<unsigned char>(s[k]);
    if (c < 0x80) s[k] = static_cast<char>(k == 0 ? std::toupper(c) : std::tolower(c));
  }
  return s;
}

std::string stringAt(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_string())
    throw Error(ErrorCode::BadData, where + ": field '" + key + "' is missing or not a string");
  return j.at(key).get<std::string>();
}

// ARC and OpenBookQA: {"question": {"stem", "choices": [{"text", "label"}]}, "answerKey"}.
ChoiceItem arcItem(const json& j, const std::string& where, bool questionAnswerPrompt) {
  if (!j.contains("question") || !j.at("question").is_object())
    throw Error(ErrorCode::BadData, where + ": field 'question' is missing or not an object");
  const json& q = j.at("question");
  ChoiceItem item;
  const std::string stem = stringAt(q, "stem", where + " question");
  item.context = questionAnswerPrompt ? "Question: " + stem + "\nAnswer:" : stem;
  if (!q.contains("choices") || !q.at("choices").is_array() || q.at("choices").size() < 2)
    throw Error(ErrorCode::BadData, where + ": field 'question.choices' must list at least two choices");
  std::string key = stringAt(j, "answerKey", where);
  while (!key.empty() && key.front() == ' ') key.erase(0, 1);
  int gold = -1;
  for (const auto& c : q.at("choices")) {
    if (stringAt(c, "label", where + " choice") == key) gold = static_cast<int>(item.choices.size());
    item.choices.push_back(" " + stringAt(c, "text", where + " choice"));
  }
  if (gold < 0) throw Error(ErrorCode::BadData, where + ": answerKey '" + key + "' is not one of the choices' labels");
  item.gold = gold;
  return item;
}

// MMLU's CSV (no header): question, A, B, C, D, answer letter; quoted fields
// may hold commas, doubled quotes and newlines.
std::vector<std::vector<std::string>> readMmluCsv(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, path.string() + ": cannot open");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  auto endRow = [&] {
    row.push_back(field);
    field.clear();
    if (!(row.size() == 1 && row[0].empty())) {
      const std::string where = path.string() + ": row " + std::to_string(rows.size() + 1);
      if (row.size() != 6) throw Error(ErrorCode::BadData, where + ": has " + std::to_string(row.size()) + " fields, not 6");
      if (row[5].size() != 1 || row[5][0] < 'A' || row[5][0] > 'D')
        throw Error(ErrorCode::BadData, where + ": the answer must be A, B, C or D, got '" + row[5] + "'");
      rows.push_back(row);
    }
    row.clear();
    any = false;
  };
  for (std::size_t k = 0; k < text.size(); ++k) {
    const char c = text[k];
    if (quoted) {
      if (c == '"' && k + 1 < text.size() && text[k + 1] == '"') {
        field += '"';
        ++k;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && k + 1 < text.size() && text[k + 1] == '\n') ++k;
      endRow();
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) throw Error(ErrorCode::BadData, path.string() + ": a quoted field is not closed");
  if (any || !field.empty() || !row.empty()) endRow();
  return rows;
}

} // namespace

std::vector<ChoiceItem> readTaskFile(const std::string& format, const fs::path& path, const fs::path& extra, int shots) {
  const fs::path& labels = extra;
  if (format == "jsonl") return readChoiceItems(path);
  std::vector<ChoiceItem> items;
  const std::string hint = "The file must be the benchmark's own JSONL release (--format " + format + ").";
  if (format == "arc" || format == "openbookqa") {
    forEachJsonLine(path, ErrorCode::BadData, hint, [&](const json& j, const std::string& where) {
      items.push_back(arcItem(j, where, format == "arc"));
    });
  } else if (format == "hellaswag") {
    forEachJsonLine(path, ErrorCode::BadData, hint, [&](const json& j, const std::string& where) {
      ChoiceItem item;
      item.context = cleanHellaSwag(stringAt(j, "activity_label", where) + ": " + stringAt(j, "ctx_a", where) + " " +
                                    capitalized(stringAt(j, "ctx_b", where)));
      if (!j.contains("endings") || !j.at("endings").is_array() || j.at("endings").size() < 2)
        throw Error(ErrorCode::BadData, where + ": field 'endings' must list at least two endings");
      for (const auto& e : j.at("endings")) {
        if (!e.is_string()) throw Error(ErrorCode::BadData, where + ": field 'endings' must hold strings");
        item.choices.push_back(" " + cleanHellaSwag(e.get<std::string>()));
      }
      const json& label = j.contains("label") ? j.at("label") : json();
      const long long gold = label.is_number_integer() ? label.get<long long>()
                             : label.is_string() && !label.get<std::string>().empty()
                                 ? std::strtoll(label.get<std::string>().c_str(), nullptr, 10)
                                 : -1;
      if (gold < 0 || gold >= static_cast<long long>(item.choices.size()))
        throw Error(ErrorCode::BadData, where + ": field 'label' is missing or not the index of an ending");
      item.gold = static_cast<int>(gold);
      items.push_back(std::move(item));
    });
  } else if (format == "piqa") {
    if (labels.empty()) throw Error(ErrorCode::BadInput, "piqa needs its labels file (--labels FILE)");
    std::ifstream in(labels);
    if (!in) throw Error(ErrorCode::Io, labels.string() + ": cannot open");
    std::vector<int> golds;
    for (std::string line; std::getline(in, line);) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (line.rfind("0", 0) != 0 && line.rfind("1", 0) != 0)
        throw Error(ErrorCode::BadData, labels.string() + ":" + std::to_string(golds.size() + 1) + ": a label is 0 or 1");
      golds.push_back(line[0] - '0');
    }
    forEachJsonLine(path, ErrorCode::BadData, hint, [&](const json& j, const std::string& where) {
      ChoiceItem item;
      item.context = "Question: " + stringAt(j, "goal", where) + "\nAnswer:";
      item.choices = {" " + stringAt(j, "sol1", where), " " + stringAt(j, "sol2", where)};
      if (items.size() >= golds.size())
        throw Error(ErrorCode::BadData, labels.string() + ": fewer labels than items in " + path.string());
      item.gold = golds[items.size()];
      items.push_back(std::move(item));
    });
    if (items.size() != golds.size())
      throw Error(ErrorCode::BadData, labels.string() + ": " + std::to_string(golds.size()) + " labels for " +
                                          std::to_string(items.size()) + " items in " + path.string());
  } else if (format == "winogrande") {
    forEachJsonLine(path, ErrorCode::BadData, hint, [&](const json& j, const std::string& where) {
      const std::string sentence = stringAt(j, "sentence", where);
      const auto blank = sentence.find('_');
      if (blank == std::string::npos) throw Error(ErrorCode::BadData, where + ": the sentence has no '_' blank");
      const std::string rest = trimmed(sentence.substr(blank + 1));
      ChoiceItem item;
      for (const char* option : {"option1", "option2"}) {
        item.contexts.push_back(sentence.substr(0, blank) + stringAt(j, option, where));
        item.choices.push_back(" " + rest);
      }
      const std::string answer = stringAt(j, "answer", where);
      if (answer != "1" && answer != "2") throw Error(ErrorCode::BadData, where + ": field 'answer' must be \"1\" or \"2\"");
      item.gold = answer == "1" ? 0 : 1;
      items.push_back(std::move(item));
    });
  } else if (format == "mmlu") {
    std::string subject = path.stem().string();
    for (const char* suffix : {"_test", "_val", "_dev"}) {
      const std::string sfx = suffix;
      if (subject.size() > sfx.size() && subject.compare(subject.size() - sfx.size(), sfx.size(), sfx) == 0)
        subject.resize(subject.size() - sfx.size());
    }
    for (char& c : subject) if (c == '_') c = ' ';
    auto question = [](const std::vector<std::string>& row) {
      return trimmed(row[0]) + "\nA. " + row[1] + "\nB. " + row[2] + "\nC. " + row[3] + "\nD. " + row[4] + "\nAnswer:";
    };
    std::string prefix = "The following are multiple choice questions (with answers) about " + subject + ".\n\n";
    if (shots > 0) {
      if (extra.empty()) throw Error(ErrorCode::BadInput, "mmlu with shots needs the subject's dev CSV (--dev FILE)");
      const auto dev = readMmluCsv(extra);
      if (static_cast<std::size_t>(shots) > dev.size())
        throw Error(ErrorCode::BadData, extra.string() + ": " + std::to_string(dev.size()) + " examples for " +
                                            std::to_string(shots) + " shots");
      for (int k = 0; k < shots; ++k) prefix += question(dev[static_cast<std::size_t>(k)]) + " " + dev[static_cast<std::size_t>(k)][5] + "\n\n";
    }
    for (const auto& row : readMmluCsv(path)) {
      ChoiceItem item;
      item.context = prefix + question(row);
      item.choices = {" A", " B", " C", " D"};
      item.gold = row[5][0] - 'A';
      items.push_back(std::move(item));
    }
  } else {
    throw Error(ErrorCode::BadInput, "task format '" + format + "' is not known",
                "Use arc, openbookqa, hellaswag, piqa, winogrande, mmlu or jsonl.");
  }
  if (items.empty()) throw Error(ErrorCode::BadData, path.string() + ": no items");
  return items;
}

namespace {

int argmax(const std::vector<double>& v) {
  int best = 0;
  for (std::size_t k = 1; k < v.size(); ++k)
    if (v[k] > v[static_cast<std::size_t>(best)]) best = static_cast<int>(k);
  return best;
}

} // namespace

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
    if (spaces > 0) {   // the context's trailing whitespace belongs to the continuation
      continuation = context.substr(context.size() - spaces) + continuation;
      context.resize(context.size() - spaces);
    }
    if (context.empty()) {
      if (!eos) throw Error(ErrorCode::BadData, tok->source().string() + ": an empty context needs an EOS token");
      return {{*eos}, tok->encode(continuation, false)};
    }
    const auto whole = tok->encode(context + continuation, false);
    auto ctx = tok->encode(context, false);
    std::vector<std::int32_t> cont(whole.begin() + static_cast<std::ptrdiff_t>(std::min(ctx.size(), whole.size())),
                                   whole.end());
    return {std::move(ctx), std::move(cont)};
  }
};

ChoiceScorer::ChoiceScorer(const ChoiceEvalOptions& options) : m_impl(std::make_unique<Impl>()) {
  Impl& d = *m_impl;
  d.options = options;
  d.tok.emplace(Tokenizer::fromFile(options.model / "tokenizer.json"));
  withTorchErrors("eval", [&] {
    d.device = parseDevice(options.device);
    d.model = loadModel(options.model, d.device, toTorch(options.dtype));
    d.model->eval();
  });
  requireTokenizerFits(*d.tok, d.model->config().vocabSize, options.model / "config.json");
  d.maxLength = options.maxLength > 0 ? options.maxLength : d.model->config().maxPositionEmbeddings;
  d.eos = d.tok->eosId() ? d.tok->eosId() : d.model->config().eosTokenId;   // lm-eval: the tokenizer's EOS
}

ChoiceScorer::~ChoiceScorer() = default;

std::vector<ChoiceItem> readTaskFile(const EvalTaskSpec& t) {
  return readTaskFile(t.format, t.file, t.format == "mmlu" ? t.dev : t.labels, t.shots);
}

namespace {

// One (context, choice) request: its tokens (context then continuation, the
// last maxLength+1 kept) and how many of them are the continuation's.
struct Request {
  std::vector<std::int64_t> tokens;
  std::int64_t contLen = 0;
  std::size_t item = 0, choice = 0;
};

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

} // namespace

ChoiceEvalResult ChoiceScorer::score(const std::vector<ChoiceItem>& items, std::int64_t limit, ProgressSink& progress,
                                     const CancelToken& cancel, const ChoiceResultSink& partial) {
  Impl& d = *m_impl;
  return withTorchErrors("eval", [&] {
    torch::NoGradGuard noGrad;
    ChoiceEvalResult r;
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t n = limit > 0 ? std::min<std::size_t>(items.size(), static_cast<std::size_t>(limit)) : items.size();
    std::vector<Request> requests;
    r.logLikelihoods.resize(n);
    r.predicted.assign(n, -1);
    r.predictedNorm.assign(n, -1);
    std::vector<std::size_t> unscored(n);   // choices of each item not scored yet
    std::int64_t done = 0, hits = 0, hitsNorm = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const ChoiceItem& item = items[i];
      r.logLikelihoods[i].assign(item.choices.size(), 0.0);
      unscored[i] = item.choices.size();
      for (std::size_t c = 0; c < item.choices.size(); ++c) {
        auto [ctx, cont] = d.encodePair(item.contexts.empty() ? item.context : item.contexts[c], item.choices[c]);
        Request q;
        q.tokens.assign(ctx.begin(), ctx.end());
        q.tokens.insert(q.tokens.end(), cont.begin(), cont.end());
        // The model predicts tokens 1..end from 0..end-1; keep the last maxLength+1.
        if (static_cast<std::int64_t>(q.tokens.size()) > d.maxLength + 1)
          q.tokens.erase(q.tokens.begin(), q.tokens.end() - (d.maxLength + 1));
        q.contLen = std::min(static_cast<std::int64_t>(cont.size()), static_cast<std::int64_t>(q.tokens.size()) - 1);
        q.item = i;
        q.choice = c;
        requests.push_back(std::move(q));
      }
    }
    // Longest first (as lm-eval orders them), so each batch is padded to its
    // first request's length and the slowest batches come first.
    std::stable_sort(requests.begin(), requests.end(),
                     [](const Request& a, const Request& b) { return a.tokens.size() > b.tokens.size(); });
    const std::int64_t budget = std::max<std::int64_t>(d.options.batchTokens, 1);
    std::size_t next = 0;
    while (next < requests.size()) {
      if (cancel.requested()) {
        r.cancelled = true;
        break;
      }
      // Rows of one forward pass: as many requests as fit the token budget at
      // the batch's width (at least one), right-padded.
      const auto W = static_cast<std::int64_t>(requests[next].tokens.size()) - 1;
      std::size_t end = next + 1;
      while (end < requests.size() && static_cast<std::int64_t>(end - next + 1) * W <= budget) ++end;
      const auto B = static_cast<std::int64_t>(end - next);
      auto input = torch::zeros({B, W}, torch::kInt64);
      std::vector<std::int64_t> rowIdx, posIdx, targets, segment;
      for (std::int64_t b = 0; b < B; ++b) {
        const Request& q = requests[next + static_cast<std::size_t>(b)];
        const auto len = static_cast<std::int64_t>(q.tokens.size()) - 1;
        std::copy(q.tokens.begin(), q.tokens.begin() + len, input[b].data_ptr<std::int64_t>());
        for (std::int64_t p = len - q.contLen; p < len; ++p) {   // the continuation's predicting positions
          rowIdx.push_back(b);
          posIdx.push_back(p);
          targets.push_back(q.tokens[static_cast<std::size_t>(p + 1)]);
          segment.push_back(b);
        }
      }
      // Only the continuation's positions reach the output layer.
      auto h = d.model->hidden(input.to(d.device));
      auto picked = h.index({torch::tensor(rowIdx).to(d.device), torch::tensor(posIdx).to(d.device)});   // (K, d)
      auto logprobs = torch::log_softmax(d.model->logitsFromHidden(picked).to(torch::kFloat64), -1).cpu();  // (K, V)
      auto tokenLp = logprobs.gather(1, torch::tensor(targets).unsqueeze(1)).squeeze(1);
      auto sums = torch::zeros({B}, torch::kFloat64).index_add_(0, torch::tensor(segment), tokenLp);
      for (std::int64_t b = 0; b < B; ++b) {
        const Request& q = requests[next + static_cast<std::size_t>(b)];
        r.logLikelihoods[q.item][q.choice] = sums[b].item<double>();
        if (--unscored[q.item] > 0) continue;
        // The item's last choice: its predictions and hits.
        const std::vector<double>& lls = r.logLikelihoods[q.item];
        std::vector<double> norm(lls.size());
        for (std::size_t c = 0; c < lls.size(); ++c) norm[c] = lls[c] / static_cast<double>(items[q.item].choices[c].size());
        r.predicted[q.item] = argmax(lls);
        r.predictedNorm[q.item] = argmax(norm);
        ++done;
        hits += r.predicted[q.item] == items[q.item].gold ? 1 : 0;
        hitsNorm += r.predictedNorm[q.item] == items[q.item].gold ? 1 : 0;
      }
      next = end;
      progress.progress("eval", static_cast<double>(next), static_cast<double>(requests.size()), "");
      if (partial && next < requests.size()) {
        ChoiceEvalResult sofar;   // the figures only
        setFigures(sofar, done, hits, hitsNorm);
        sofar.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        partial(sofar);
      }
    }
    setFigures(r, done, hits, hitsNorm);
    if (r.cancelled) {   // the items left unscored are dropped
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
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  });
}

ChoiceEvalResult evaluateChoices(const ChoiceEvalOptions& options, const std::vector<ChoiceItem>& items,
                                 ProgressSink& progress, const CancelToken& cancel) {
  ChoiceEvalResult r = ChoiceScorer(options).score(items, options.limit, progress, cancel);
  if (r.cancelled) throwIfCancelled(cancel, "eval");
  return r;
}

} // namespace latentlab
