// Pre-tokenizers of HF tokenizer.json (ByteLevel, Split, Digits, Metaspace,
// Sequence): they cut text into the words that BPE encodes, as hand-written
// scanners.
#pragma once

#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace latentlab::tok {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// The regexes we recognise, implemented as scanners over code points.
enum class PatternKind {
  Gpt2,     // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Llama3,   // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
  O200k,    // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?|... (Phi-4-mini)
  Digit,    // one \p{N} code point (the Digits pre-tokenizer)
  Literal,  // a plain string (Split with {"String": ...})
};

struct Segment {
  std::size_t begin;
  std::size_t end;
  bool isMatch;
};

// One step of the pre-tokenizer pipeline.
struct PreTokStep {
  enum class Kind { Split, ByteLevel, Metaspace };
  enum class Prepend { Always, First, Never };
  Kind kind = Kind::Split;
  PatternKind pattern = PatternKind::Gpt2;
  int maxDigits = 3;    // Llama3: \p{N}{1,maxDigits}
  std::string literal;  // Literal
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool addPrefixSpace = false;               // ByteLevel
  bool useRegex = true;                      // ByteLevel
  std::string replacement = "\xE2\x96\x81";  // Metaspace: U+2581 stands for a space
  Prepend prependScheme = Prepend::Always;   // Metaspace: where a replacement is prepended
  bool splitWords = true;                    // Metaspace: a word begins at each replacement
};

// End of the regex match starting at s[i] (i itself when nothing matches).
std::size_t matchGpt2(std::string_view s, std::size_t i);
std::size_t matchLlama3(std::string_view s, std::size_t i, int maxDigits);
std::size_t matchO200k(std::string_view s, std::size_t i);

// Appends the matches and the gaps between them covering s (HF find_matches).
void findSegments(const PreTokStep& step, std::string_view s, std::vector<Segment>& out);

class PreTokenizer {
 public:
  // `j` is the "pre_tokenizer" value (null allowed); throws Error(BadData)
  // naming `source` and the field, Error(Unsupported) for other types/regexes.
  static PreTokenizer fromJson(const nlohmann::json& j, const std::string& source);
  static PreTokenizer gpt2ByteLevel();

  // True when a ByteLevel step maps bytes to symbols (BPE works on bytes).
  bool byteLevel() const { return m_byteLevel; }

  // Cuts `text` into words (views into text or into strings kept in arena).
  // `atStart`: text begins the input (Metaspace's prepend_scheme "first").
  void split(std::string_view text, std::vector<std::string_view>& out, std::deque<std::string>& arena,
             bool atStart = true) const;

 private:
  std::vector<PreTokStep> m_steps;
  bool m_byteLevel = false;
};

}  // namespace latentlab::tok
