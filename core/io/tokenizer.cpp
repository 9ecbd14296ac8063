// Tokenizer encode/decode: added tokens first, then the pre-tokenizer, then
// BPE per word; decode maps ids back through the ByteLevel decoder.
#include "io/tokenizer.h"

#include <algorithm>
#include <deque>

#include "io/tokenizer_impl.h"
#include "io/unicode_text.h"

namespace latentlab {

void tok::TokenizerState::finish() {
  std::int32_t limit = model.idLimit();
  for (const auto& t : added) limit = std::max(limit, t.id + 1);
  auto n = static_cast<std::size_t>(limit);
  tokenOf.assign(n, std::string());
  kindOf.assign(n, IdKind::Unused);
  for (std::int32_t id = 0; id < model.idLimit(); ++id) {
    if (!model.hasId(id)) continue;
    tokenOf[static_cast<std::size_t>(id)] = model.tokenString(id);
    kindOf[static_cast<std::size_t>(id)] = IdKind::Normal;
  }
  for (const auto& t : added) {
    tokenOf[static_cast<std::size_t>(t.id)] = t.content;
    kindOf[static_cast<std::size_t>(t.id)] = t.special ? IdKind::Special : IdKind::Normal;
    addedByContent[t.content] = t.id;
  }
  bytesOf.assign(n, std::string());
  for (std::size_t id = 0; id < n; ++id) {
    // HF's ByteLevel decoder: map every char back to its byte, or keep the
    // token's own UTF-8 when one char is not a byte symbol.
    auto bytes = tok::tokenToBytes(tokenOf[id]);
    bytesOf[id] = bytes ? *bytes : tokenOf[id];
  }
  rawMatcher.build(added, /*normalized=*/false);
  normalizedMatcher.build(added, /*normalized=*/true);

  auto find = [&](std::initializer_list<const char*> names) -> std::optional<std::int32_t> {
    for (const char* name : names) {
      auto it = addedByContent.find(name);
      if (it != addedByContent.end()) return it->second;
      if (auto id = model.idOf(name)) return id;
    }
    return std::nullopt;
  };
  bos = prefix.empty() ? find({"<|begin_of_text|>", "<s>", "<|startoftext|>", "<bos>"}) : prefix.front();
  eos = find({"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|im_end|>", "<|eot_id|>"});
  if (!eos && !suffix.empty()) eos = suffix.back();
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<std::int32_t> Tokenizer::encode(std::string_view input, bool addSpecial) const {
  const Impl& d = *m_impl;
  std::string repaired;
  std::string_view text = input;
  if (!unicode::isValidUtf8(input)) {
    repaired = unicode::sanitizeUtf8(input);
    text = repaired;
  }
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (addSpecial) ids.insert(ids.end(), d.prefix.begin(), d.prefix.end());

  std::vector<tok::TextPiece> first;
  std::vector<tok::TextPiece> pieces;
  if (d.rawMatcher.empty())
    first.push_back({0, text.size(), -1});
  else
    d.rawMatcher.split(text, 0, text.size(), first);
  if (d.normalizedMatcher.empty()) {
    pieces.swap(first);
  } else {
    for (const auto& p : first) {
      if (p.id >= 0)
        pieces.push_back(p);
      else
        d.normalizedMatcher.split(text, p.begin, p.end, pieces);
    }
  }

  std::vector<std::string_view> words;
  std::deque<std::string> arena;
  for (const auto& p : pieces) {
    if (p.id >= 0) {
      ids.push_back(p.id);
      continue;
    }
    words.clear();
    d.pre.split(text.substr(p.begin, p.end - p.begin), words, arena);
    for (std::string_view w : words) d.model.encodeWord(w, ids);
    arena.clear();
  }
  if (addSpecial) ids.insert(ids.end(), d.suffix.begin(), d.suffix.end());
  return ids;
}

std::string Tokenizer::decode(const std::vector<std::int32_t>& ids, bool skipSpecial) const {
  const Impl& d = *m_impl;
  std::string out;
  bool firstToken = true;
  for (std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= d.kindOf.size()) continue;
    Impl::IdKind kind = d.kindOf[static_cast<std::size_t>(id)];
    if (kind == Impl::IdKind::Unused || (skipSpecial && kind == Impl::IdKind::Special)) continue;
    if (d.decoder == Impl::Decoder::ByteLevel) {
      out += d.bytesOf[static_cast<std::size_t>(id)];
    } else {
      if (!firstToken) out += ' ';  // HF joins tokens with spaces when there is no decoder
      out += d.tokenOf[static_cast<std::size_t>(id)];
    }
    firstToken = false;
  }
  if (d.decoder == Impl::Decoder::ByteLevel && !unicode::isValidUtf8(out)) return unicode::sanitizeUtf8(out);
  return out;
}

int Tokenizer::vocabSize() const {
  return static_cast<int>(m_impl->kindOf.size());
}

std::optional<std::int32_t> Tokenizer::tokenId(const std::string& token) const {
  auto it = m_impl->addedByContent.find(token);
  if (it != m_impl->addedByContent.end()) return it->second;
  return m_impl->model.idOf(token);
}

std::optional<std::int32_t> Tokenizer::bosId() const {
  return m_impl->bos;
}
std::optional<std::int32_t> Tokenizer::eosId() const {
  return m_impl->eos;
}
std::string Tokenizer::hash() const {
  return m_impl->hash;
}
const std::filesystem::path& Tokenizer::source() const {
  return m_impl->source;
}

}  // namespace latentlab
