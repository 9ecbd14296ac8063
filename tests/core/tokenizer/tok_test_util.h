// Helpers for the tokenizer tests: generated corpora and test strings, and
// the HF `tokenizers` peer (building reference tokenizer.json files, encoding).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace latentlab::test {

// A deterministic multilingual text with the cases the tokenizer must get
// right (accents, combining marks, CJK, emoji/ZWJ, digits, whitespace runs).
std::string generatedCorpus(std::size_t bytes, std::uint32_t seed);

// Some Debian python3.11-doc reST sources (empty when not installed).
std::vector<std::filesystem::path> pythonDocFiles(std::size_t maxBytes);

// Hand-picked test strings and random valid UTF-8 strings.
std::vector<std::string> fixedCases();
std::vector<std::string> randomUtf8Strings(std::uint32_t seed, int count);

// Empty when the peer is importable, else the reason (tests FAIL on it).
std::string peerProblem();

// A tokenizer.json built by tests/python/tok_build.py in `style`
// (gpt2, gpt2prefix, smollm, llama3), cached for the process. Throws
// std::runtime_error with the script output on failure.
std::filesystem::path hfTokenizer(const std::string& style, bool stringMerges = false);
// The corpus files the reference tokenizers are trained on.
std::vector<std::filesystem::path> referenceCorpus();

struct HfOutput {
  std::vector<std::vector<std::int32_t>> ids;         // add_special_tokens=False
  std::vector<std::vector<std::int32_t>> idsSpecial;  // add_special_tokens=True
  std::vector<std::string> decoded;                   // decode(ids) of the given lists
  std::vector<std::string> decodedSkip;               // ... skip_special_tokens=True
  int vocabSize = 0;
  std::vector<std::vector<std::string>> pretok;  // pre_tokenize_str words per text
};
HfOutput hfEncode(const std::filesystem::path& tokenizerJson, const std::vector<std::string>& texts,
                  const std::vector<std::vector<std::int32_t>>& decodeLists = {});

std::string toHex(const std::string& bytes);
std::string fromHex(const std::string& hex);
std::string printable(const std::string& s);  // for failure messages

}  // namespace latentlab::test
