// Reads the "pre_tokenizer" of tokenizer.json and runs its steps (HF split
// behaviours: removed, isolated, merged with previous/next, contiguous).
#include "io/pretokenizer.h"

#include "io/unicode_tables.h"
#include "io/unicode_text.h"
#include "latentlab/error.h"

namespace latentlab::tok {
namespace {

const char* const kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (Phi-4-mini): letters split at case changes, numbers of up to three digits.
const char* const kO200kRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

[[noreturn]] void bad(const std::string& source, const std::string& field, const std::string& problem) {
  throw Error(ErrorCode::BadData, source + ": field '" + field + "' " + problem,
              "Is this a valid Hugging Face tokenizer.json?");
}

bool optBool(const nlohmann::json& j, const char* key, bool fallback, const std::string& source,
             const std::string& path) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  if (!j.at(key).is_boolean()) bad(source, path + "." + key, "must be true or false, got " + j.at(key).dump());
  return j.at(key).get<bool>();
}

SplitBehavior parseBehavior(const nlohmann::json& j, const std::string& source, const std::string& path) {
  if (!j.contains("behavior") || !j.at("behavior").is_string())
    bad(source, path + ".behavior", "is missing or not a string");
  std::string b = j.at("behavior").get<std::string>();
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  bad(source, path + ".behavior", "has unknown value '" + b + "'");
}

void parseStep(const nlohmann::json& j, const std::string& source, const std::string& path,
               std::vector<PreTokStep>& steps) {
  if (!j.is_object()) bad(source, path, "must be an object");
  if (!j.contains("type") || !j.at("type").is_string()) bad(source, path + ".type", "is missing or not a string");
  std::string type = j.at("type").get<std::string>();
  PreTokStep step;
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j.at("pretokenizers").is_array())
      bad(source, path + ".pretokenizers", "is missing or not an array");
    const auto& list = j.at("pretokenizers");
    for (std::size_t k = 0; k < list.size(); ++k)
      parseStep(list[k], source, path + ".pretokenizers[" + std::to_string(k) + "]", steps);
    return;
  }
  if (type == "ByteLevel") {
    step.kind = PreTokStep::Kind::ByteLevel;
    step.pattern = PatternKind::Gpt2;
    step.behavior = SplitBehavior::Isolated;
    step.addPrefixSpace = optBool(j, "add_prefix_space", true, source, path);
    step.useRegex = optBool(j, "use_regex", true, source, path);
  } else if (type == "Digits") {
    step.pattern = PatternKind::Digit;
    step.behavior =
        optBool(j, "individual_digits", false, source, path) ? SplitBehavior::Isolated : SplitBehavior::Contiguous;
  } else if (type == "Split") {
    if (!j.contains("pattern") || !j.at("pattern").is_object())
      bad(source, path + ".pattern", "is missing or not an object");
    const auto& p = j.at("pattern");
    if (p.contains("String") && p.at("String").is_string()) {
      step.pattern = PatternKind::Literal;
      step.literal = p.at("String").get<std::string>();
    } else if (p.contains("Regex") && p.at("Regex").is_string()) {
      std::string re = p.at("Regex").get<std::string>();
      if (re == kGpt2Regex)
        step.pattern = PatternKind::Gpt2;
      else if (re == kLlama3Regex)
        step.pattern = PatternKind::Llama3;
      else if (re == kQwen2Regex) {
        step.pattern = PatternKind::Llama3;
        step.maxDigits = 1;
      } else if (re == kO200kRegex) {
        step.pattern = PatternKind::O200k;
      } else {
        throw Error(ErrorCode::Unsupported, source + ": pre-tokenizer Split regex '" + re + "' is not supported",
                    "LatentLab recognises the GPT-2, Llama-3, Qwen2 and o200k (Phi-4-mini) pre-tokenizer patterns.");
      }
    } else {
      bad(source, path + ".pattern", "must hold a \"String\" or a \"Regex\"");
    }
    step.behavior = parseBehavior(j, source, path);
    step.invert = optBool(j, "invert", false, source, path);
  } else if (type == "Metaspace") {
    // SentencePiece style: spaces become U+2581, one is prepended, words begin at each.
    step.kind = PreTokStep::Kind::Metaspace;
    if (j.contains("replacement") && !j.at("replacement").is_null()) {
      if (!j.at("replacement").is_string() || j.at("replacement").get<std::string>().empty())
        bad(source, path + ".replacement", "must be a one-character string");
      step.replacement = j.at("replacement").get<std::string>();
    }
    if (j.contains("prepend_scheme") && !j.at("prepend_scheme").is_null()) {
      const std::string scheme = j.at("prepend_scheme").is_string() ? j.at("prepend_scheme").get<std::string>() : "";
      if (scheme == "always")
        step.prependScheme = PreTokStep::Prepend::Always;
      else if (scheme == "first")
        step.prependScheme = PreTokStep::Prepend::First;
      else if (scheme == "never")
        step.prependScheme = PreTokStep::Prepend::Never;
      else
        bad(source, path + ".prepend_scheme", "must be always, first or never, got " + j.at("prepend_scheme").dump());
    } else {
      // Files written before prepend_scheme existed say add_prefix_space.
      step.prependScheme =
          optBool(j, "add_prefix_space", true, source, path) ? PreTokStep::Prepend::Always : PreTokStep::Prepend::Never;
    }
    step.splitWords = optBool(j, "split", true, source, path);
  } else {
    throw Error(ErrorCode::Unsupported, source + ": pre-tokenizer type '" + type + "' is not supported yet",
                "LatentLab reads BPE tokenizers with ByteLevel, Split, Digits, Metaspace and Sequence pre-tokenizers.");
  }
  if (!steps.empty() && steps.back().kind == PreTokStep::Kind::ByteLevel)
    throw Error(ErrorCode::Unsupported,
                source + ": field '" + path + "': a pre-tokenizer after ByteLevel is not supported",
                "ByteLevel must be the last pre-tokenizer step.");
  steps.push_back(std::move(step));
}

