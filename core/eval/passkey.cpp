// The passkey test; see latentlab/passkey.h.
#include "latentlab/passkey.h"

#include "common/file_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>

#include "io/tokenizer.h"
#include "latentlab/error.h"
#include "latentlab/generate.h"
#include "model/cpu_block_cache.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {

constexpr const char* kIntro =
    "A pass key is hidden somewhere in the long text below. Find it and remember it: you will be asked for it at "
    "the end.";
constexpr const char* kQuestion = " What is the pass key? The pass key is";
constexpr int kAnswerTokens = kPasskeyAnswerTokens;

std::string needle(const std::string& key) {
  return " The pass key is " + key + ". Remember it. " + key + " is the pass key.";
}

std::string readText(const fs::path& path) {
  std::string text = readFileBounded(path, 256ULL << 20);  // a regular file of at most 256 MiB
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw Error(ErrorCode::BadInput, path.string() + ": the haystack file has no text");
  }
  return text;
}

// The prompt of one trial: exactly `length` ids and where the key's sentence starts.
struct PasskeyPrompt {
  std::vector<std::int32_t> ids;
  std::int64_t keyPosition = 0;
};

// Prompt ids: [BOS] intro filler[0, a) needle filler[a, F) question, `length` in all.
PasskeyPrompt buildPrompt(const Tokenizer& tok, const std::vector<std::int32_t>& filler, int length, double depth,
                          const std::string& key, const fs::path& model) {
  std::vector<std::int32_t> head;
  if (const auto bos = tok.bosId()) head.push_back(*bos);
  const auto intro = tok.encode(kIntro), keyIds = tok.encode(needle(key)), question = tok.encode(kQuestion);
  head.insert(head.end(), intro.begin(), intro.end());
  const std::int64_t fixed = static_cast<std::int64_t>(head.size() + keyIds.size() + question.size());
  const std::int64_t fill = length - fixed;
  if (fill < 1) {
    throw Error(ErrorCode::BadInput, "passkey length " + std::to_string(length) + ": shorter than the prompt's own " +
                                         std::to_string(fixed) + " tokens with " + model.string() + "'s tokenizer");
  }
  const std::int64_t before = std::llround(std::clamp(depth, 0.0, 1.0) * static_cast<double>(fill));
  PasskeyPrompt p;
  p.ids = head;
  auto addFiller = [&](std::int64_t from, std::int64_t count) {
    for (std::int64_t i = 0; i < count; ++i)
      p.ids.push_back(filler[static_cast<std::size_t>((from + i) % static_cast<std::int64_t>(filler.size()))]);
  };
  addFiller(0, before);
  p.keyPosition = static_cast<std::int64_t>(p.ids.size());
  p.ids.insert(p.ids.end(), keyIds.begin(), keyIds.end());
  addFiller(before, fill - before);
  p.ids.insert(p.ids.end(), question.begin(), question.end());
  return p;
}

}  // namespace

int PasskeyCell::correct() const {
  int n = 0;
  for (const PasskeyTrial& t : trials) n += t.correct ? 1 : 0;
  return n;
}

bool passkeyAnswered(const std::string& answer, const std::string& key) {
  std::size_t i = 0;
  while (i < answer.size() && std::isdigit(static_cast<unsigned char>(answer[i])) == 0) ++i;
  std::size_t j = i;
  while (j < answer.size() && std::isdigit(static_cast<unsigned char>(answer[j])) != 0) ++j;
  return j > i && answer.compare(i, j - i, key) == 0;
}

