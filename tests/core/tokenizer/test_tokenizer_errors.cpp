// Tokenizer loading errors: malformed tokenizer.json names the file and the
// field (BadData); other tokenizer models and regexes are Unsupported.
#include <gtest/gtest.h>

#include <cstdio>

#include "io/tokenizer.h"
#include "latentlab/error.h"

namespace latentlab::test {
namespace {

const char* const kSource = "my/tokenizer.json";

// A minimal valid byte-level BPE file with `model` and `extra` spliced in.
std::string tokenizerJson(const std::string& model, const std::string& extra = "") {
  return R"({"version": "1.0", "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
             "decoder": {"type": "ByteLevel"}, )" +
         extra + R"("model": )" + model + "}";
}

const char* const kGoodModel = R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3}, "merges": ["a b"]})";

Error loadError(const std::string& json) {
  try {
    Tokenizer::fromJson(json, kSource);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << json;
  return Error(ErrorCode::Internal, "none");
}

void expectError(const std::string& json, ErrorCode code, const std::string& fragment) {
  Error e = loadError(json);
  EXPECT_EQ(e.code(), code) << e.message();
  EXPECT_NE(e.message().find(kSource), std::string::npos) << e.message();
  EXPECT_NE(e.message().find(fragment), std::string::npos) << "expected '" << fragment << "' in: " << e.message();
}

TEST(TokenizerErrors, MinimalFileLoadsAndMerges) {
  Tokenizer tok = Tokenizer::fromJson(tokenizerJson(kGoodModel), kSource);
  EXPECT_EQ(tok.encode("ab"), (std::vector<std::int32_t>{2}));
  EXPECT_EQ(tok.encode("ba"), (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(tok.encode(""), (std::vector<std::int32_t>{}));
  EXPECT_EQ(tok.vocabSize(), 4);
  EXPECT_EQ(tok.decode({2, 3, 0}), "ab a");
}

TEST(TokenizerErrors, IdsBeyondAnyRealVocabularyAreRefusedBeforeTablesAreBuilt) {
  // Ids index dense tables: 1e8 once allocated 9.9 GB, 2^31-1 overflowed a vector.
  for (const char* id : {"100000000", "2147483647", "16777216", "9223372036854775807", "18446744073709551615"}) {
    expectError(tokenizerJson(std::string(R"({"type": "BPE", "vocab": {"a": 0, "b": )") + id + R"(}, "merges": []})"),
                ErrorCode::BadData, "beyond the largest vocabulary");
    expectError(tokenizerJson(kGoodModel, std::string(R"("added_tokens": [{"id": )") + id +
                                              R"(, "content": "<x>", "special": true}], )"),
                ErrorCode::BadData, "added_tokens[0].id' is out of range");
  }
  // A sparse but plausible id still loads.
  Tokenizer sparse = Tokenizer::fromJson(
      tokenizerJson(kGoodModel, R"("added_tokens": [{"id": 200000, "content": "<x>", "special": true}], )"), kSource);
  EXPECT_EQ(sparse.vocabSize(), 200001);
}

TEST(TokenizerErrors, MalformedJsonNamesTheFile) {
  expectError("{\"model\": ", ErrorCode::BadData, "invalid JSON");
  expectError("[1, 2]", ErrorCode::BadData, "top level");
}

TEST(TokenizerErrors, MissingOrIllTypedFieldsAreNamed) {
  expectError(R"({"version": "1.0"})", ErrorCode::BadData, "'model'");
  expectError(tokenizerJson(R"({"type": "BPE", "merges": []})"), ErrorCode::BadData, "'model.vocab'");
  expectError(tokenizerJson(R"({"type": "BPE", "vocab": {"a": 0}})"), ErrorCode::BadData, "'model.merges'");
  expectError(tokenizerJson(R"({"type": "BPE", "vocab": {"a": "zero"}, "merges": []})"), ErrorCode::BadData,
              "model.vocab[\"a\"]");
  expectError(tokenizerJson(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [42]})"), ErrorCode::BadData,
              "'model.merges[0]'");
  expectError(tokenizerJson(R"({"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]})"), ErrorCode::BadData,
              "'model.merges[0]'");
  expectError(tokenizerJson(R"({"type": 7, "vocab": {}, "merges": []})"), ErrorCode::BadData, "'model.type'");
  expectError(tokenizerJson(kGoodModel, R"("added_tokens": [{"id": 9}], )"), ErrorCode::BadData,
              "'added_tokens[0].content'");
  expectError(tokenizerJson(kGoodModel, R"("added_tokens": [{"id": "x", "content": "<s>"}], )"), ErrorCode::BadData,
              "'added_tokens[0].id'");
  expectError(
      R"({"pre_tokenizer": {"type": "Split", "behavior": "Isolated"}, "model": )" + std::string(kGoodModel) + "}",
      ErrorCode::BadData, "'pre_tokenizer.pattern'");
  expectError(
      R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"}]}, "model": )" +
          std::string(kGoodModel) + "}",
      ErrorCode::BadData, "pre_tokenizer.pretokenizers[0].behavior");
  expectError(
      tokenizerJson(
          kGoodModel,
          R"("post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}], "special_tokens": {}}, )"),
      ErrorCode::BadData, "post_processor.special_tokens");
}

