// Scanners for the GPT-2, Llama-3 and o200k (Phi-4-mini) pre-tokenizer
// regexes with the exact leftmost-first, greedy, backtracking semantics of Oniguruma.
#include "io/pretokenizer.h"
#include "io/unicode_tables.h"
#include "io/unicode_text.h"

namespace latentlab::tok {
namespace {

using unicode::kBasic;
using unicode::kLetter;
using unicode::kLowerish;
using unicode::kNumber;
using unicode::kSpace;
using unicode::kUpperish;

// \p{L}, \p{N} and \s bits only (the scanners of GPT-2 and Llama-3 test them alone).
std::uint8_t classOf(char32_t cp) {
  return unicode::classOf(cp) & kBasic;
}

char32_t peek(std::string_view s, std::size_t i, std::size_t& next) {
  next = i;
  return unicode::nextCodePoint(s, next);
}

// End of the run of code points whose class has any bit of `mask`.
std::size_t runOf(std::string_view s, std::size_t i, std::uint8_t mask) {
  std::size_t n = s.size();
  while (i < n) {
    std::size_t next;
    char32_t cp = peek(s, i, next);
    if ((classOf(cp) & mask) == 0) break;
    i = next;
  }
  return i;
}

// End of the run of [^\s\p{L}\p{N}].
std::size_t runOther(std::string_view s, std::size_t i) {
  std::size_t n = s.size();
  while (i < n) {
    std::size_t next;
    char32_t cp = peek(s, i, next);
    if (classOf(cp) != 0) break;
    i = next;
  }
  return i;
}

struct SpaceRun {
  std::size_t end;        // end of the whitespace run
  std::size_t lastStart;  // start of its last code point
  std::size_t lastNl;     // one past the last \r or \n in it, or npos
  int count;
};

SpaceRun spaceRun(std::string_view s, std::size_t i) {
  SpaceRun r{i, i, std::string_view::npos, 0};
  std::size_t n = s.size();
  while (r.end < n) {
    std::size_t next;
    char32_t cp = peek(s, r.end, next);
    if ((classOf(cp) & kSpace) == 0) break;
    if (cp == '\r' || cp == '\n') r.lastNl = next;
    r.lastStart = r.end;
    r.end = next;
    ++r.count;
  }
  return r;
}

// \s+(?!\S)|\s+ at a whitespace code point.
std::size_t trailingSpace(const SpaceRun& r, std::size_t n) {
  if (r.end == n || r.count < 2) return r.end;
  return r.lastStart;
}

// 's|'t|'re|'ve|'m|'ll|'d after the apostrophe at s[i]; returns i on no match.
std::size_t contraction(std::string_view s, std::size_t i, bool ignoreCase) {
  std::size_t j = i + 1;
  std::size_t n = s.size();
  if (j >= n) return i;
  std::size_t k;
  char32_t a = peek(s, j, k);
  auto low = [&](char32_t c) -> char32_t {
    if (!ignoreCase) return c;
    if (c == 0x17F) return 's';  // LATIN SMALL LETTER LONG S folds to s
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  };
  a = low(a);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return k;
  if (k >= n) return i;
  std::size_t k2;
  char32_t b = low(peek(s, k, k2));
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return k2;
  return i;
}

// [U]*[L]+ from j, U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], L = [\p{Ll}\p{Lm}\p{Lo}\p{M}]:
// the greedy U run, then the greedy L run; with no L after it, the U run
// gives back code points until one of them is also in L (which then ends
// the L run, the next being no L). npos when no split matches.
std::size_t upperThenLower(std::string_view s, std::size_t j) {
  const std::size_t n = s.size(), none = std::string_view::npos;
  std::size_t a = j, lastBoth = none;
  while (a < n) {
    std::size_t next;
    const std::uint8_t c = unicode::classOf(peek(s, a, next));
    if ((c & kUpperish) == 0) break;
    if (c & kLowerish) lastBoth = next;
    a = next;
  }
  std::size_t b = a;
  while (b < n) {
    std::size_t next;
    if ((unicode::classOf(peek(s, b, next)) & kLowerish) == 0) break;
    b = next;
  }
  return b > a ? b : lastBoth;
}

// [U]+[L]*: npos without a U at j.
std::size_t upperAndLower(std::string_view s, std::size_t j) {
  const std::size_t n = s.size();
  std::size_t a = j;
  while (a < n) {
    std::size_t next;
    if ((unicode::classOf(peek(s, a, next)) & kUpperish) == 0) break;
    a = next;
  }
  if (a == j) return std::string_view::npos;
  while (a < n) {
    std::size_t next;
    if ((unicode::classOf(peek(s, a, next)) & kLowerish) == 0) break;
    a = next;
  }
  return a;
}

}  // namespace

std::size_t matchO200k(std::string_view s, std::size_t i) {
  const std::size_t n = s.size(), none = std::string_view::npos;
  std::size_t j1;
  const char32_t cp0 = peek(s, i, j1);
  const std::uint8_t c0 = classOf(cp0);
  // [^\r\n\p{L}\p{N}]? before the letters of the first two alternatives.
  const bool prefix = cp0 != '\r' && cp0 != '\n' && (c0 & (kLetter | kNumber)) == 0;
  auto withContraction = [&](std::size_t e) {
    if (e < n && s[e] == '\'') return contraction(s, e, /*ignoreCase=*/true);
    return e;
  };
  // [P]?[U]*[L]+('s...)?  then  [P]?[U]+[L]*('s...)?, each with the prefix first.
  for (auto letters : {upperThenLower, upperAndLower}) {
    if (prefix && j1 < n) {
      if (std::size_t e = letters(s, j1); e != none) return withContraction(e);
    }
    if (std::size_t e = letters(s, i); e != none) return withContraction(e);
  }
  // \p{N}{1,3}
  if (c0 & kNumber) {
    std::size_t e = j1;
    for (int d = 1; d < 3 && e < n; ++d) {
      std::size_t next;
      if ((classOf(peek(s, e, next)) & kNumber) == 0) break;
      e = next;
    }
    return e;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
  std::uint8_t c1 = 0xFF;
  std::size_t j2 = j1;
  if (j1 < n) c1 = classOf(peek(s, j1, j2));
  std::size_t e = none;
  if (cp0 == ' ' && c1 == 0)
    e = runOther(s, j2);
  else if (c0 == 0)
    e = runOther(s, j1);
  if (e != none) {
    while (e < n && (s[e] == '\r' || s[e] == '\n' || s[e] == '/')) ++e;
    return e;
  }
  // \s*[\r\n]+ then \s+(?!\S) then \s+
  SpaceRun r = spaceRun(s, i);
  if (r.lastNl != none) return r.lastNl;
  return trailingSpace(r, n);
}

std::size_t matchGpt2(std::string_view s, std::size_t i) {
  std::size_t n = s.size();
  std::size_t j1;
  char32_t cp0 = peek(s, i, j1);
  if (cp0 == '\'') {
    std::size_t e = contraction(s, i, false);
    if (e != i) return e;
  }
  std::uint8_t c0 = classOf(cp0);
  if (cp0 == ' ' && j1 < n) {
    std::size_t j2;
    std::uint8_t c1 = classOf(peek(s, j1, j2));
    if (c1 & kLetter) return runOf(s, j2, kLetter);
    if (c1 & kNumber) return runOf(s, j2, kNumber);
    if (c1 == 0) return runOther(s, j2);
  }
  if (c0 & kLetter) return runOf(s, j1, kLetter);
  if (c0 & kNumber) return runOf(s, j1, kNumber);
  if (c0 == 0) return runOther(s, j1);
  return trailingSpace(spaceRun(s, i), n);
}

std::size_t matchLlama3(std::string_view s, std::size_t i, int maxDigits) {
  std::size_t n = s.size();
  std::size_t j1;
  char32_t cp0 = peek(s, i, j1);
  if (cp0 == '\'') {
    std::size_t e = contraction(s, i, true);
    if (e != i) return e;
  }
  std::uint8_t c0 = classOf(cp0);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c0 & kLetter) return runOf(s, j1, kLetter);
  std::uint8_t c1 = 0xFF;
  std::size_t j2 = j1;
  if (j1 < n) c1 = classOf(peek(s, j1, j2));
  if ((c0 & kNumber) == 0 && cp0 != '\r' && cp0 != '\n' && c1 != 0xFF && (c1 & kLetter)) return runOf(s, j2, kLetter);
  // \p{N}{1,maxDigits}
  if (c0 & kNumber) {
    std::size_t e = j1;
    for (int d = 1; d < maxDigits && e < n; ++d) {
      std::size_t next;
      if ((classOf(peek(s, e, next)) & kNumber) == 0) break;
      e = next;
    }
    return e;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  std::size_t e = std::string_view::npos;
  if (cp0 == ' ' && c1 == 0)
    e = runOther(s, j2);
  else if (c0 == 0)
    e = runOther(s, j1);
  if (e != std::string_view::npos) {
    while (e < n && (s[e] == '\r' || s[e] == '\n')) ++e;
    return e;
  }
  // \s*[\r\n]+ then \s+(?!\S) then \s+
  SpaceRun r = spaceRun(s, i);
  if (r.lastNl != std::string_view::npos) return r.lastNl;
  return trailingSpace(r, n);
}

}  // namespace latentlab::tok
