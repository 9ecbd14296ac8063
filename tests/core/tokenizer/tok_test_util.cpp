// Corpora, test strings and the HF `tokenizers` peer for the tokenizer tests.
#include "tok_test_util.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "io/unicode_text.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

const char* const kPhrases[] = {
    "the",
    "The",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "it's",
    "IT'S",
    "we'll",
    "WE'LL",
    "they're",
    "you've",
    "I'm",
    "she'd",
    "don't",
    "o'clock",
    "rock'n'roll",
    "café",
    "naïve",
    "résumé",
    "Ångström",
    "straße",
    "e\xCC\x81t\xC3\xA9",
    "cafe\xCC\x81",
    "Ελληνικά",
    "русский",
    "日本語の文章です",
    "中文分词",
    "한국어",
    "ไทย",
    "עברית",
    "العربية",
    "😀",
    "👍🏽",
    "👨\u200D👩\u200D👧\u200D👦",
    "🏳️\u200D🌈",
    "12345678901234567890",
    "3.14159",
    "2024-06-01",
    "٣٤٥",
    "１２３",
    "Ⅻ",
    "x²",
    "0x1F",
    "v2.0.1",
    "$100",
    "def foo(bar):",
    "return x + 1",
    "print('hello')",
    "#include <vector>",
    "a->b",
    "i++",
    "==",
    "!=",
    "...",
    "—",
    "«quoted»",
    "“smart”",
    "(parens)",
    "[brackets]",
    "{braces}",
    "C:\\path\\file",
    "http://example.com/a?b=c",
    "<|endoftext|>",
    "plugh",
    "xyzzy",
    "<|user|>",
    "[NEW]",
    "ſ",
    "'ſ",
    "’s",
};
const char* const kSpaces[] = {" ",  " ",    " ",    " ",   "  ",   "   ",    "\t",
                               "\n", "\n\n", "\r\n", " \n", "\t\t", "\u00A0", "\u3000"};

std::string run(const std::string& script, const std::vector<std::string>& args) {
  std::string out;
  int rc = runPython(script, args, &out);
  if (rc != 0) throw std::runtime_error(script + " failed (exit " + std::to_string(rc) + "):\n" + out);
  return out;
}

nlohmann::json lastJsonLine(const std::string& out) {
  auto pos = out.rfind("\n{");
  std::string line = pos == std::string::npos ? out : out.substr(pos + 1);
  return nlohmann::json::parse(line);
}

}  // namespace

std::string generatedCorpus(std::size_t bytes, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out;
  std::size_t nPhrases = sizeof(kPhrases) / sizeof(kPhrases[0]);
  std::size_t nSpaces = sizeof(kSpaces) / sizeof(kSpaces[0]);
  while (out.size() < bytes) {
    out += kPhrases[rng() % nPhrases];
    out += (rng() % 3 == 0) ? kSpaces[rng() % nSpaces] : " ";
    if (rng() % 40 == 0) out += std::to_string(rng() % 100000000);
    if (rng() % 25 == 0) out += ".\n";
  }
  return out;
}

std::vector<fs::path> pythonDocFiles(std::size_t maxBytes) {
  fs::path root = "/usr/share/doc/python3.11/html/_sources";
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return files;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it) {
    const auto& p = it->path();
    std::string name = p.filename().string();
    if (it->is_regular_file() && name.size() > 8 && name.substr(name.size() - 8) == ".rst.txt") files.push_back(p);
  }
  std::sort(files.begin(), files.end());
  std::vector<fs::path> picked;
  std::size_t total = 0;
  for (const auto& f : files) {
    if (total >= maxBytes) break;
    total += fs::file_size(f);
    picked.push_back(f);
  }
  return picked;
}

std::vector<std::string> fixedCases() {
  return {
      "",
      "Hello world",
      "Hello world, this is a test of the tokenizer.",
      " leading space",
      "trailing spaces   ",
      "multiple   spaces\tand\ttabs\n\nand newlines\r\nCRLF",
      "   ",
      "\n",
      "\n\n\n",
      " \t \n ",
      "it's IT'S we'll WE'LL they're THEY'RE you've I'm she'd 'LL 're 'S",
      "rock'n'roll o'clock don't 's'",
      "café naïve résumé Ångström straße",
      "e\xCC\x81t\xC3\xA9 cafe\xCC\x81 a\xCC\x80\xCC\x81\xCC\x82",
      "日本語の文章です。中文分词，한국어 텍스트",
      "😀👍🏽 👨\u200D👩\u200D👧\u200D👦 family 🏳️\u200D🌈 flag",
      "12345678901234567890 3.14159 2024-06-01 ٣٤٥ １２３ Ⅻ x²",
      "def foo(bar):\n    return bar + 1\n\n\nprint(foo(41))\n",
      "<|endoftext|>",
      "text<|endoftext|>more text",
      "before <|endoftext|> after",
      "<|endoftext|><|endoftext|>",
      "a<|user|>b [NEW] c",
      "xyzzy plugh axyzzy xyzzyb plughplugh",
      "x <|lstrip|> y <|rstrip|>  z",
      "<|begin_of_text|>Hello<|end_of_text|>",
      "<|im_start|>user\nWhy?<|im_end|>\n<think>\nBecause.\n</think>\n\nSo.",
      "<|user|>  What is it? <|end|>\n<|assistant|> It is.<|end|><|endoftext|>",
      "<start_of_turn>user\n  Two  spaces <end_of_turn>\n<start_of_turn>model\nYes.<end_of_turn><eos>",
      "HTTPServer parseJSONResponse McDonald's ǅungla IPhone iOS XMLHttpRequest ABCs O'NEILL'S ΑΒΓδε",
      "e\xCC\x81\xCC\x81 \xCC\x81start A\xCC\x8A"
      "BC \xCC\x81' path/to/file // a/b\n/c 1234567",
      "\u00A0non-breaking\u3000ideographic\u2028line sep\u0085next",
      "ſ 'ſ x'ſ’s x'ſab 'Sab 'LLama 'REd 'VEry 'Mx 'Tx 'Dx 'ſ1",
      "!!!???...---***",
      "a\u001Cb\u001Fc",
      "    indented code\n\tand tab\n",
  };
}

