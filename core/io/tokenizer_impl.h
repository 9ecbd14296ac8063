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

struct TokenizerState {
  enum class Decoder { None, ByteLevel };
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
  Decoder decoder = Decoder::None;
  std::vector<std::string> tokenOf;  // per id: the token string (added first)
  std::vector<std::string> bytesOf;  // per id: what the ByteLevel decoder emits
  std::vector<IdKind> kindOf;
  std::optional<std::int32_t> bos;
  std::optional<std::int32_t> eos;

  // Builds matchers and the per-id tables once everything is parsed.
  void finish();
};

}  // namespace tok

struct Tokenizer::Impl : tok::TokenizerState {};

// FNV-1a 64 of the text as 16 hex digits.
std::string fnv1a64Hex(std::string_view text);

}  // namespace latentlab