void applyBehavior(const PreTokStep& step, std::string_view s, std::vector<Segment>& segs,
                   std::vector<std::string_view>& out) {
  if (step.invert)
    for (auto& g : segs) g.isMatch = !g.isMatch;
  auto emit = [&](std::size_t b, std::size_t e) {
    if (e > b) out.push_back(s.substr(b, e - b));
  };
  switch (step.behavior) {
    case SplitBehavior::Isolated:
      for (const auto& g : segs) emit(g.begin, g.end);
      return;
    case SplitBehavior::Removed:
      for (const auto& g : segs)
        if (!g.isMatch) emit(g.begin, g.end);
      return;
    case SplitBehavior::Contiguous:
    case SplitBehavior::MergedWithPrevious: {
      bool contiguous = step.behavior == SplitBehavior::Contiguous;
      std::vector<Segment> acc;
      bool previousMatch = false;
      for (const auto& g : segs) {
        bool merge = contiguous ? g.isMatch == previousMatch : (g.isMatch && !previousMatch);
        if (merge && !acc.empty())
          acc.back().end = g.end;
        else
          acc.push_back(g);
        previousMatch = g.isMatch;
      }
      for (const auto& g : acc) emit(g.begin, g.end);
      return;
    }
    case SplitBehavior::MergedWithNext: {
      std::vector<Segment> acc;
      bool previousMatch = false;
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->isMatch && !previousMatch && !acc.empty())
          acc.back().begin = it->begin;
        else
          acc.push_back(*it);
        previousMatch = it->isMatch;
      }
      for (auto it = acc.rbegin(); it != acc.rend(); ++it) emit(it->begin, it->end);
      return;
    }
  }
}

}  // namespace