std::vector<std::string> randomUtf8Strings(std::uint32_t seed, int count) {
  // Code point ranges that exercise every class the scanners distinguish.
  static const std::pair<char32_t, char32_t> kRanges[] = {
      {0x20, 0x7E},     {0x20, 0x7E},     {0x20, 0x7E},       {0x61, 0x7A},     {0x30, 0x39},     {0x09, 0x0D},
      {0xA0, 0xFF},     {0x100, 0x17F},   {0x300, 0x36F},     {0x391, 0x3C9},   {0x410, 0x44F},   {0x4E00, 0x4FFF},
      {0xAC00, 0xAC40}, {0x3040, 0x309F}, {0x1F300, 0x1F64F}, {0x200B, 0x200F}, {0x2000, 0x200A}, {0x660, 0x669},
      {0xFF10, 0xFF19}, {0x2160, 0x2188}, {0xB2, 0xB3},       {0xFE00, 0xFE0F}, {0x1680, 0x1680}, {0x2028, 0x2029},
      {0x85, 0x85},     {0x3000, 0x3000}, {0x27, 0x27},       {0x17F, 0x17F},   {0x1C, 0x1F},
  };
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int k = 0; k < count; ++k) {
    std::string s;
    int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) {
      const auto& r = kRanges[rng() % (sizeof(kRanges) / sizeof(kRanges[0]))];
      char32_t cp = r.first + static_cast<char32_t>(rng() % (r.second - r.first + 1));
      unicode::appendUtf8(s, cp);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string peerProblem() {
  static const std::string problem = [] {
    if (pythonHas("tokenizers")) return std::string();
    return std::string("the HF `tokenizers` package cannot be imported by ") + LATENTLAB_PYTHON +
           "; install it (pip install tokenizers) - these tests compare against it and must not be skipped";
  }();
  return problem;
}

std::vector<fs::path> referenceCorpus() {
  static const std::vector<fs::path> files = [] {
    fs::path dir = scratchDir("tok-corpus");
    fs::path gen = dir / "generated.txt";
    std::ofstream(gen, std::ios::binary) << generatedCorpus(300000, 7);
    std::vector<fs::path> all = {gen};
    for (const auto& f : pythonDocFiles(1500000)) all.push_back(f);
    return all;
  }();
  return files;
}

fs::path hfTokenizer(const std::string& style, bool stringMerges) {
  static std::map<std::string, fs::path> cache;
  std::string key = style + (stringMerges ? "-str" : "");
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  fs::path out = scratchDir("tok-hf-" + key) / "tokenizer.json";
  std::vector<std::string> args = {style, "1200", out.string()};
  for (const auto& f : referenceCorpus()) args.push_back(f.string());
  if (stringMerges) args.push_back("--string-merges");
  run("tok_build.py", args);
  cache[key] = out;
  return out;
}

HfOutput hfEncode(const fs::path& tokenizerJson, const std::vector<std::string>& texts,
                  const std::vector<std::vector<std::int32_t>>& decodeLists) {
  nlohmann::json cases;
  cases["texts_hex"] = nlohmann::json::array();
  for (const auto& t : texts) cases["texts_hex"].push_back(toHex(t));
  cases["decode"] = decodeLists;
  fs::path file = scratchDir("tok-cases") / "cases.json";
  std::ofstream(file) << cases.dump();
  nlohmann::json j = lastJsonLine(run("tok_encode.py", {tokenizerJson.string(), file.string()}));
  HfOutput out;
  out.ids = j.at("ids").get<std::vector<std::vector<std::int32_t>>>();
  out.idsSpecial = j.at("ids_special").get<std::vector<std::vector<std::int32_t>>>();
  for (const auto& h : j.at("decoded")) out.decoded.push_back(fromHex(h.get<std::string>()));
  for (const auto& h : j.at("decoded_skip")) out.decodedSkip.push_back(fromHex(h.get<std::string>()));
  out.vocabSize = j.at("vocab_size").get<int>();
  out.pretok = j.at("pretok").get<std::vector<std::vector<std::string>>>();
  return out;
}

std::string toHex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string fromHex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::string printable(const std::string& s) {
  nlohmann::json j = s;
  return j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

}  // namespace latentlab::test
