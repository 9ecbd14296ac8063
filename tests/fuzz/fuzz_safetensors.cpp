// Fuzz target: the safetensors reader (header length, JSON header, dtypes,
// shapes, offsets) on arbitrary files; a file it accepts is read tensor by tensor.
#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = latentlab::fuzz::scratchFile("model.safetensors", data, size);
  latentlab::fuzz::expectValueOrError([&] {
    latentlab::SafetensorsFile file(path);
    std::uint64_t sum = 0;
    for (const auto& t : file.tensors()) {
      const std::byte* p = file.data(t);
      for (std::uint64_t i = t.begin; i < t.end; ++i) sum += static_cast<std::uint8_t>(p[i - t.begin]);
    }
    if (sum == 1) std::fputc(' ', stderr);  // keep the reads
  });
  return 0;
}
