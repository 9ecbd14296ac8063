// Added tokens of tokenizer.json (special and not): matched in the raw text
// before pre-tokenization, leftmost-longest, with HF's lstrip/rstrip/single_word.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace latentlab::tok {

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool singleWord = false;
  bool normalized = true;
};

// A piece of the input: an added token (id >= 0) or text to pre-tokenize.
struct TextPiece {
  std::size_t begin;
  std::size_t end;
  std::int32_t id;  // -1: plain text
};

// Matches one set of added tokens (HF splits first with the tokens that have
// normalized=false, then with the normalized ones).
class AddedTokenMatcher {
 public:
  void build(const std::vector<AddedToken>& tokens, bool normalized);
  bool empty() const { return m_tokens.empty(); }
  // Splits text[begin, end) into pieces appended to out.
  void split(std::string_view text, std::size_t begin, std::size_t end, std::vector<TextPiece>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::int32_t>> next;
    std::int32_t token = -1;  // index into m_tokens
  };
  // Longest token starting at text[i] (before `end`): index and length.
  bool longestAt(std::string_view text, std::size_t i, std::size_t end, std::int32_t& token, std::size_t& len) const;

  std::vector<AddedToken> m_tokens;
  std::vector<Node> m_nodes;
  bool m_first[256] = {};
};

}  // namespace latentlab::tok
