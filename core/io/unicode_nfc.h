// Unicode Normalization Form C (canonical decomposition, canonical ordering,
// canonical composition), for tokenizers whose normalizer is NFC (Qwen2).
// Tables are generated from the Unicode data (unicode_nfc_classes.cpp,
// unicode_nfc_decompositions.cpp, unicode_nfc_compositions.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace latentlab::unicode {

// NFC of valid UTF-8 text. ASCII-only text is returned as it is.
std::string toNfc(std::string_view text);

namespace nfc {
struct CombiningClass {
  char32_t cp;
  std::uint8_t ccc;
};
struct Decomposition {
  char32_t cp;
  std::uint8_t length;
  char32_t to[4];
};
struct Composition {
  char32_t first, second, composite;
};
extern const CombiningClass kCombiningClasses[];
extern const std::size_t kCombiningClassCount;
extern const Decomposition kDecompositions[];
extern const std::size_t kDecompositionCount;
extern const Composition kCompositions[];
extern const std::size_t kCompositionCount;
}  // namespace nfc

}  // namespace latentlab::unicode
