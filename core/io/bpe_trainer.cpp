// trainBpeTokenizer: counts GPT-2 pre-tokenized words, then learns merges on
// the word counts with incremental pair counts, and writes tokenizer.json.
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "common/file_util.h"
#include "io/bpe_model.h"
#include "io/pretokenizer.h"
#include "io/tokenizer.h"
#include "io/unicode_text.h"
#include "latentlab/error.h"

namespace latentlab {
namespace {

using Pair = std::uint64_t;  // (left id << 32) | right id

Pair makePair(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

struct TrainWord {
  std::vector<std::int32_t> symbols;
  std::int64_t count = 0;
};

struct Candidate {
  std::int64_t count;
  Pair pair;
  // Highest count first; among equal counts the smaller pair (as HF's trainer).
  bool operator<(const Candidate& o) const { return count != o.count ? count < o.count : pair > o.pair; }
};

class PairStats {
 public:
  void add(const TrainWord& w, std::uint32_t index, std::int64_t sign, std::int32_t watch,
           std::unordered_set<Pair>* touched) {
    for (std::size_t i = 0; i + 1 < w.symbols.size(); ++i) {
      Pair p = makePair(w.symbols[i], w.symbols[i + 1]);
      std::int64_t& c = m_count[p];
      c += sign * w.count;
      if (sign > 0 && (watch < 0 || w.symbols[i] == watch || w.symbols[i + 1] == watch)) {
        auto& where = m_where[p];
        if (where.empty() || where.back() != index) where.push_back(index);
        if (touched) touched->insert(p);
      }
    }
  }
  std::int64_t count(Pair p) const {
    auto it = m_count.find(p);
    return it == m_count.end() ? 0 : it->second;
  }
  std::vector<std::uint32_t> takeWhere(Pair p) {
    std::vector<std::uint32_t> out;
    auto it = m_where.find(p);
    if (it != m_where.end()) {
      out.swap(it->second);
      m_where.erase(it);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  const std::unordered_map<Pair, std::int64_t>& counts() const { return m_count; }

 private:
  std::unordered_map<Pair, std::int64_t> m_count;
  std::unordered_map<Pair, std::vector<std::uint32_t>> m_where;
};

// Replaces every non-overlapping (a, b), left to right; true when changed.
bool mergeInWord(std::vector<std::int32_t>& s, std::int32_t a, std::int32_t b, std::int32_t merged) {
  bool changed = false;
  std::size_t out = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
      s[out++] = merged;
      ++i;
      changed = true;
    } else {
      s[out++] = s[i];
    }
  }
  s.resize(out);
  return changed;
}

std::vector<TrainWord> countWords(const std::vector<std::filesystem::path>& files, ProgressSink& progress,
                                  const CancelToken& cancel, std::uint64_t& totalBytes) {
  tok::PreTokenizer pre = tok::PreTokenizer::gpt2ByteLevel();
  std::unordered_map<std::string, std::int64_t, tok::StringHash, std::equal_to<>> counts;
  std::vector<std::string_view> words;
  std::deque<std::string> arena;
  totalBytes = 0;
  for (std::size_t f = 0; f < files.size(); ++f) {
    throwIfCancelled(cancel, "tokenizer training");
    std::string text = readTextFile(files[f]);
    if (!unicode::isValidUtf8(text)) text = unicode::sanitizeUtf8(text);
    totalBytes += text.size();
    words.clear();
    pre.split(text, words, arena);
    for (std::string_view w : words) {
      auto it = counts.find(w);
      if (it == counts.end())
        counts.emplace(std::string(w), 1);
      else
        ++it->second;
    }
    arena.clear();
    progress.progress("count words", static_cast<double>(f + 1), static_cast<double>(files.size()),
                      files[f].filename().string());
  }
  // Sorted, so training does not depend on hash-map order.
  std::vector<std::pair<std::string, std::int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<TrainWord> out;
  out.reserve(sorted.size());
  for (auto& [w, c] : sorted) {
    TrainWord tw;
    tw.count = c;
    for (char ch : w) tw.symbols.push_back(static_cast<std::uint8_t>(ch));
    out.push_back(std::move(tw));
  }
  return out;
}

}  // namespace

void trainBpeTokenizer(const std::vector<std::filesystem::path>& files, const BpeTrainOptions& opts,
                       const std::filesystem::path& outJson, ProgressSink& progress, const CancelToken& cancel) {
  int specials = static_cast<int>(opts.specialTokens.size());
  if (opts.vocabSize < 256 + specials)
    throw Error(ErrorCode::BadInput,
                "tokenizer vocabSize " + std::to_string(opts.vocabSize) + " is smaller than the 256 byte tokens plus " +
                    std::to_string(specials) + " special tokens",
                "Choose a vocabulary of at least 512 tokens.");
  if (files.empty()) throw Error(ErrorCode::BadInput, "tokenizer training needs at least one text file");
  auto t0 = std::chrono::steady_clock::now();
  std::uint64_t totalBytes = 0;
  std::vector<TrainWord> words = countWords(files, progress, cancel, totalBytes);

  std::vector<std::string> tokens;  // raw bytes of every id
  std::unordered_map<std::string, std::int32_t> idOf;
  for (int b = 0; b < 256; ++b) {
    tokens.emplace_back(1, static_cast<char>(b));
    idOf[tokens.back()] = b;
  }
  PairStats stats;
  for (std::uint32_t i = 0; i < words.size(); ++i) stats.add(words[i], i, +1, -1, nullptr);
  std::priority_queue<Candidate> queue;
  for (const auto& [p, c] : stats.counts())
    if (c > 0) queue.push({c, p});

  auto target = static_cast<std::size_t>(opts.vocabSize - specials);
  std::vector<std::pair<std::int32_t, std::int32_t>> merges;
  std::size_t lastReport = 0;
  while (tokens.size() < target && !queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    std::int64_t current = stats.count(top.pair);
    if (current != top.count) {
      if (current > 0) queue.push({current, top.pair});
      continue;
    }
    if (current < std::max(opts.minFrequency, 1)) break;
    auto a = static_cast<std::int32_t>(top.pair >> 32);
    auto b = static_cast<std::int32_t>(top.pair & 0xFFFFFFFFu);
    std::string merged = tokens[static_cast<std::size_t>(a)] + tokens[static_cast<std::size_t>(b)];
    std::int32_t newId;
    if (auto it = idOf.find(merged); it != idOf.end()) {
      newId = it->second;  // the same string from another pair: reuse its id
    } else {
      newId = static_cast<std::int32_t>(tokens.size());
      tokens.push_back(merged);
      idOf.emplace(merged, newId);
    }
    merges.emplace_back(a, b);
    std::unordered_set<Pair> touched;
    for (std::uint32_t wi : stats.takeWhere(top.pair)) {
      TrainWord& w = words[wi];
      TrainWord before = w;
      if (!mergeInWord(w.symbols, a, b, newId)) continue;
      stats.add(before, wi, -1, newId, nullptr);
      stats.add(w, wi, +1, newId, &touched);
    }
    for (Pair p : touched)
      if (std::int64_t c = stats.count(p); c > 0) queue.push({c, p});
    if (merges.size() % 64 == 0) throwIfCancelled(cancel, "tokenizer training");
    if (tokens.size() - lastReport >= std::max<std::size_t>(1, target / 100)) {
      lastReport = tokens.size();
      progress.progress("learn merges", static_cast<double>(tokens.size()), static_cast<double>(target), {});
    }
  }

  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (std::size_t id = 0; id < tokens.size(); ++id) vocab[tok::bytesToToken(tokens[id])] = id;
  nlohmann::ordered_json mergeList = nlohmann::ordered_json::array();
  for (auto [a, b] : merges)
    mergeList.push_back({tok::bytesToToken(tokens[static_cast<std::size_t>(a)]),
                         tok::bytesToToken(tokens[static_cast<std::size_t>(b)])});
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  std::int32_t nextId = static_cast<std::int32_t>(tokens.size());
  for (const auto& s : opts.specialTokens) {
    std::int32_t id;
    if (vocab.contains(s)) {
      id = vocab[s].get<std::int32_t>();
    } else {
      id = nextId++;
      vocab[s] = id;
    }
    added.push_back({{"id", id},
                     {"content", s},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  auto byteLevel = [](bool prefix, bool trim) {
    return nlohmann::ordered_json{
        {"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"trim_offsets", trim}, {"use_regex", true}};
  };
  nlohmann::ordered_json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = added;
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = byteLevel(false, true);
  root["post_processor"] = byteLevel(false, true);
  root["decoder"] = byteLevel(true, true);
  root["model"] = {{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", nullptr},
                   {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr},
                   {"fuse_unk", false},
                   {"byte_fallback", false},
                   {"ignore_merges", false},
                   {"vocab", vocab},
                   {"merges", mergeList}};
  atomicWriteText(outJson, root.dump(1));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.progress("learn merges", static_cast<double>(target), static_cast<double>(target), {});
  progress.log(LogLevel::Info, "trained a " + std::to_string(nextId) + "-token BPE tokenizer (" +
                                   std::to_string(merges.size()) + " merges) on " + std::to_string(totalBytes) +
                                   " bytes in " + std::to_string(seconds) + " s -> " + outJson.string());
}

}  // namespace latentlab
