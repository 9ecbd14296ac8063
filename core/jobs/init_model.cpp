// initModel: a randomly initialised checkpoint of a given shape.
#include "latentlab/engine.h"
#include "model/torch_util.h"
#include "model/weights.h"

namespace latentlab {

void initModel(const ModelConfig& cfg, const std::filesystem::path& outDir, std::uint64_t seed, DType saveDType,
               double initStd) {
  withTorchErrors("init", [&]() {
    cfg.validate("init");
    torch::manual_seed(seed);
    CausalLm model(cfg);
    torch::NoGradGuard noGrad;
    for (auto& item : model.named_parameters(true)) {
      const std::string& name = item.key();
      // Norms start as the identity: w = 1, or w = 0 for Gemma's (1 + w).
      if (name.find("norm") != std::string::npos)
        item.value().fill_(model.config().normPlusOne ? 0.0 : 1.0);
      else if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0)
        item.value().zero_();
      else
        item.value().normal_(0.0, initStd);
    }
    saveModel(model, outDir, saveDType, {{"producer", "latentlab init"}});
  });
}

}  // namespace latentlab
