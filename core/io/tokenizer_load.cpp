// Reads HF tokenizer.json into Tokenizer::Impl: model, normalizer check,
// pre-tokenizer, added tokens, post-processor and decoder.
#include <algorithm>
#include <cstdio>

#include "common/file_util.h"
#include "common/json_util.h"
#include "io/tokenizer_impl.h"
#include "latentlab/error.h"

namespace latentlab {
namespace {

const char* const kHint = "Is this a valid Hugging Face tokenizer.json?";
const char* const kScopeHint =
    "LatentLab reads BPE tokenizers: byte-level (GPT-2, SmolLM, Llama-3, Qwen2) and SentencePiece-style "
    "(Llama-2, Mistral, TinyLlama).";

[[noreturn]] void bad(const std::string& source, const std::string& field, const std::string& problem) {
  throw Error(ErrorCode::BadData, source + ": field '" + field + "' " + problem, kHint);
}

bool flag(const nlohmann::json& j, const char* key, bool fallback, const std::string& source, const std::string& path) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  if (!j.at(key).is_boolean()) bad(source, path + "." + key, "must be true or false, got " + j.at(key).dump());
  return j.at(key).get<bool>();
}

std::string typeOf(const nlohmann::json& j, const std::string& source, const std::string& path) {
  if (!j.is_object()) bad(source, path, "must be an object or null");
  if (!j.contains("type") || !j.at("type").is_string()) bad(source, path + ".type", "is missing or not a string");
  return j.at("type").get<std::string>();
}

// A Replace's pattern: literal strings only ({"String": ...}).
std::string literalPattern(const nlohmann::json& j, const std::string& source, const std::string& path) {
  if (!j.contains("pattern") || !j.at("pattern").is_object())
    bad(source, path + ".pattern", "is missing or not an object");
  const auto& p = j.at("pattern");
  if (p.contains("String") && p.at("String").is_string()) return p.at("String").get<std::string>();
  if (p.contains("Regex"))
    throw Error(ErrorCode::Unsupported, source + ": field '" + path + ".pattern': a Regex pattern is not supported",
                "LatentLab's Replace steps take {\"String\": ...} patterns.");
  bad(source, path + ".pattern", "must hold a \"String\"");
}

std::string stringField(const nlohmann::json& j, const char* key, const std::string& source, const std::string& path) {
  if (!j.contains(key) || !j.at(key).is_string()) bad(source, path + "." + key, "is missing or not a string");
  return j.at(key).get<std::string>();
}

void parseNormalizer(const nlohmann::json& j, const std::string& source, const std::string& path,
                     std::vector<tok::NormalizerStep>& steps) {
  if (j.is_null()) return;
  std::string type = typeOf(j, source, path);
  tok::NormalizerStep step;
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j.at("normalizers").is_array())
      bad(source, path + ".normalizers", "is missing or not an array");
    for (std::size_t k = 0; k < j.at("normalizers").size(); ++k)
      parseNormalizer(j.at("normalizers")[k], source, path + ".normalizers[" + std::to_string(k) + "]", steps);
    return;
  }
  if (type == "Prepend") {
    step.kind = tok::NormalizerStep::Kind::Prepend;
    step.text = stringField(j, "prepend", source, path);
  } else if (type == "Replace") {
    step.kind = tok::NormalizerStep::Kind::Replace;
    step.text = literalPattern(j, source, path);
    step.content = stringField(j, "content", source, path);
    if (step.text.empty()) bad(source, path + ".pattern", "must not be empty");
  } else if (type == "NFC") {
    step.kind = tok::NormalizerStep::Kind::Nfc;
  } else {
    throw Error(ErrorCode::Unsupported, source + ": normalizer '" + type + "' is not supported yet",
                "LatentLab applies the normalizers of the Llama, Mistral and Qwen2 families: Prepend, Replace "
                "(literal), NFC and Sequence.");
  }
  steps.push_back(std::move(step));
}

std::int32_t idField(const nlohmann::json& j, const char* key, const std::string& source, const std::string& path) {
  if (!j.contains(key) || !j.at(key).is_number_integer()) bad(source, path + "." + key, "is missing or not an integer");
  if (j.at(key).is_number_unsigned() &&
      j.at(key).get<unsigned long long>() >= static_cast<unsigned long long>(tok::kMaxTokenIds))
    bad(source, path + "." + key, "is out of range: " + j.at(key).dump());
  long long v = j.at(key).get<long long>();
  if (v < 0 || v >= tok::kMaxTokenIds)
    bad(source, path + "." + key,
        "is out of range: " + std::to_string(v) + " (ids must be below " + std::to_string(tok::kMaxTokenIds) + ")");
  return static_cast<std::int32_t>(v);
}

