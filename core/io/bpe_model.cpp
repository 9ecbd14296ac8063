// BPE vocabulary/merges loading and the merge loop (HF Word::merge_all order:
// lowest rank first, leftmost first among equal ranks).
#include "io/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "io/unicode_text.h"
#include "latentlab/error.h"

namespace latentlab::tok {
namespace {

struct ByteMap {
  std::array<char32_t, 256> toSymbol{};
  std::unordered_map<char32_t, int> toByte;
  ByteMap() {
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      toSymbol[static_cast<std::size_t>(b)] =
          printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      toByte[toSymbol[static_cast<std::size_t>(b)]] = b;
    }
  }
};

const ByteMap& byteMap() {
  static const ByteMap map;
  return map;
}

[[noreturn]] void bad(const std::string& source, const std::string& field, const std::string& problem) {
  throw Error(ErrorCode::BadData, source + ": field '" + field + "' " + problem,
              "Is this a valid Hugging Face tokenizer.json?");
}

struct HeapItem {
  std::int32_t rank;
  std::int32_t pos;
  bool operator>(const HeapItem& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

struct Symbol {
  std::int32_t id;
  std::int32_t prev;
  std::int32_t next;
};

}  // namespace

char32_t byteToSymbol(std::uint8_t b) {
  return byteMap().toSymbol[b];
}

int symbolToByte(char32_t cp) {
  const auto& m = byteMap().toByte;
  auto it = m.find(cp);
  return it == m.end() ? -1 : it->second;
}

std::string bytesToToken(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) unicode::appendUtf8(out, byteToSymbol(static_cast<std::uint8_t>(c)));
  return out;
}

std::optional<std::string> tokenToBytes(std::string_view token) {
  if (!unicode::isValidUtf8(token)) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < token.size();) {
    int b = symbolToByte(unicode::nextCodePoint(token, i));
    if (b < 0) return std::nullopt;
    out += static_cast<char>(b);
  }
  return out;
}

std::size_t StringHash::operator()(std::string_view s) const noexcept {
  return std::hash<std::string_view>{}(s);
}

void MergeTable::reserve(std::size_t n) {
  std::size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  m_slots.assign(cap, Entry{});
  m_mask = cap - 1;
  m_size = 0;
}

std::size_t MergeTable::slot(std::uint64_t key) const {
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> 29) & m_mask;
}

void MergeTable::insert(std::int32_t a, std::int32_t b, std::int32_t rank, std::int32_t merged) {
  if ((m_size + 1) * 2 > m_slots.size()) {
    std::vector<Entry> old;
    old.swap(m_slots);
    reserve(std::max<std::size_t>(m_size + 1, old.size()));
    for (const auto& e : old)
      if (e.key != kEmpty)
        insert(static_cast<std::int32_t>(e.key >> 32), static_cast<std::int32_t>(e.key & 0xFFFFFFFF), e.rank, e.merged);
  }
  std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  for (std::size_t i = slot(key);; i = (i + 1) & m_mask) {
    Entry& e = m_slots[i];
    if (e.key == kEmpty) {
      e = {key, rank, merged};
      ++m_size;
      return;
    }
    if (e.key == key) {
      e.rank = rank;
      e.merged = merged;
      return;
    }
  }
}

const MergeTable::Entry* MergeTable::find(std::int32_t a, std::int32_t b) const {
  if (m_size == 0) return nullptr;
  std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  for (std::size_t i = slot(key);; i = (i + 1) & m_mask) {
    const Entry& e = m_slots[i];
    if (e.key == key) return &e;
    if (e.key == kEmpty) return nullptr;
  }
}

BpeModel::BpeModel() : m_cache(std::make_unique<WordCache>()) {}

