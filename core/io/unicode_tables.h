// Unicode character classes for the pre-tokenizer scanners: \p{L}, \p{N} and
// White_Space (= \s in Oniguruma / Rust regex), and the o200k regex's
// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}], from generated range tables.
#pragma once

#include <cstddef>
#include <cstdint>

namespace latentlab::unicode {

enum : std::uint8_t {
  kLetter = 1,
  kNumber = 2,
  kSpace = 4,
  kUpperish = 8,   // Lu Lt Lm Lo or a mark
  kLowerish = 16,  // Ll Lm Lo or a mark
  kBasic = kLetter | kNumber | kSpace,
};

struct ClassRange {
  char32_t first;
  char32_t last;
  std::uint8_t flags;
};

extern const ClassRange kClassRanges[];
extern const std::size_t kClassRangeCount;
extern const char* const kUnicodeVersion;

// The class bits of a code point (0 for everything else).
std::uint8_t classOfNonAscii(char32_t cp);

inline std::uint8_t classOf(char32_t cp) {
  if (cp < 0x80) {
    if (cp >= 'a' && cp <= 'z') return kLetter | kLowerish;
    if (cp >= 'A' && cp <= 'Z') return kLetter | kUpperish;
    if (cp >= '0' && cp <= '9') return kNumber;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return kSpace;
    return 0;
  }
  return classOfNonAscii(cp);
}

inline bool isLetter(char32_t cp) {
  return (classOf(cp) & kLetter) != 0;
}
inline bool isNumber(char32_t cp) {
  return (classOf(cp) & kNumber) != 0;
}
inline bool isSpace(char32_t cp) {
  return (classOf(cp) & kSpace) != 0;
}

}  // namespace latentlab::unicode
