// Model construction for training runs.
#include "train/model_builder.h"

#include "latentlab/architectures.h"
#include "latentlab/error.h"
#include "model/weights.h"

namespace latentlab {

std::shared_ptr<CausalLm> convertForRun(CausalLm& base, const ConversionSpec& conv, const TokenShard& calibration,
                                        ProgressSink& progress, const CancelToken& cancel, nlohmann::json& notes);

void initializeWeights(CausalLm& model, double std, bool zeroOutput) {
  torch::NoGradGuard noGrad;
  for (auto& item : model.named_parameters(true)) {
    const std::string& name = item.key();
    auto endsWith = [&](const std::string& s) {
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (name.find("norm") != std::string::npos) item.value().fill_(1.0);
    else if (endsWith(".bias")) item.value().zero_();
    else if (zeroOutput && (endsWith("o_proj.weight") || endsWith("down_proj.weight"))) item.value().zero_();
    else item.value().normal_(0.0, std);
  }
}

std::shared_ptr<CausalLm> buildModelForRun(const RunSpec& spec, std::uint32_t vocabSize, const TokenShard& calibration,
                                           torch::Device device, torch::ScalarType dtype, ProgressSink& progress,
                                           const CancelToken& cancel, nlohmann::json& notes) {
  std::shared_ptr<CausalLm> model;
  if (!spec.attention.empty()) {
    // Never train a different architecture than the spec names.
    throw Error(ErrorCode::Unsupported,
                "spec.attention: the from-scratch variant '" + spec.attention + "' is not available in this engine yet",
                "Leave attention empty to train the architecture's own MHA/GQA attention.");
  }
  if (spec.kind == "pretrain") {
    ModelConfig cfg = builtinArchitecture(spec.architecture, static_cast<int>(vocabSize));
    torch::manual_seed(spec.seed);
    model = std::make_shared<CausalLm>(cfg);
    initializeWeights(*model, spec.initStd, spec.zeroInitOutput);
  } else {
    model = loadModel(spec.modelDir, torch::kCPU, dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32);
    if (vocabSize > 0 && static_cast<int>(vocabSize) > model->config().vocabSize) {
      throw Error(ErrorCode::BadSpec, "spec.data.tokenizer: the tokenizer has " + std::to_string(vocabSize) +
                  " tokens but the model's vocabulary is " + std::to_string(model->config().vocabSize));
    }
    if (spec.conversion.enabled) {
      model = convertForRun(*model, spec.conversion, calibration, progress, cancel, notes);
    }
  }
  model->to(device, dtype);
  notes["parameters"] = countParameters(model->config());
  return model;
}

} // namespace latentlab
