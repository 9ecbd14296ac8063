// Fuzz target: tokenizer.json (model, pre-tokenizer, added tokens,
// post-processor, decoder); an accepted tokenizer encodes and decodes a text
// with whitespace runs, digits, CJK, emoji and invalid UTF-8.
#include "fuzz_util.h"
#include "io/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  latentlab::fuzz::expectValueOrError([&] {
    const latentlab::Tokenizer tok = latentlab::Tokenizer::fromJson(json, "fuzz/tokenizer.json");
    static const std::string text = "Hello  world\t\n 123 4567 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xff\xfe ab";
    const auto ids = tok.encode(text, true);
    (void)tok.decode(ids, false);
  });
  return 0;
}
