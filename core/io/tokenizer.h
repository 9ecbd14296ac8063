// BPE tokenizer read from (and written to) HF tokenizer.json: byte-level (GPT-2,
// SmolLM, Llama-3, Qwen2) and SentencePiece-style with byte fallback
// (Llama-2, Mistral, TinyLlama: Prepend/Replace/NFC normalizers, Metaspace,
// ByteFallback/Fuse/Strip decoders). Output matches HF `tokenizers` exactly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "latentlab/progress.h"

namespace latentlab {

class Tokenizer {
 public:
  // Throws Error(BadData) naming the file and the field; Error(Unsupported)
  // for tokenizer models other than BPE (WordPiece, Unigram, ...) and for
  // normalizers, pre-tokenizers and decoders outside the list above.
  static Tokenizer fromFile(const std::filesystem::path& tokenizerJson);
  static Tokenizer fromJson(const std::string& json, const std::string& source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Encodes UTF-8 text. Invalid UTF-8 is replaced by U+FFFD first, never a
  // crash: each stray byte becomes one U+FFFD, and a truncated multi-byte
  // sequence (a lead byte and the continuation bytes valid for it) becomes
  // one U+FFFD - Unicode's "maximal subpart" rule, the same as Python's
  // bytes.decode("utf-8", errors="replace"), so HF on the repaired string
  // gives the same ids. addSpecial applies the file's post-processor (e.g. a
  // BOS token) when it has one. Thread-safe (the word cache is locked).
  std::vector<std::int32_t> encode(std::string_view text, bool addSpecial = false) const;
  // Ids outside the vocabulary are skipped (as HF does); bytes that do not
  // form valid UTF-8 (a split character) decode to U+FFFD as in HF.
  std::string decode(const std::vector<std::int32_t>& ids, bool skipSpecial = false) const;

  int vocabSize() const;  // highest id + 1, including added tokens
  std::optional<std::int32_t> tokenId(const std::string& token) const;
  std::optional<std::int32_t> bosId() const;  // from the post-processor / added tokens
  std::optional<std::int32_t> eosId() const;  // "<|endoftext|>", "</s>", ... when present
  std::string hash() const;                   // content hash of the tokenizer.json
  const std::filesystem::path& source() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

// Refuses (Error(BadData), naming both files and both sizes) a tokenizer with
// more ids than the model has embedding rows: those ids cannot be looked up.
void requireTokenizerFits(const Tokenizer& tok, int modelVocab, const std::filesystem::path& modelConfig);

struct BpeTrainOptions {
  int vocabSize = 4096;  // including the 256 byte tokens and specials
  int minFrequency = 2;
  std::vector<std::string> specialTokens = {"<|endoftext|>"};
};

// Trains a byte-level BPE tokenizer (GPT-2 pre-tokenizer) on the given text
// files and writes a standard tokenizer.json (atomically) that HF `tokenizers`
// loads. The first special token is the EOS document separator.
void trainBpeTokenizer(const std::vector<std::filesystem::path>& files, const BpeTrainOptions& opts,
                       const std::filesystem::path& outJson, ProgressSink& progress, const CancelToken& cancel);

}  // namespace latentlab
