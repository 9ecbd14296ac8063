// NFC: decompose (canonical, Hangul algorithmically), order combining marks
// by class, recompose primary composites left to right unless blocked.
#include "io/unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "io/unicode_text.h"

namespace latentlab::unicode {
namespace {

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

std::uint8_t combiningClass(char32_t cp) {
  if (cp < 0x300) return 0;
  const auto* begin = nfc::kCombiningClasses;
  const auto* end = begin + nfc::kCombiningClassCount;
  const auto* it = std::lower_bound(begin, end, cp, [](const nfc::CombiningClass& e, char32_t c) { return e.cp < c; });
  return it != end && it->cp == cp ? it->ccc : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp >= 0xC0) {
    const auto* begin = nfc::kDecompositions;
    const auto* end = begin + nfc::kDecompositionCount;
    const auto* it = std::lower_bound(begin, end, cp, [](const nfc::Decomposition& e, char32_t c) { return e.cp < c; });
    if (it != end && it->cp == cp) {
      out.insert(out.end(), it->to, it->to + it->length);
      return;
    }
  }
  out.push_back(cp);
}

// The primary composite of (first, second), or 0.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount)
    return first + (second - kTBase);
  const auto* begin = nfc::kCompositions;
  const auto* end = begin + nfc::kCompositionCount;
  const auto* it = std::lower_bound(begin, end, std::make_pair(first, second), [](const nfc::Composition& e, auto key) {
    return e.first < key.first || (e.first == key.first && e.second < key.second);
  });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

}  // namespace

std::string toNfc(std::string_view text) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return std::string(text);
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) decompose(nextCodePoint(text, i), cps);
  // Canonical ordering: a stable sort of each run of non-starters by class.
  std::vector<std::uint8_t> cls(cps.size());
  for (std::size_t k = 0; k < cps.size(); ++k) cls[k] = combiningClass(cps[k]);
  for (std::size_t k = 0; k < cps.size();) {
    if (cls[k] == 0) {
      ++k;
      continue;
    }
    std::size_t end = k;
    while (end < cps.size() && cls[end] != 0) ++end;
    for (std::size_t a = k + 1; a < end; ++a) {  // insertion sort: runs are short
      for (std::size_t b = a; b > k && cls[b - 1] > cls[b]; --b) {
        std::swap(cls[b - 1], cls[b]);
        std::swap(cps[b - 1], cps[b]);
      }
    }
    k = end;
  }
  // Composition: a character joins the last starter unless blocked, i.e.
  // unless a character between them has a class of 0 or at least its own
  // (after ordering, the last one written has the largest class).
  std::ptrdiff_t starter = -1;
  std::size_t out = 0;
  int prevClass = 0;
  for (std::size_t k = 0; k < cps.size(); ++k) {
    const char32_t c = cps[k];
    const int cc = cls[k];
    if (starter >= 0) {
      const bool adjacent = out == static_cast<std::size_t>(starter) + 1;
      if (adjacent || prevClass < cc) {
        if (const char32_t composite = compose(cps[static_cast<std::size_t>(starter)], c)) {
          cps[static_cast<std::size_t>(starter)] = composite;
          continue;
        }
      }
    }
    if (cc == 0) starter = static_cast<std::ptrdiff_t>(out);
    cps[out++] = c;
    prevClass = cc;
  }
  std::string result;
  result.reserve(text.size());
  for (std::size_t k = 0; k < out; ++k) appendUtf8(result, cps[k]);
  return result;
}

}  // namespace latentlab::unicode
