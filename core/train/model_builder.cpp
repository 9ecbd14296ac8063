// Model construction for training runs.
#include "train/model_builder.h"

#include "common/model_config_internal.h"
#include "latentlab/architectures.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "model/weights.h"

namespace latentlab {

std::shared_ptr<CausalLm> convertForRun(CausalLm& base, const ConversionSpec& conv, const TokenShard& calibration,
                                        ProgressSink& progress, const CancelToken& cancel, nlohmann::json& notes);

namespace {
// What the variant is and how its parameters were matched.
nlohmann::json attentionNotes(const ModelConfig& cfg, const RunSpec& spec, std::int64_t baseParameters) {
  nlohmann::json j = {{"variant", spec.attention},
                      {"match", spec.attentionOptions.match},
                      {"architecture_parameters", baseParameters},
                      {"intermediate_size", cfg.intermediateSize},
                      {"attention_parameters_per_layer", attentionParametersPerLayer(cfg)}};
  if (cfg.latent) {
    const LatentAttention& a = *cfg.latent;
    j["latent"] = detail::latentDimensionsJson(a);
  } else {
    j["kv_heads"] = cfg.numKvHeads;
  }
  j["init"] = {{"std", spec.initStd}, {"zero_init_output", spec.zeroInitOutput}};
  return j;
}

// KV cache per token, total and per device at tensor-parallel degrees 1, 2, 4 and 8.
nlohmann::json kvCacheNotes(const ModelConfig& cfg, torch::ScalarType dtype) {
  const DType cacheType = dtype == torch::kFloat64 ? DType::F64 : dtype == torch::kBFloat16 ? DType::BF16 : DType::F32;
  const KvBudget one = currentKvBudget(cfg, cacheType, 1);
  nlohmann::json perDevice = nlohmann::json::object();
  for (int tp : {1, 2, 4, 8}) {
    const KvBudget b = currentKvBudget(cfg, cacheType, tp);
    perDevice[std::to_string(tp)] = {{"elements_per_token_per_layer", b.perDevicePerTokenPerLayer},
                                     {"bytes_per_token", b.perDeviceBytesPerToken}};
  }
  return {{"dtype", dtypeName(cacheType)},
          {"elements_per_token_per_layer", one.perTokenPerLayer},
          {"elements_per_token", one.perToken},
          {"bytes_per_token", one.bytesPerToken},
          {"per_device_by_tp", perDevice}};
}
}  // namespace

void initializeWeights(CausalLm& model, double std, bool zeroOutput) {
  torch::NoGradGuard noGrad;
  for (auto& item : model.named_parameters(true)) {
    const std::string& name = item.key();
    // Norms start as the identity: w = 1, or w = 0 for Gemma's (1 + w).
    if (name.find("norm") != std::string::npos)
      item.value().fill_(model.config().normPlusOne ? 0.0 : 1.0);
    else if (name.ends_with(".bias"))
      item.value().zero_();
    else if (zeroOutput && (name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight")))
      item.value().zero_();
    else
      item.value().normal_(0.0, std);
  }
}

std::shared_ptr<CausalLm> buildModelForRun(const RunSpec& spec, std::uint32_t vocabSize, const TokenShard& calibration,
                                           torch::Device device, torch::ScalarType dtype, ProgressSink& progress,
                                           const CancelToken& cancel, nlohmann::json& notes) {
  std::shared_ptr<CausalLm> model;
  if (!spec.attention.empty() && spec.kind != RunKind::Pretrain) {
    throw Error(ErrorCode::BadSpec,
                "spec.attention: applies to kind pretrain only, not " + std::string(choiceName(spec.kind)));
  }
  if (spec.kind == RunKind::Pretrain) {
    ModelConfig cfg = builtinArchitecture(spec.architecture, static_cast<int>(vocabSize));
    if (!spec.attention.empty()) {
      const std::int64_t baseParameters = countParameters(cfg);
      cfg = attentionVariant(cfg, spec.attention, spec.attentionOptions, "spec");
      notes["attention"] = attentionNotes(cfg, spec, baseParameters);
    }
    torch::manual_seed(spec.seed);
    model = std::make_shared<CausalLm>(cfg);
    initializeWeights(*model, spec.initStd, spec.zeroInitOutput);
  } else {
    model = loadModel(spec.modelDir, torch::kCPU, dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32);
    if (vocabSize > 0 && static_cast<int>(vocabSize) > model->config().vocabSize) {
      throw Error(ErrorCode::BadSpec, "spec.data.tokenizer: the tokenizer has " + std::to_string(vocabSize) +
                                          " tokens but the model's vocabulary is " +
                                          std::to_string(model->config().vocabSize));
    }
    if (spec.conversion.enabled) {
      model = convertForRun(*model, spec.conversion, calibration, progress, cancel, notes);
    }
  }
  model->to(device, dtype);
  notes["parameters"] = countParameters(model->config());
  notes["kv_cache"] = kvCacheNotes(model->config(), dtype);
  return model;
}

}  // namespace latentlab
