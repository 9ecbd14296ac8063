// Tokenizer encode/decode: added tokens first, then the pre-tokenizer, then
// BPE per word; decode maps ids back through the ByteLevel decoder.
#include "io/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <string>

#include "io/tokenizer_impl.h"
#include "io/unicode_nfc.h"
#include "io/unicode_text.h"
#include "latentlab/error.h"

namespace latentlab {
namespace {

// Every occurrence of `pattern` (not empty) in s replaced by `content`, left to right.
void replaceAll(std::string& s, const std::string& pattern, const std::string& content) {
  if (pattern.empty()) return;
  std::string out;
  out.reserve(s.size());
  std::size_t at = 0;
  for (std::size_t hit = s.find(pattern); hit != std::string::npos; hit = s.find(pattern, at)) {
    out.append(s, at, hit - at);
    out += content;
    at = hit + pattern.size();
  }
  out.append(s, at, std::string::npos);
  s.swap(out);
}

}  // namespace

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
    // HF keeps a normalized added token under its normalized content, and
    // decodes that (Llama-2's "plugh" decodes as "▁plugh", i.e. " plugh").
    tokenOf[static_cast<std::size_t>(t.id)] = t.normalized ? normalize(t.content) : t.content;
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
  // HF matches normalized added tokens by their normalized content.
  std::vector<AddedToken> normalizedAdded = added;
  for (auto& t : normalizedAdded) {
    if (t.normalized) t.content = normalize(t.content);
  }
  normalizedMatcher.build(normalizedAdded, /*normalized=*/true);

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

std::string tok::TokenizerState::normalize(std::string_view text) const {
  std::string s(text);
  for (const NormalizerStep& step : normalizer) {
    switch (step.kind) {
      case NormalizerStep::Kind::Prepend:
        if (!s.empty()) s.insert(0, step.text);
        break;
      case NormalizerStep::Kind::Replace:
        replaceAll(s, step.text, step.content);
        break;
      case NormalizerStep::Kind::Nfc:
        s = unicode::toNfc(s);
        break;
    }
  }
  return s;
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

  // Added tokens that are not normalized split the raw text; each piece in
  // between is normalized, then split by the normalized added tokens, then
  // pre-tokenized and encoded word by word (HF's order).
  std::vector<tok::TextPiece> first;
  if (d.rawMatcher.empty())
    first.push_back({0, text.size(), -1});
  else
    d.rawMatcher.split(text, 0, text.size(), first);
  std::vector<tok::TextPiece> pieces;
  std::vector<std::string_view> words;
  std::deque<std::string> arena;
  std::string normalized;
  for (const auto& raw : first) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    std::string_view piece = text.substr(raw.begin, raw.end - raw.begin);
    if (!d.normalizer.empty()) {
      normalized = d.normalize(piece);
      piece = normalized;
    }
    pieces.clear();
    if (d.normalizedMatcher.empty())
      pieces.push_back({0, piece.size(), -1});
    else
      d.normalizedMatcher.split(piece, 0, piece.size(), pieces);
    for (const auto& p : pieces) {
      if (p.id >= 0) {
        ids.push_back(p.id);
        continue;
      }
      words.clear();
      d.pre.split(piece.substr(p.begin, p.end - p.begin), words, arena, raw.begin == 0 && p.begin == 0);
      for (std::string_view w : words) d.model.encodeWord(w, ids);
      arena.clear();
    }
  }
  if (addSpecial) ids.insert(ids.end(), d.suffix.begin(), d.suffix.end());
  return ids;
}

namespace {

// HF's decoders applied in order to the token strings, then concatenated.
std::string decodeChain(const tok::TokenizerState& d, const std::vector<std::int32_t>& ids, bool skipSpecial) {
  using Kind = tok::DecoderStep::Kind;
  using IdKind = tok::TokenizerState::IdKind;
  std::vector<std::string> tokens;
  for (std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= d.kindOf.size()) continue;
    const IdKind kind = d.kindOf[static_cast<std::size_t>(id)];
    if (kind == IdKind::Unused || (skipSpecial && kind == IdKind::Special)) continue;
    tokens.push_back(d.tokenOf[static_cast<std::size_t>(id)]);
  }
  for (const tok::DecoderStep& step : d.decoders) {
    switch (step.kind) {
      case Kind::ByteLevel: {  // every token's symbols back to bytes, as one (repaired) string
        std::string bytes;
        for (const auto& t : tokens) {
          auto b = tok::tokenToBytes(t);
          bytes += b ? *b : t;
        }
        tokens.assign(1, unicode::isValidUtf8(bytes) ? bytes : unicode::sanitizeUtf8(bytes));
        break;
      }
      case Kind::Replace:
        for (auto& t : tokens) replaceAll(t, step.pattern, step.content);
        break;
      case Kind::ByteFallback: {  // runs of <0xNN> tokens become their bytes (U+FFFD each when not UTF-8)
        std::vector<std::string> out;
        std::string run;
        std::size_t runTokens = 0;
        auto flush = [&] {
          if (runTokens == 0) return;
          if (unicode::isValidUtf8(run)) {
            out.push_back(run);
          } else {
            for (std::size_t k = 0; k < runTokens; ++k) out.emplace_back("\xEF\xBF\xBD");
          }
          run.clear();
          runTokens = 0;
        };
        for (auto& t : tokens) {
          auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
          if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(t[3]) && hex(t[4])) {
            run.push_back(static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
            ++runTokens;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens.swap(out);
        break;
      }
      case Kind::Fuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens.assign(1, all);
        break;
      }
      case Kind::Strip:
        for (auto& t : tokens) {
          // At most `start` leading and `stop` trailing copies of the character.
          std::size_t b = 0, e = t.size();
          for (int k = 0; k < step.start && t.compare(b, step.content.size(), step.content) == 0 && b < e; ++k)
            b += step.content.size();
          for (int k = 0; k < step.stop && e >= b + step.content.size() &&
                          t.compare(e - step.content.size(), step.content.size(), step.content) == 0;
               ++k)
            e -= step.content.size();
          t = t.substr(b, e - b);
        }
        break;
      case Kind::Metaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          // The replacement is a space again, except in the first token when one was prepended.
          std::string out;
          const std::string& t = tokens[i];
          for (std::size_t at = 0; at < t.size();) {
            if (t.compare(at, step.replacement.size(), step.replacement) == 0) {
              if (!(i == 0 && step.prepended)) out += ' ';
              at += step.replacement.size();
            } else {
              out += t[at++];
            }
          }
          tokens[i] = std::move(out);
        }
        break;
    }
  }
  std::string text;
  for (const auto& t : tokens) text += t;
  return text;
}

}  // namespace

std::string Tokenizer::decode(const std::vector<std::int32_t>& ids, bool skipSpecial) const {
  const Impl& d = *m_impl;
  if (d.decoder == Impl::Decoder::Chain) return decodeChain(d, ids, skipSpecial);
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

void requireTokenizerFits(const Tokenizer& tok, int modelVocab, const std::filesystem::path& modelConfig) {
  if (tok.vocabSize() <= modelVocab) return;
  throw Error(ErrorCode::BadData,
              tok.source().string() + ": the tokenizer has " + std::to_string(tok.vocabSize()) +
                  " token ids but the model (" + modelConfig.string() + ") has vocab_size " +
                  std::to_string(modelVocab),
              "Use the tokenizer.json that came with the model (ids beyond its embedding rows cannot be looked up).");
}

}  // namespace latentlab