BpeModel BpeModel::fromJson(const nlohmann::json& model, const std::string& source, bool byteLevel) {
  BpeModel m;
  m.m_byteLevel = byteLevel;
  auto unsupported = [&](const std::string& what) {
    throw Error(ErrorCode::Unsupported, source + ": BPE " + what + " is not supported yet",
                "LatentLab reads byte-level BPE tokenizers (GPT-2, SmolLM, Llama-3 style).");
  };
  auto optString = [&](const char* key) -> std::optional<std::string> {
    if (!model.contains(key) || model.at(key).is_null()) return std::nullopt;
    if (!model.at(key).is_string()) bad(source, std::string("model.") + key, "must be a string or null");
    return model.at(key).get<std::string>();
  };
  auto optBool = [&](const char* key) {
    if (!model.contains(key) || model.at(key).is_null()) return false;
    if (!model.at(key).is_boolean()) bad(source, std::string("model.") + key, "must be true or false");
    return model.at(key).get<bool>();
  };
  m.m_byteFallback = optBool("byte_fallback");
  if (auto p = optString("continuing_subword_prefix"); p && !p->empty()) unsupported("continuing_subword_prefix");
  if (auto p = optString("end_of_word_suffix"); p && !p->empty()) unsupported("end_of_word_suffix");
  if (model.contains("dropout") && !model.at("dropout").is_null()) {
    if (!model.at("dropout").is_number()) bad(source, "model.dropout", "must be a number or null");
    if (model.at("dropout").get<double>() > 0.0) unsupported("dropout (random merges)");
  }
  m.m_ignoreMerges = optBool("ignore_merges");
  m.m_fuseUnk = optBool("fuse_unk");

  if (!model.contains("vocab") || !model.at("vocab").is_object())
    bad(source, "model.vocab", "is missing or not an object");
  const auto& vocab = model.at("vocab");
  std::int32_t maxId = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || (!it.value().is_number_unsigned() && it.value().get<long long>() < 0))
      bad(source, "model.vocab[\"" + it.key() + "\"]", "must be a non-negative integer id, got " + it.value().dump());
    if (it.value().is_number_unsigned()
            ? it.value().get<unsigned long long>() >= static_cast<unsigned long long>(kMaxTokenIds)
            : it.value().get<long long>() >= kMaxTokenIds)
      bad(source, "model.vocab[\"" + it.key() + "\"]",
          "id " + it.value().dump() + " is beyond the largest vocabulary LatentLab accepts (" +
              std::to_string(kMaxTokenIds) + " ids)");
    auto id = static_cast<std::int32_t>(it.value().get<long long>());
    m.m_vocab[it.key()] = id;
    maxId = std::max(maxId, id);
  }
  m.m_idToToken.assign(static_cast<std::size_t>(maxId + 1), std::string());
  m.m_present.assign(static_cast<std::size_t>(maxId + 1), false);
  m.m_byteIds.fill(-1);
  for (const auto& [token, id] : m.m_vocab) {
    m.m_idToToken[static_cast<std::size_t>(id)] = token;
    m.m_present[static_cast<std::size_t>(id)] = true;
    if (byteLevel) {
      if (auto bytes = tokenToBytes(token)) {
        if (bytes->size() == 1) m.m_byteIds[static_cast<std::uint8_t>((*bytes)[0])] = id;
        m.m_symbols[*bytes] = id;
      }
    } else {
      m.m_symbols[token] = id;
    }
  }

  if (!model.contains("merges") || !model.at("merges").is_array())
    bad(source, "model.merges", "is missing or not an array");
  const auto& merges = model.at("merges");
  m.m_merges.reserve(merges.size());
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const auto& e = merges[r];
    std::string field = "model.merges[" + std::to_string(r) + "]";
    std::string a, b;
    if (e.is_string()) {
      std::string line = e.get<std::string>();
      auto sp = line.find(' ');
      if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
        bad(source, field, "must be two tokens separated by one space, got " + e.dump());
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      bad(source, field, "must be \"a b\" or [\"a\", \"b\"], got " + e.dump());
    }
    auto ia = m.m_vocab.find(a);
    auto ib = m.m_vocab.find(b);
    auto iab = m.m_vocab.find(a + b);
    if (ia == m.m_vocab.end() || ib == m.m_vocab.end() || iab == m.m_vocab.end())
      bad(source, field, "names a token that is not in model.vocab: " + e.dump());
    m.m_merges.insert(ia->second, ib->second, static_cast<std::int32_t>(r), iab->second);
  }
  if (m.m_byteFallback) {
    // SentencePiece style: every byte must have its <0xNN> token.
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      auto it = m.m_vocab.find(std::string_view(name));
      if (it == m.m_vocab.end())
        bad(source, "model.vocab", std::string("has byte_fallback: true but no byte token ") + name);
      m.m_fallbackIds[static_cast<std::size_t>(b)] = it->second;
    }
  }
  if (auto unk = optString("unk_token")) {
    auto it = m.m_vocab.find(*unk);
    if (it == m.m_vocab.end()) bad(source, "model.unk_token", "names a token that is not in model.vocab: " + *unk);
    m.m_unk = it->second;
  }
  return m;
}