TEST(TokenizerErrors, OtherModelTypesAreUnsupported) {
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    std::string model = std::string(R"({"type": ")") + type + R"(", "vocab": {"a": 0}})";
    Error e = loadError(tokenizerJson(model));
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_EQ(e.message(), std::string(kSource) + ": tokenizer model type '" + type + "' is not supported yet");
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(TokenizerErrors, UnknownRegexNormalizerAndOptionsAreUnsupportedAndNamed) {
  std::string re = R"(\w+|[^\w\s]+)";
  std::string json =
      R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+|[^\\w\\s]+"}, "behavior": "Isolated"}, "model": )" +
      std::string(kGoodModel) + "}";
  expectError(json, ErrorCode::Unsupported, re);
  expectError(tokenizerJson(kGoodModel, R"("normalizer": {"type": "NFKC"}, )"), ErrorCode::Unsupported,
              "normalizer 'NFKC'");
  expectError(tokenizerJson(kGoodModel, R"("normalizer": {"type": "Lowercase"}, )"), ErrorCode::Unsupported,
              "normalizer 'Lowercase'");
  expectError(
      tokenizerJson(kGoodModel, R"("normalizer": {"type": "Replace", "pattern": {"Regex": " +"}, "content": "_"}, )"),
      ErrorCode::Unsupported, "Regex pattern");
  expectError(R"({"pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "sometimes"}, "model": )" +
                  std::string(kGoodModel) + "}",
              ErrorCode::BadData, "prepend_scheme");
  expectError(R"({"pre_tokenizer": {"type": "UnicodeScripts"}, "model": )" + std::string(kGoodModel) + "}",
              ErrorCode::Unsupported, "UnicodeScripts");
  expectError(tokenizerJson(kGoodModel, R"("decoder": {"type": "CTC"}, )"), ErrorCode::Unsupported, "decoder 'CTC'");
}

// SentencePiece-style BPE with byte_fallback needs every <0xNN> token; a
// file that lacks one is refused naming the token, before anything is encoded.
TEST(TokenizerErrors, ByteFallbackWithoutItsByteTokensIsRefused) {
  std::string vocab = R"("a": 0)";
  for (int b = 0; b < 256; ++b) {
    if (b == 0x7F) continue;
    char name[16];
    std::snprintf(name, sizeof(name), R"(, "<0x%02X>": %d)", b, b + 1);
    vocab += name;
  }
  expectError(tokenizerJson(R"({"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": [], "byte_fallback": true})"),
              ErrorCode::BadData, "no byte token <0x7F>");
}

TEST(TokenizerErrors, HashIsAContentHash) {
  Tokenizer a = Tokenizer::fromJson(tokenizerJson(kGoodModel), "a.json");
  Tokenizer b = Tokenizer::fromJson(tokenizerJson(kGoodModel), "b.json");
  Tokenizer c = Tokenizer::fromJson(tokenizerJson(kGoodModel) + " ", "a.json");
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_EQ(a.hash().size(), 16u);
  EXPECT_EQ(a.source(), "a.json");
}

TEST(TokenizerErrors, InvalidUtf8NeverCrashesAndBecomesReplacementChar) {
  std::string model =
      R"({"type": "BPE", "vocab": {"ï": 0, "¿": 1, "½": 2, "a": 3, "ï¿": 4, "ï¿½": 5}, "merges": ["ï ¿", "ï¿ ½"]})";
  Tokenizer tok = Tokenizer::fromJson(tokenizerJson(model), kSource);
  // U+FFFD is EF BF BD, i.e. the byte symbols "ï¿½" here.
  EXPECT_EQ(tok.encode("\xFF"), (std::vector<std::int32_t>{5}));
  EXPECT_EQ(tok.encode("a\x80\x80"), (std::vector<std::int32_t>{3, 5, 5}));
  EXPECT_EQ(tok.encode("\xE2\x82"), (std::vector<std::int32_t>{5}));  // one truncated sequence
  EXPECT_EQ(tok.decode({4}), "\xEF\xBF\xBD");                         // half a character decodes to U+FFFD
}

}  // namespace
}  // namespace latentlab::test
