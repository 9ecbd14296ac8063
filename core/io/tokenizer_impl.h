// Internal state of Tokenizer, shared by its loader (tokenizer_load.cpp) and
// its encode/decode (tokenizer.cpp). Not part of the public API.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/bpe_model.h"
#include "io/pretokenizer.h"
#include "io/tokenizer.h"
#include "io/tokenizer_added.h"

namespace latentlab {
namespace tok {

// One normalizer of tokenizer.json, applied in order to each piece of text
// between added tokens that are not normalized.
struct NormalizerStep {
  enum class Kind { Prepend, Replace, Nfc };
  Kind kind = Kind::Nfc;
  std::string text;     // Prepend: what is prepended; Replace: the literal pattern
  std::string content;  // Replace: what replaces it
};

// One decoder of tokenizer.json, applied to the list of token strings.
struct DecoderStep {
  enum class Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace };
  Kind kind = Kind::ByteLevel;
  std::string pattern, content;  // Replace; Strip: content is the stripped character
  int start = 0, stop = 0;       // Strip: at most this many from each end
  std::string replacement;       // Metaspace
  bool prepended = true;         // Metaspace: prepend_scheme is not "never"
};

struct TokenizerState {
  enum class Decoder { None, ByteLevel, Chain };
  enum class IdKind : std::uint8_t { Unused, Normal, Special };

  std::filesystem::path source;
  std::string hash;
  tok::PreTokenizer pre;
  tok::BpeModel model;
  std::vector<tok::AddedToken> added;
  tok::AddedTokenMatcher rawMatcher;         // added tokens with normalized=false
  tok::AddedTokenMatcher normalizedMatcher;  // the others
  std::unordered_map<std::string, std::int32_t> addedByContent;
  std::vector<std::int32_t> prefix;  // post-processor ids before / after the text
  std::vector<std::int32_t> suffix;
  std::vector<NormalizerStep> normalizer;
  Decoder decoder = Decoder::None;
  std::vector<DecoderStep> decoders;  // Chain: every step, in order
  std::vector<std::string> tokenOf;   // per id: the token string (added first)
  std::vector<std::string> bytesOf;   // per id: what the ByteLevel decoder emits
  std::vector<IdKind> kindOf;
  std::optional<std::int32_t> bos;
  std::optional<std::int32_t> eos;

  // Builds matchers and the per-id tables once everything is parsed.
  void finish();
  // The normalizers applied to `text` (a copy when there are none).
  std::string normalize(std::string_view text) const;
};

}  // namespace tok

struct Tokenizer::Impl : tok::TokenizerState {};

// FNV-1a 64 of the text as 16 hex digits.
std::string fnv1a64Hex(std::string_view text);

}  // namespace latentlab