PasskeyResult runPasskey(const PasskeyOptions& options, ProgressSink& progress, const CancelToken& cancel) {
  if (options.lengths.empty() || options.depths.empty())
    throw Error(ErrorCode::BadInput, "passkey: no lengths or depths given");
  if (options.trials < 1) throw Error(ErrorCode::BadInput, "passkey: --trials must be at least 1");
  for (double d : options.depths) {
    if (!(d >= 0.0 && d <= 1.0))
      throw Error(ErrorCode::BadInput, "passkey depth " + std::to_string(d) + ": must be in 0..1");
  }
  const fs::path tokPath = options.model / "tokenizer.json";
  if (!fs::exists(tokPath))
    throw Error(ErrorCode::BadData, tokPath.string() + ": not found; the passkey test needs the model's tokenizer");
  const Tokenizer tok = Tokenizer::fromFile(tokPath);
  const std::vector<std::int32_t> filler = tok.encode(readText(options.haystack));
  if (filler.empty()) throw Error(ErrorCode::BadInput, options.haystack.string() + ": the haystack file has no tokens");

  PasskeyAnswerer answer = options.answerer;
  std::unique_ptr<Generator> gen;
  std::int64_t context = 0;
  if (answer) {
    context = readHfConfig(options.model / "config.json").maxPositionEmbeddings;
  } else {
    GenerateOptions g;
    g.model = options.model;
    g.maxNewTokens = kAnswerTokens;
    g.temperature = 0.0;  // greedy
    g.device = options.device;
    g.dtype = options.dtype;
    g.kvQuant = options.kvQuant;
    gen = std::make_unique<Generator>(g);
    context = gen->config().maxPositionEmbeddings;
    answer = [&](const std::vector<std::int32_t>& ids, int) { return gen->generateIds(ids, {}, cancel).generatedIds; };
  }
  for (int length : options.lengths) {
    if (length + kAnswerTokens > context) {
      throw Error(ErrorCode::BadInput,
                  "passkey length " + std::to_string(length) + ": with the " + std::to_string(kAnswerTokens) +
                      " answer tokens it exceeds the model's context of " + std::to_string(context) + " (" +
                      (options.model / "config.json").string() + " max_position_embeddings)");
    }
  }

  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int> digits(10000, 99999);
  PasskeyResult result;
  const auto total = static_cast<std::int64_t>(options.lengths.size() * options.depths.size()) * options.trials;
  std::int64_t done = 0;
  for (int length : options.lengths) {
    releaseCpuBlockCache();  // the blocks of the last length fit no prompt of this one
    for (double depth : options.depths) {
      if (options.skipCell && options.skipCell(length, depth)) {
        for (int t = 0; t < options.trials; ++t) digits(rng);  // the same keys for the cells after it
        done += options.trials;
        continue;
      }
      PasskeyCell cell;
      cell.length = length;
      cell.depth = depth;
      // Cancelled inside the cell: what it scored so far is handed over, marked partial.
      const auto keepPartial = [&] {
        if (cell.trials.empty() || !options.onCell) return;
        cell.partial = true;
        options.onCell(cell);
      };
      for (int t = 0; t < options.trials; ++t) {
        if (cancel.requested()) {
          keepPartial();
          throwIfCancelled(cancel, "passkey test");
        }
        PasskeyTrial trial;
        trial.key = std::to_string(digits(rng));
        const PasskeyPrompt prompt = buildPrompt(tok, filler, length, depth, trial.key, options.model);
        trial.keyPosition = prompt.keyPosition;
        trial.promptTokens = static_cast<std::int64_t>(prompt.ids.size());
        std::vector<std::int32_t> answerIds;
        try {
          answerIds = answer(prompt.ids, kAnswerTokens);
        } catch (const Error& e) {
          if (e.code() == ErrorCode::Cancelled) keepPartial();
          throw;
        }
        if (answerIds.size() > static_cast<std::size_t>(kAnswerTokens)) answerIds.resize(kAnswerTokens);
        trial.answer = tok.decode(answerIds, /*skipSpecial=*/true);
        trial.correct = passkeyAnswered(trial.answer, trial.key);
        cell.trials.push_back(std::move(trial));
        progress.progress("passkey", static_cast<double>(++done), static_cast<double>(total),
                          "length " + std::to_string(length) + ", depth " + std::to_string(depth));
      }
      if (options.onCell) options.onCell(cell);
      result.cells.push_back(std::move(cell));
    }
  }
  return result;
}

}  // namespace latentlab
