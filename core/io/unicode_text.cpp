// UTF-8 validation and repair, and the binary search over the class ranges.
#include "io/unicode_text.h"

#include "io/unicode_tables.h"

namespace latentlab::unicode {

std::uint8_t classOfNonAscii(char32_t cp) {
  std::size_t lo = 0;
  std::size_t hi = kClassRangeCount;
  while (lo < hi) {
    std::size_t mid = (lo + hi) / 2;
    const ClassRange& r = kClassRanges[mid];
    if (cp < r.first)
      hi = mid;
    else if (cp > r.last)
      lo = mid + 1;
    else
      return r.flags;
  }
  return 0;
}

std::size_t validSequenceLength(std::string_view s, std::size_t i) {
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char b0 = at(0);
  if (b0 < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF)
    n = 2;
  else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  // The second byte has the restricted range; the rest are plain continuations.
  for (std::size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    unsigned char b = at(k);
    unsigned char l = k == 1 ? lo : 0x80;
    unsigned char h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return 0;
  }
  return n;
}

bool isValidUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = validSequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string sanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = validSequenceLength(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // Maximal subpart: the lead byte plus the continuation bytes that were
    // still valid for it form one ill-formed subsequence.
    auto b0 = static_cast<unsigned char>(s[i]);
    std::size_t need = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF)
      need = 1;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
      need = 2;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      need = 3;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    }
    std::size_t len = 1;
    for (std::size_t k = 1; k <= need && i + k < s.size(); ++k) {
      auto b = static_cast<unsigned char>(s[i + k]);
      unsigned char l = k == 1 ? lo : 0x80;
      unsigned char h = k == 1 ? hi : 0xBF;
      if (b < l || b > h) break;
      ++len;
    }
    out += "\xEF\xBF\xBD";
    i += len;
  }
  return out;
}

void appendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace latentlab::unicode
