// MHA2MLA conversion of an in-memory model (algorithms.md §2.1-2.2).
#include "convert/converter.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "convert/low_rank.h"
#include "latentlab/error.h"
#include "model/mla_attention.h"

namespace latentlab {

namespace {
double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
torch::Tensor indexTensor(const std::vector<std::int64_t>& v, torch::Device device) {
  return torch::tensor(v, torch::kInt64).to(device);
}
}  // namespace

KvSettings kvSettings(const ConversionOptions& opts) {
  KvSettings s;
  s.method = KvMethod::Mha2Mla;
  s.ropePairs = opts.ropePairs;
  s.dKv = opts.dKv;
  s.svd = opts.svd;
  s.fullRope = opts.rope == RopeStrategy::Full;
  s.uniformStrategy = opts.rope == RopeStrategy::Uniform;
  s.layers = opts.layers;
  s.layerDKv = opts.layerDKv;
  if (!opts.layerDKv.empty()) s.dKv = *std::max_element(opts.layerDKv.begin(), opts.layerDKv.end());
  if (opts.kvBudget.budgetBytes > 0 && opts.layerDKv.empty()) s.dKv = opts.kvBudget.uniformDKv;
  return s;
}

int effectiveRopePairs(const ModelConfig& cfg, const ConversionOptions& opts) {
  if (opts.rope == RopeStrategy::Full) return cfg.ropeDim() / 2;
  return opts.ropePairs > 0 ? opts.ropePairs : defaultRopePairs(cfg.headDim);
}

void validateConversion(const ModelConfig& cfg, const ConversionOptions& opts, bool haveCalibration) {
  if (auto why = checkKvSettings(cfg, kvSettings(opts))) {
    throw Error(ErrorCode::BadInput, "MHA2MLA conversion: " + *why,
                cfg.mla ? "Convert the original checkpoint." : "Adjust r (rope pairs), d_kv or the strategy.");
  }
  if (opts.activations && !haveCalibration) {
    throw Error(ErrorCode::BadInput, "MHA2MLA conversion: activation-aware factorisation needs calibration data",
                "Give a calibration file from the training data, or factorise the weights.");
  }
  if (opts.rope == RopeStrategy::TwoNorm && !haveCalibration) {
    throw Error(ErrorCode::BadInput, "MHA2MLA conversion: S_2-norm needs calibration data",
                "Give a calibration token file from the training data, or choose high/low/uniform.");
  }
}

ModelConfig convertedConfig(const ModelConfig& cfg, const ConversionOptions& opts, const PairSelection& pairs) {
  ModelConfig out = cfg;
  MlaConversion m;
  m.ropeStrategy = opts.rope;
  m.ropePairs = effectiveRopePairs(cfg, opts);
  const KvSettings ks = kvSettings(opts);
  m.dKv = ks.dKv;
  m.layerDKv = opts.layerDKv;
  m.svdMethod = opts.svd;
  if (opts.rope == RopeStrategy::TwoNorm) m.twoNormScore = opts.twoNormScore;
  m.pairs = pairs;
  m.layers = opts.layers;
  out.mla = m;
  out.validate("converted config");
  return out;
}

std::shared_ptr<CausalLm> modelWithBaseOutsideAttention(CausalLm& base, const ModelConfig& cfg) {
  const auto& w0 = base.model->embed_tokens->weight;
  auto out = std::make_shared<CausalLm>(cfg);
  out->to(w0.device(), w0.scalar_type());
  torch::NoGradGuard noGrad;
  std::map<std::string, torch::Tensor> src;
  for (const auto& p : base.named_parameters(true)) src.emplace(p.key(), p.value());
  for (auto& p : out->named_parameters(true)) {
    // A converted layer's attention is built from the factorisation; an
    // unconverted one's (a hybrid model) is the original's.
    if (const auto at = p.key().find(".self_attn."); at != std::string::npos) {
      const auto layerAt = p.key().rfind("layers.", at);
      const int layer = layerAt == std::string::npos ? -1 : std::stoi(p.key().substr(layerAt + 7));
      if (!cfg.mla || cfg.mla->converts(layer)) continue;
    }
    auto it = src.find(p.key());
    if (it == src.end() || it->second.sizes() != p.value().sizes()) {
      throw Error(ErrorCode::Internal, "conversion: parameter '" + p.key() + "' has no original counterpart");
    }
    p.value().copy_(it->second);
  }
  return out;
}

namespace {
// Row indices into q_proj / k_proj in the converted head layout of layer l.
struct LayerRows {
  std::vector<std::int64_t> q, kRope, kNope;
};
LayerRows layerRows(const ModelConfig& cfg, const PairSelection& pairs, int l, int r2) {
  const int nkv = cfg.numKvHeads, dh = cfg.headDim, G = cfg.kvGroupSize();
  LayerRows rows;
  for (int g = 0; g < nkv; ++g) {
    const auto order =
        MlaAttention::headDimOrder(pairs[static_cast<std::size_t>(l)][static_cast<std::size_t>(g)], dh, cfg.ropeDim());
    for (int j = 0; j < dh; ++j)
      (j < r2 ? rows.kRope : rows.kNope)
          .push_back(static_cast<std::int64_t>(g) * dh + order[static_cast<std::size_t>(j)]);
    for (int h = g * G; h < (g + 1) * G; ++h) {
      for (int j = 0; j < dh; ++j)
        rows.q.push_back(static_cast<std::int64_t>(h) * dh + order[static_cast<std::size_t>(j)]);
    }
  }
  return rows;
}
LlamaAttention& originalAttention(CausalLm& base, int l) {
  auto* a = dynamic_cast<LlamaAttention*>(base.layer(l)->self_attn.get());
  if (a == nullptr) {
    throw Error(ErrorCode::BadInput, "conversion: layer " + std::to_string(l) + " is not original MHA/GQA attention",
                "Convert the original checkpoint.");
  }
  return *a;
}
}  // namespace

std::vector<std::vector<double>> latentStepGains(CausalLm& base, const ConversionOptions& opts,
                                                 const PairSelection& pairs, const LayerInputStats* inputs) {
  const ModelConfig& cfg = base.config();
  const auto device = base.model->embed_tokens->weight.device();
  const int r = effectiveRopePairs(cfg, opts), nkv = cfg.numKvHeads;
  const KvSettings ks = kvSettings(opts);
  torch::NoGradGuard noGrad;
  std::vector<std::vector<double>> gains(static_cast<std::size_t>(cfg.numLayers));
  for (int l = 0; l < cfg.numLayers; ++l) {
    if (ks.layers && !std::binary_search(ks.layers->begin(), ks.layers->end(), l)) continue;
    auto& a = originalAttention(base, l);
    const auto rows = layerRows(cfg, pairs, l, cfg.usesRope(l) ? 2 * r : 0);
    auto wkNope = a.k_proj->weight.index_select(0, indexTensor(rows.kNope, device));
    torch::Tensor cov;
    if (opts.activations) cov = inputs->cov[static_cast<std::size_t>(l)];
    std::vector<double> sq;  // squared singular values, largest first (split: both factors' i-th added)
    if (opts.svd == SvdMethod::Joint) {
      auto s = singularValues(torch::cat({wkNope, a.v_proj->weight}, 0), cov).square();
      sq.assign(s.data_ptr<double>(), s.data_ptr<double>() + s.numel());
    } else {
      auto sk = singularValues(wkNope, cov).square(), sv = singularValues(a.v_proj->weight, cov).square();
      const auto n = std::min(sk.numel(), sv.numel());
      auto both = sk.narrow(0, 0, n) + sv.narrow(0, 0, n);
      sq.assign(both.data_ptr<double>(), both.data_ptr<double>() + n);
    }
    // Shares of the layer's own total: every layer's relative error counts
    // alike (docs/conversion.md says why not the raw energies).
    double total = 0.0;
    for (double v : sq) total += v;
    if (total > 0.0) {
      for (double& v : sq) v /= total;
    }
    auto& g = gains[static_cast<std::size_t>(l)];
    for (std::size_t i = 0; i + static_cast<std::size_t>(nkv) <= sq.size(); i += static_cast<std::size_t>(nkv)) {
      double step = 0.0;
      for (int j = 0; j < nkv; ++j) step += sq[i + static_cast<std::size_t>(j)];
      g.push_back(step);
    }
  }
  return gains;
}

std::shared_ptr<CausalLm> buildConvertedModel(CausalLm& base, const ConversionOptions& opts, const PairSelection& pairs,
                                              ProgressSink& progress, const CancelToken& cancel,
                                              std::vector<double>* reconstructionError, const LayerInputStats* inputs,
                                              std::vector<double>* activationError) {
  if (opts.activations && (inputs == nullptr || inputs->empty())) {
    throw Error(ErrorCode::Internal, "activation-aware factorisation without calibration statistics");
  }
  const ModelConfig& cfg = base.config();
  const ModelConfig mcfg = convertedConfig(cfg, opts, pairs);
  const auto device = base.model->embed_tokens->weight.device();
  auto out = modelWithBaseOutsideAttention(base, mcfg);
  torch::NoGradGuard noGrad;

  const int nkv = cfg.numKvHeads;
  if (reconstructionError != nullptr) reconstructionError->clear();
  if (activationError != nullptr) activationError->clear();
  for (int l = 0; l < cfg.numLayers; ++l) {
    throwIfCancelled(cancel, "conversion");
    progress.progress("factorise", l, cfg.numLayers, "layer " + std::to_string(l));
    if (!mcfg.mla->converts(l)) {  // kept as it is (copied with the rest of the model)
      if (reconstructionError != nullptr) reconstructionError->push_back(0.0);
      if (activationError != nullptr && inputs != nullptr && !inputs->empty()) activationError->push_back(0.0);
      continue;
    }
    LlamaAttention* a = &originalAttention(base, l);
    auto* m = dynamic_cast<MlaAttention*>(out->layer(l)->self_attn.get());
    if (m == nullptr)
      throw Error(ErrorCode::Internal, "conversion: layer " + std::to_string(l) + " was not built as MLA");
    const int r2 = cfg.usesRope(l) ? 2 * mcfg.mla->ropePairs : 0;  // a NoPE layer keeps no RoPE dims
    const std::int64_t rank = static_cast<std::int64_t>(nkv) * mcfg.mla->dKvOf(l);
    const auto rows = layerRows(cfg, pairs, l, r2);
    auto qIdx = indexTensor(rows.q, device), ropeIdx = indexTensor(rows.kRope, device),
         nopeIdx = indexTensor(rows.kNope, device);
    m->q_proj->weight.copy_(a->q_proj->weight.index_select(0, qIdx));
    if (r2 > 0) m->k_rope_proj->weight.copy_(a->k_proj->weight.index_select(0, ropeIdx));
    m->o_proj->weight.copy_(a->o_proj->weight);
    if (cfg.qkNorm) {  // the norms keep the original dim order (MlaAttention permutes their gains)
      m->q_norm->weight.copy_(a->q_norm->weight);
      m->k_norm->weight.copy_(a->k_norm->weight);
    }
    if (cfg.oProjBias) m->o_proj->bias.copy_(a->o_proj->bias);
    auto wkNope = a->k_proj->weight.index_select(0, nopeIdx);  // (nkv*nope, d)
    torch::Tensor cov;
    if (inputs != nullptr && !inputs->empty()) cov = inputs->cov[static_cast<std::size_t>(l)];
    auto f = factoriseKv(wkNope, a->v_proj->weight, opts.svd, rank, cov, opts.activations);
    if (opts.svd == SvdMethod::Joint) {
      m->kv_down->weight.copy_(f.kvDown);
      m->kv_up->weight.copy_(f.kvUp);
    } else {
      m->k_down->weight.copy_(f.kDown);
      m->k_up->weight.copy_(f.kUp);
      m->v_down->weight.copy_(f.vDown);
      m->v_up->weight.copy_(f.vUp);
    }
    if (cfg.attentionBias) {
      // W x + b = W_up (W_down x) + b: the biases move after the up-projections.
      m->q_proj->bias.copy_(a->q_proj->bias.index_select(0, qIdx));
      if (r2 > 0) m->k_rope_proj->bias.copy_(a->k_proj->bias.index_select(0, ropeIdx));
      auto bkNope = a->k_proj->bias.index_select(0, nopeIdx);
      if (opts.svd == SvdMethod::Joint) {
        m->kv_up->bias.copy_(torch::cat({bkNope, a->v_proj->bias}));
      } else {
        m->k_up->bias.copy_(bkNope);
        m->v_up->bias.copy_(a->v_proj->bias);
      }
    }
    if (reconstructionError != nullptr) reconstructionError->push_back(f.relError);
    if (activationError != nullptr && f.actError >= 0) activationError->push_back(f.actError);
  }
  progress.progress("factorise", cfg.numLayers, cfg.numLayers, "");
  out->train(base.is_training());
  return out;
}

namespace {
// The first half of every conversion: validation, the calibration pass where
// one is needed (its input statistics into `inputs`) and the pair selection.
void calibrateAndSelect(CausalLm& base, const ConversionOptions& opts, const std::vector<torch::Tensor>& calibration,
                        ProgressSink& progress, const CancelToken& cancel, ConversionStats& s,
                        LayerInputStats& inputs) {
  const ModelConfig& cfg = base.config();
  validateConversion(cfg, opts, !calibration.empty());
  PairNorms norms;
  auto t0 = std::chrono::steady_clock::now();
  // With calibration data the latent's error on the activations is reported
  // whichever way it is factorised; S_2-norm collects both in one pass.
  if (opts.rope == RopeStrategy::TwoNorm) {
    norms = calibratePairNorms(base, calibration, progress, cancel, &inputs);
  } else if (!calibration.empty()) {
    inputs = attentionInputStats(base, calibration, progress, cancel);
  }
  s.calibrationTokens = inputs.tokens;
  s.calibrateSeconds = secondsSince(t0);
  t0 = std::chrono::steady_clock::now();
  s.pairs = selectRopePairs(cfg, opts.rope, effectiveRopePairs(cfg, opts), &norms, opts.twoNormScore);
  s.selectSeconds = secondsSince(t0);
}
}  // namespace

KvAllocation allocateKvBudget(CausalLm& base, const ConversionOptions& opts,
                              const std::vector<torch::Tensor>& calibration, ProgressSink& progress,
                              const CancelToken& cancel) {
  if (opts.kvBudget.budgetBytes <= 0) throw Error(ErrorCode::Internal, "a KV allocation without a budget");
  ConversionStats s;
  LayerInputStats inputs;
  calibrateAndSelect(base, opts, calibration, progress, cancel, s, inputs);
  return allocateKvBudget(opts.kvBudget, latentStepGains(base, opts, s.pairs, &inputs));
}

std::shared_ptr<CausalLm> convertModel(CausalLm& base, const ConversionOptions& opts,
                                       const std::vector<torch::Tensor>& calibration, ProgressSink& progress,
                                       const CancelToken& cancel, ConversionStats* stats,
                                       std::shared_ptr<CausalLm>* uniformAtBudget) {
  ConversionStats local;
  ConversionStats& s = stats != nullptr ? *stats : local;
  LayerInputStats inputs;
  calibrateAndSelect(base, opts, calibration, progress, cancel, s, inputs);
  auto t0 = std::chrono::steady_clock::now();
  ConversionOptions sized = opts;
  if (opts.kvBudget.budgetBytes > 0) {
    s.allocation = allocateKvBudget(opts.kvBudget, latentStepGains(base, opts, s.pairs, &inputs));
    sized.layerDKv = s.allocation->layerDKv;
    if (uniformAtBudget != nullptr) {
      ConversionOptions uniform = opts;
      uniform.kvBudget = {};
      uniform.dKv = opts.kvBudget.uniformDKv;
      *uniformAtBudget = buildConvertedModel(base, uniform, s.pairs, progress, cancel, nullptr, &inputs);
    }
  }
  auto out =
      buildConvertedModel(base, sized, s.pairs, progress, cancel, &s.reconstructionError, &inputs, &s.activationError);
  s.factoriseSeconds = secondsSince(t0);
  return out;
}

std::shared_ptr<CausalLm> convertModel(CausalLm& base, const ConversionOptions& opts,
                                       const std::vector<torch::Tensor>& calibration) {
  NullProgress progress;
  CancelToken cancel;
  return convertModel(base, opts, calibration, progress, cancel);
}

}  // namespace latentlab
