// UTF-8 helpers for the tokenizer: decoding one code point, replacing invalid
// sequences by U+FFFD, and the class lookup over the generated tables.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace latentlab::unicode {

// Decodes the code point at s[i] of VALID UTF-8 and advances i past it.
inline char32_t nextCodePoint(std::string_view s, std::size_t& i) {
  auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  auto cont = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
  char32_t cp;
  if (b0 < 0xE0) {
    cp = (static_cast<char32_t>(b0 & 0x1F) << 6) | cont(1);
    i += 2;
  } else if (b0 < 0xF0) {
    cp = (static_cast<char32_t>(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
    i += 3;
  } else {
    cp = (static_cast<char32_t>(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    i += 4;
  }
  return cp;
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not.
std::size_t validSequenceLength(std::string_view s, std::size_t i);

// True when the whole string is valid UTF-8.
bool isValidUtf8(std::string_view s);

// Replaces every maximal invalid subsequence by U+FFFD, following Unicode's
// "maximal subpart" practice (as Python's errors="replace", Rust's
// from_utf8_lossy and WHATWG do): a stray byte becomes one U+FFFD, a
// truncated multi-byte sequence becomes one U+FFFD.
std::string sanitizeUtf8(std::string_view s);

void appendUtf8(std::string& out, char32_t cp);

}  // namespace latentlab::unicode
