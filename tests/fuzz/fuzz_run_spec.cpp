// Fuzz target: the run spec (every field, nested sections, range and type
// checks, attention variants against the built-in architectures).
#include "fuzz_util.h"
#include "latentlab/run_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  latentlab::fuzz::expectValueOrError([&] {
    const latentlab::RunSpec spec = latentlab::parseRunSpec(text, "fuzz/spec.json");
    (void)latentlab::parseRunSpec(latentlab::runSpecToJson(spec), "fuzz/round-trip.json");
  });
  return 0;
}