bool BpeModel::hasId(std::int32_t id) const {
  return id >= 0 && id < idLimit() && m_present[static_cast<std::size_t>(id)];
}

std::optional<std::int32_t> BpeModel::idOf(const std::string& token) const {
  auto it = m_vocab.find(token);
  if (it == m_vocab.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encodeWord(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (m_byteLevel && word.size() == 1) {
    std::int32_t id = m_byteIds[static_cast<std::uint8_t>(word[0])];
    if (id >= 0)
      out.push_back(id);
    else if (m_unk)
      out.push_back(*m_unk);
    return;
  }
  if (m_ignoreMerges) {
    auto it = m_symbols.find(word);
    if (it != m_symbols.end()) {
      out.push_back(it->second);
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(m_cache->mutex);
    auto it = m_cache->words.find(word);
    if (it != m_cache->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::size_t start = out.size();
  mergeWord(word, out);
  if (word.size() > kCacheMaxWordBytes) return;
  std::lock_guard<std::mutex> lock(m_cache->mutex);
  if (m_cache->words.size() >= kCacheLimit) m_cache->words.clear();
  m_cache->words.emplace(std::string(word),
                         std::vector<std::int32_t>(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()));
}

void BpeModel::mergeWord(std::string_view word, std::vector<std::int32_t>& out) const {
  thread_local std::vector<Symbol> sym;
  thread_local std::vector<HeapItem> heap;
  sym.clear();
  heap.clear();
  auto add = [&](std::int32_t id) {
    auto n = static_cast<std::int32_t>(sym.size());
    sym.push_back({id, n - 1, -1});
    if (n > 0) sym[static_cast<std::size_t>(n - 1)].next = n;
  };
  // HF keeps an unknown character pending (fused with the next unknown ones
  // under fuse_unk) and writes it when the next known character comes or the
  // word ends; <0xNN> byte tokens are written at once.
  bool unkPending = false;
  for (std::size_t i = 0; i < word.size();) {
    std::int32_t id = -1;
    std::size_t b = i;
    if (m_byteLevel) {
      id = m_byteIds[static_cast<std::uint8_t>(word[i])];
      ++i;
    } else {
      unicode::nextCodePoint(word, i);
      auto it = m_symbols.find(word.substr(b, i - b));
      if (it != m_symbols.end()) id = it->second;
    }
    if (id >= 0) {
      if (unkPending) add(*m_unk);
      unkPending = false;
      add(id);
    } else if (m_byteFallback && !m_byteLevel) {
      for (std::size_t k = b; k < i; ++k) add(m_fallbackIds[static_cast<std::uint8_t>(word[k])]);
    } else if (m_unk) {
      if (unkPending && !m_fuseUnk) add(*m_unk);
      unkPending = true;
    }
  }
  if (unkPending) add(*m_unk);
  auto push = [&](std::int32_t pos) {
    const Symbol& s = sym[static_cast<std::size_t>(pos)];
    if (s.next < 0) return;
    if (const auto* e = m_merges.find(s.id, sym[static_cast<std::size_t>(s.next)].id)) {
      heap.push_back({e->rank, pos});
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  for (std::int32_t p = 0; p + 1 < static_cast<std::int32_t>(sym.size()); ++p) push(p);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    HeapItem top = heap.back();
    heap.pop_back();
    Symbol& s = sym[static_cast<std::size_t>(top.pos)];
    if (s.id < 0 || s.next < 0) continue;
    Symbol& right = sym[static_cast<std::size_t>(s.next)];
    const auto* e = m_merges.find(s.id, right.id);
    if (e == nullptr || e->rank != top.rank) continue;
    s.id = e->merged;
    std::int32_t after = right.next;
    right.id = -1;
    s.next = after;
    if (after >= 0) sym[static_cast<std::size_t>(after)].prev = top.pos;
    if (s.prev >= 0) push(s.prev);
    push(top.pos);
  }
  for (std::int32_t p = sym.empty() ? -1 : 0; p >= 0; p = sym[static_cast<std::size_t>(p)].next)
    out.push_back(sym[static_cast<std::size_t>(p)].id);
}

}  // namespace latentlab::tok
