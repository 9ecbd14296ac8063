// Added-token matching: a byte trie scanned left to right (aho-corasick
// leftmost-longest semantics), then HF's single_word / lstrip / rstrip rules.
#include "io/tokenizer_added.h"

#include "io/unicode_tables.h"
#include "io/unicode_text.h"

namespace latentlab::tok {
namespace {

// Code point ending just before text[i] (valid UTF-8), and its start.
char32_t previousCodePoint(std::string_view text, std::size_t i, std::size_t& start) {
  start = i - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  std::size_t k = start;
  return unicode::nextCodePoint(text, k);
}

// Rust's char::is_alphanumeric || '_' (approximated by \p{L} | \p{N}).
bool isWordChar(char32_t cp) {
  return cp == '_' || (unicode::classOf(cp) & (unicode::kLetter | unicode::kNumber)) != 0;
}

}  // namespace

void AddedTokenMatcher::build(const std::vector<AddedToken>& tokens, bool normalized) {
  m_tokens.clear();
  m_nodes.assign(1, Node{});
  for (const auto& t : tokens) {
    if (t.normalized != normalized || t.content.empty()) continue;
    m_tokens.push_back(t);
    std::int32_t node = 0;
    for (char c : t.content) {
      auto b = static_cast<unsigned char>(c);
      std::int32_t child = -1;
      for (const auto& [byte, idx] : m_nodes[static_cast<std::size_t>(node)].next)
        if (byte == b) child = idx;
      if (child < 0) {
        child = static_cast<std::int32_t>(m_nodes.size());
        m_nodes[static_cast<std::size_t>(node)].next.emplace_back(b, child);
        m_nodes.push_back(Node{});
      }
      node = child;
    }
    // The same content twice: the later entry wins, as in HF's map.
    m_nodes[static_cast<std::size_t>(node)].token = static_cast<std::int32_t>(m_tokens.size() - 1);
    m_first[static_cast<unsigned char>(t.content[0])] = true;
  }
}

bool AddedTokenMatcher::longestAt(std::string_view text, std::size_t i, std::size_t end, std::int32_t& token,
                                  std::size_t& len) const {
  std::int32_t node = 0;
  bool found = false;
  for (std::size_t k = i; k < end; ++k) {
    auto b = static_cast<unsigned char>(text[k]);
    std::int32_t child = -1;
    for (const auto& [byte, idx] : m_nodes[static_cast<std::size_t>(node)].next)
      if (byte == b) {
        child = idx;
        break;
      }
    if (child < 0) break;
    node = child;
    if (m_nodes[static_cast<std::size_t>(node)].token >= 0) {
      token = m_nodes[static_cast<std::size_t>(node)].token;
      len = k + 1 - i;
      found = true;
    }
  }
  return found;
}

void AddedTokenMatcher::split(std::string_view text, std::size_t begin, std::size_t end,
                              std::vector<TextPiece>& out) const {
  std::size_t startOffset = begin;
  std::size_t i = begin;
  while (i < end) {
    if (!m_first[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    std::int32_t token = -1;
    std::size_t len = 0;
    if (!longestAt(text, i, end, token, len)) {
      ++i;
      continue;
    }
    // Only starts at code point boundaries count (the tokens are valid UTF-8).
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) {
      ++i;
      continue;
    }
    const AddedToken& t = m_tokens[static_cast<std::size_t>(token)];
    std::size_t start = i;
    std::size_t stop = i + len;
    i = stop;  // the matcher resumes after this match even when it is skipped
    if (t.singleWord) {
      std::size_t ps;
      bool startOk = start == begin || !isWordChar(previousCodePoint(text, start, ps));
      std::size_t k = stop;
      bool stopOk = stop == end || !isWordChar(unicode::nextCodePoint(text, k));
      if (!startOk || !stopOk) continue;
    }
    if (t.lstrip) {
      std::size_t s = start;
      while (s > startOffset) {
        std::size_t ps;
        char32_t cp = previousCodePoint(text, s, ps);
        if (!unicode::isSpace(cp)) break;
        s = ps;
      }
      start = s;
    }
    if (t.rstrip) {
      while (stop < end) {
        std::size_t k = stop;
        if (!unicode::isSpace(unicode::nextCodePoint(text, k))) break;
        stop = k;
      }
      i = stop;
    }
    if (startOffset < start) out.push_back({startOffset, start, -1});
    out.push_back({start, stop, t.id});
    startOffset = stop;
  }
  if (startOffset < end) out.push_back({startOffset, end, -1});
}

}  // namespace latentlab::tok