void parseAddedTokens(const nlohmann::json& root, const std::string& source, tok::TokenizerState& impl) {
  if (!root.contains("added_tokens") || root.at("added_tokens").is_null()) return;
  const auto& list = root.at("added_tokens");
  if (!list.is_array()) bad(source, "added_tokens", "must be an array");
  for (std::size_t k = 0; k < list.size(); ++k) {
    std::string path = "added_tokens[" + std::to_string(k) + "]";
    const auto& e = list[k];
    if (!e.is_object()) bad(source, path, "must be an object");
    tok::AddedToken t;
    t.id = idField(e, "id", source, path);
    if (!e.contains("content") || !e.at("content").is_string())
      bad(source, path + ".content", "is missing or not a string");
    t.content = e.at("content").get<std::string>();
    t.special = flag(e, "special", false, source, path);
    t.lstrip = flag(e, "lstrip", false, source, path);
    t.rstrip = flag(e, "rstrip", false, source, path);
    t.singleWord = flag(e, "single_word", false, source, path);
    t.normalized = flag(e, "normalized", !t.special, source, path);
    impl.added.push_back(std::move(t));
  }
}

std::vector<std::int32_t> specialIds(const nlohmann::json& pp, const std::string& name, const std::string& source,
                                     const std::string& path) {
  if (!pp.contains("special_tokens") || !pp.at("special_tokens").is_object())
    bad(source, path + ".special_tokens", "is missing or not an object");
  const auto& st = pp.at("special_tokens");
  if (!st.contains(name)) bad(source, path + ".special_tokens", "has no entry for '" + name + "'");
  const auto& e = st.at(name);
  if (!e.is_object() || !e.contains("ids") || !e.at("ids").is_array())
    bad(source, path + ".special_tokens[\"" + name + "\"].ids", "is missing or not an array");
  std::vector<std::int32_t> ids;
  for (const auto& v : e.at("ids")) {
    if (!v.is_number_integer()) bad(source, path + ".special_tokens[\"" + name + "\"].ids", "must hold integers");
    ids.push_back(v.get<std::int32_t>());
  }
  return ids;
}

void parsePostProcessor(const nlohmann::json& pp, const std::string& source, const std::string& path,
                        tok::TokenizerState& impl) {
  if (pp.is_null()) return;
  std::string type = typeOf(pp, source, path);
  std::vector<std::int32_t> before, after;
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    if (!pp.contains("processors") || !pp.at("processors").is_array())
      bad(source, path + ".processors", "is missing or not an array");
    for (std::size_t k = 0; k < pp.at("processors").size(); ++k)
      parsePostProcessor(pp.at("processors")[k], source, path + ".processors[" + std::to_string(k) + "]", impl);
    return;
  }
  if (type == "TemplateProcessing") {
    if (!pp.contains("single") || !pp.at("single").is_array())
      bad(source, path + ".single", "is missing or not an array");
    bool seenSequence = false;
    for (const auto& item : pp.at("single")) {
      if (item.is_object() && item.contains("Sequence")) {
        seenSequence = true;
      } else if (item.is_object() && item.contains("SpecialToken") && item.at("SpecialToken").is_object() &&
                 item.at("SpecialToken").contains("id") && item.at("SpecialToken").at("id").is_string()) {
        auto ids = specialIds(pp, item.at("SpecialToken").at("id").get<std::string>(), source, path);
        auto& dst = seenSequence ? after : before;
        dst.insert(dst.end(), ids.begin(), ids.end());
      } else {
        bad(source, path + ".single", "has an item that is neither a Sequence nor a SpecialToken: " + item.dump());
      }
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      if (!pp.contains(key) || !pp.at(key).is_array() || pp.at(key).size() != 2 || !pp.at(key)[1].is_number_integer())
        bad(source, path + "." + key, "must be [token, id]");
    }
    before.push_back(pp.at("cls")[1].get<std::int32_t>());
    after.push_back(pp.at("sep")[1].get<std::int32_t>());
  } else {
    throw Error(ErrorCode::Unsupported, source + ": post-processor '" + type + "' is not supported yet", kScopeHint);
  }
  // A later processor wraps what the earlier ones produced.
  impl.prefix.insert(impl.prefix.begin(), before.begin(), before.end());
  impl.suffix.insert(impl.suffix.end(), after.begin(), after.end());
}

