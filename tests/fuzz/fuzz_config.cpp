// Fuzz target: config.json of a model folder (every supported field, the
// MHA2MLA and latent-attention sections, consistency checks).
#include "fuzz_util.h"
#include "latentlab/kv_budget.h"
#include "latentlab/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = latentlab::fuzz::scratchFile("config.json", data, size);
  latentlab::fuzz::expectValueOrError([&] {
    const latentlab::ModelConfig cfg = latentlab::readHfConfig(path);
    (void)latentlab::countParameters(cfg);
    (void)latentlab::currentKvBudget(cfg, latentlab::DType::BF16, 1);
  });
  return 0;
}