void findSegments(const PreTokStep& step, std::string_view s, std::vector<Segment>& out) {
  std::size_t n = s.size();
  std::size_t gapStart = 0;
  auto push = [&](std::size_t b, std::size_t e) {
    if (gapStart < b) out.push_back({gapStart, b, false});
    out.push_back({b, e, true});
    gapStart = e;
  };
  if (step.pattern == PatternKind::Literal) {
    if (!step.literal.empty()) {
      for (std::size_t pos = s.find(step.literal); pos != std::string_view::npos;
           pos = s.find(step.literal, pos + step.literal.size()))
        push(pos, pos + step.literal.size());
    }
  } else {
    for (std::size_t i = 0; i < n;) {
      std::size_t e = i;
      if (step.pattern == PatternKind::Gpt2)
        e = matchGpt2(s, i);
      else if (step.pattern == PatternKind::Llama3)
        e = matchLlama3(s, i, step.maxDigits);
      else if (step.pattern == PatternKind::O200k)
        e = matchO200k(s, i);
      else {
        std::size_t next = i;
        if (unicode::isNumber(unicode::nextCodePoint(s, next))) e = next;
      }
      if (e > i) {
        push(i, e);
        i = e;
      } else {
        unicode::nextCodePoint(s, i);
      }
    }
  }
  if (gapStart < n) out.push_back({gapStart, n, false});
}

PreTokenizer PreTokenizer::fromJson(const nlohmann::json& j, const std::string& source) {
  PreTokenizer p;
  if (!j.is_null()) parseStep(j, source, "pre_tokenizer", p.m_steps);
  for (const auto& s : p.m_steps)
    if (s.kind == PreTokStep::Kind::ByteLevel) p.m_byteLevel = true;
  return p;
}

PreTokenizer PreTokenizer::gpt2ByteLevel() {
  PreTokenizer p;
  PreTokStep step;
  step.kind = PreTokStep::Kind::ByteLevel;
  step.addPrefixSpace = false;
  step.useRegex = true;
  p.m_steps.push_back(step);
  p.m_byteLevel = true;
  return p;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out, std::deque<std::string>& arena,
                         bool atStart) const {
  thread_local std::vector<std::string_view> current;
  thread_local std::vector<Segment> segs;
  if (text.empty()) return;
  current.clear();
  current.push_back(text);
  for (const auto& step : m_steps) {
    std::vector<std::string_view> next;
    next.reserve(current.size() * 2 + 4);
    for (std::string_view piece : current) {
      if (step.kind == PreTokStep::Kind::Metaspace) {
        // Only the piece that begins the input counts as first.
        const bool first = atStart && piece.data() == text.data();
        std::string t;
        t.reserve(piece.size() + step.replacement.size());
        for (char c : piece) {
          if (c == ' ')
            t += step.replacement;
          else
            t += c;
        }
        const bool startsWithReplacement = t.compare(0, step.replacement.size(), step.replacement) == 0;
        if (!startsWithReplacement && (step.prependScheme == PreTokStep::Prepend::Always ||
                                       (step.prependScheme == PreTokStep::Prepend::First && first)))
          t.insert(0, step.replacement);
        arena.push_back(std::move(t));
        std::string_view w = arena.back();
        if (!step.splitWords) {
          if (!w.empty()) next.push_back(w);
          continue;
        }
        // Each replacement starts a word (merged with what follows it).
        std::size_t begin = 0;
        for (std::size_t at = w.find(step.replacement, 1); at != std::string_view::npos;
             at = w.find(step.replacement, at + step.replacement.size())) {
          if (at > begin) next.push_back(w.substr(begin, at - begin));
          begin = at;
        }
        if (begin < w.size()) next.push_back(w.substr(begin));
        continue;
      }
      if (step.kind == PreTokStep::Kind::ByteLevel) {
        if (step.addPrefixSpace && (piece.empty() || piece.front() != ' ')) {
          arena.push_back(" " + std::string(piece));
          piece = arena.back();
        }
        if (!step.useRegex) {
          if (!piece.empty()) next.push_back(piece);
          continue;
        }
        segs.clear();
        findSegments(step, piece, segs);  // pattern Gpt2, Isolated (set by the parser)
        applyBehavior(step, piece, segs, next);
        continue;
      }
      segs.clear();
      findSegments(step, piece, segs);
      applyBehavior(step, piece, segs, next);
    }
    current.swap(next);
  }
  for (auto p : current)
    if (!p.empty()) out.push_back(p);
}

}  // namespace latentlab::tok