void parseDecoder(const nlohmann::json& d, const std::string& source, const std::string& path,
                  tok::TokenizerState& impl) {
  if (d.is_null()) return;
  std::string type = typeOf(d, source, path);
  using K = tok::DecoderStep::Kind;
  tok::DecoderStep step;
  if (type == "Sequence") {
    if (!d.contains("decoders") || !d.at("decoders").is_array())
      bad(source, path + ".decoders", "is missing or not an array");
    for (std::size_t k = 0; k < d.at("decoders").size(); ++k)
      parseDecoder(d.at("decoders")[k], source, path + ".decoders[" + std::to_string(k) + "]", impl);
    return;
  }
  if (type == "ByteLevel") {
    step.kind = K::ByteLevel;
  } else if (type == "Replace") {
    step.kind = K::Replace;
    step.pattern = literalPattern(d, source, path);
    step.content = stringField(d, "content", source, path);
  } else if (type == "ByteFallback") {
    step.kind = K::ByteFallback;
  } else if (type == "Fuse") {
    step.kind = K::Fuse;
  } else if (type == "Strip") {
    step.kind = K::Strip;
    step.content = stringField(d, "content", source, path);
    auto count = [&](const char* key) {
      if (!d.contains(key) || !d.at(key).is_number_unsigned()) bad(source, path + "." + key, "must be a count");
      return static_cast<int>(std::min<unsigned long long>(d.at(key).get<unsigned long long>(), 1u << 20));
    };
    step.start = count("start");
    step.stop = count("stop");
  } else if (type == "Metaspace") {
    step.kind = K::Metaspace;
    step.replacement = d.contains("replacement") && d.at("replacement").is_string()
                           ? d.at("replacement").get<std::string>()
                           : "\xE2\x96\x81";
    if (d.contains("prepend_scheme") && d.at("prepend_scheme").is_string())
      step.prepended = d.at("prepend_scheme").get<std::string>() != "never";
    else
      step.prepended = flag(d, "add_prefix_space", true, source, path);
  } else {
    throw Error(ErrorCode::Unsupported, source + ": decoder '" + type + "' is not supported yet", kScopeHint);
  }
  impl.decoders.push_back(std::move(step));
  impl.decoder = impl.decoders.size() == 1 && impl.decoders[0].kind == K::ByteLevel
                     ? tok::TokenizerState::Decoder::ByteLevel
                     : tok::TokenizerState::Decoder::Chain;
}

}  // namespace

std::string fnv1a64Hex(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Tokenizer Tokenizer::fromFile(const std::filesystem::path& tokenizerJson) {
  std::string text = readTextFile(tokenizerJson);
  Tokenizer t = fromJson(text, tokenizerJson.string());
  t.m_impl->source = tokenizerJson;
  return t;
}

Tokenizer Tokenizer::fromJson(const std::string& json, const std::string& source) {
  nlohmann::json root = parseJson(json, source, ErrorCode::BadData);
  if (!root.is_object()) throw Error(ErrorCode::BadData, source + ": the top level must be a JSON object", kHint);
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  impl->hash = fnv1a64Hex(json);

  if (!root.contains("model") || !root.at("model").is_object()) bad(source, "model", "is missing or not an object");
  const auto& model = root.at("model");
  std::string type;
  if (model.contains("type")) {
    if (!model.at("type").is_string()) bad(source, "model.type", "must be a string");
    type = model.at("type").get<std::string>();
  } else if (model.contains("merges")) {
    type = "BPE";  // older files omit the tag
  } else {
    bad(source, "model.type", "is missing");
  }
  if (type != "BPE")
    throw Error(ErrorCode::Unsupported, source + ": tokenizer model type '" + type + "' is not supported yet",
                kScopeHint);

  parseNormalizer(root.value("normalizer", nlohmann::json()), source, "normalizer", impl->normalizer);
  impl->pre = tok::PreTokenizer::fromJson(root.value("pre_tokenizer", nlohmann::json()), source);
  impl->model = tok::BpeModel::fromJson(model, source, impl->pre.byteLevel());
  parseAddedTokens(root, source, *impl);
  parsePostProcessor(root.value("post_processor", nlohmann::json()), source, "post_processor", *impl);
  parseDecoder(root.value("decoder", nlohmann::json()), source, "decoder", *impl);
  impl->finish();
  for (std::int32_t id : impl->prefix)
    if (id < 0 || id >= static_cast<std::int32_t>(impl->kindOf.size()) ||
        impl->kindOf[static_cast<std::size_t>(id)] == Impl::IdKind::Unused)
      bad(source, "post_processor", "uses id " + std::to_string(id) + " that is not in the vocabulary");
  return Tokenizer(std::move(impl));
}

}  // namespace latentlab
