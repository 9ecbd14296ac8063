// DeepSeek-target conversion of an MHA/GQA model (docs/conversion.md).
#include "convert/deepseek_convert.h"

#include <cmath>

#include "convert/converter.h"
#include "convert/low_rank.h"
#include "latentlab/error.h"
#include "model/latent_attention.h"

namespace latentlab {

namespace {
torch::Tensor rowsOf(const std::vector<std::int64_t>& v, torch::Device device) {
  return torch::tensor(v, torch::kInt64).to(device);
}
double trace(const torch::Tensor& w, const torch::Tensor& cov) {  // tr(W cov W^T)
  return (torch::matmul(w, cov) * w).sum().item<double>();
}
}  // namespace

KvSettings kvSettings(const DeepSeekOptions& opts) {
  KvSettings s;
  s.method = KvMethod::DeepSeek;
  s.ropePairs = opts.ropePairs;
  s.ropeWidth = opts.ropeWidth;
  s.freqFold = opts.freqFold;
  s.dKv = opts.dKv;
  return s;
}

void validateDeepSeekConversion(const ModelConfig& cfg, const DeepSeekOptions& opts) {
  if (auto why = checkKvSettings(cfg, kvSettings(opts))) {
    throw Error(ErrorCode::BadInput, "DeepSeek-target conversion: " + *why,
                cfg.mla || cfg.latent ? "Convert the original checkpoint." : "Adjust d_R, the fold or d_kv.");
  }
}

ModelConfig deepSeekConfig(const ModelConfig& cfg, const DeepSeekOptions& opts) {
  return deepSeekConvertedConfig(cfg, kvSettings(opts), opts.activations, opts.latentNorm);
}

namespace {

// Every layer's calibration statistics: the latent and its norm are set from them.
void requireCalibration(const ModelConfig& cfg, const LayerInputStats& stats) {
  if (static_cast<int>(stats.cov.size()) != cfg.numLayers || stats.tokens < 1) {
    throw Error(ErrorCode::BadInput, "DeepSeek-target conversion needs calibration statistics for every layer",
                "Give calibration text or token ids from the training data.");
  }
}

// Layer l's original attention in `base` and the latent attention that replaces it in `out`.
std::pair<LlamaAttention*, LatentAttentionLayer*> attentionPair(CausalLm& base, CausalLm& out, int l) {
  auto* a = dynamic_cast<LlamaAttention*>(base.layer(l)->self_attn.get());
  auto* m = dynamic_cast<LatentAttentionLayer*>(out.layer(l)->self_attn.get());
  if (a == nullptr || m == nullptr) {
    throw Error(ErrorCode::BadInput, "conversion: layer " + std::to_string(l) + " is not original MHA/GQA attention",
                "Convert the original checkpoint.");
  }
  return {a, m};
}

// One layer's keys after RoRoPE: the shared RoPE key's rows, every query
// head's matching rows, the residual keys left for the latent, and the key
// energy the RoPE key carries.
struct RoRopeSplit {
  torch::Tensor kpe, qpe, res;
  double keptEnergy = 0.0;
};

// The shapes every layer's conversion shares, and the steps of one layer.
struct LayerConverter {
  const DeepSeekOptions& opts;
  const RoRopeLayout& layout;
  torch::Device device;
  int nh, nkv, dh, half, G;
  int f, c, dR;
  std::int64_t d, rank;
  double qFactor;
  torch::TensorOptions f64;
  torch::Tensor headGroup;

  LayerConverter(const ModelConfig& cfg, const ModelConfig& mcfg, const DeepSeekOptions& options,
                 const RoRopeLayout& ropeLayout, torch::Device dev)
      : opts(options),
        layout(ropeLayout),
        device(dev),
        nh(cfg.numHeads),
        nkv(cfg.numKvHeads),
        dh(cfg.headDim),
        half(dh / 2),
        G(cfg.kvGroupSize()),
        f(layout.fold),
        c(layout.components),
        dR(layout.width),
        d(cfg.hiddenSize),
        rank(mcfg.latent->dC),
        // The original softmax scale (yarn's factor included) moved into the queries.
        qFactor(cfg.softmaxScale(dh) * std::sqrt(static_cast<double>(dh + dR))),
        f64(torch::TensorOptions(torch::kFloat64).device(device)) {
    // Query head h reads KV head h / G.
    std::vector<std::int64_t> groupOfHead;
    for (int h = 0; h < nh; ++h) groupOfHead.push_back(h / G);
    headGroup = rowsOf(groupOfHead, device);
  }

  // RoRoPE, group by group: one PCA over the 2-D components of every KV head
  // and every folded pair of the group; its top c components become RoPE
  // dims of the shared key, the rest stays in the keys as the residual.
  // `ck` is the keys' second moment on the calibration tokens.
  RoRopeSplit roRope(const torch::Tensor& wq, const torch::Tensor& wk, const torch::Tensor& ck) const {
    RoRopeSplit s;
    s.kpe = torch::zeros({dR, d}, f64);
    s.qpe = torch::zeros({nh, dR, d}, f64);
    s.res = wk.clone();
    for (int k = 0; k < layout.groups; ++k) {
      std::vector<std::int64_t> xs, ys, qx, qy;  // component a = g*f + i
      for (int g = 0; g < nkv; ++g) {
        for (int i = 0; i < f; ++i) {
          xs.push_back(static_cast<std::int64_t>(g) * dh + k * f + i);
          ys.push_back(static_cast<std::int64_t>(g) * dh + k * f + i + half);
        }
      }
      for (int i = 0; i < f; ++i) {
        qx.push_back(k * f + i);
        qy.push_back(k * f + i + half);
      }
      auto ix = rowsOf(xs, device), iy = rowsOf(ys, device);
      auto mcov = ck.index_select(0, ix).index_select(1, ix) + ck.index_select(0, iy).index_select(1, iy);  // (n, n)
      mcov = (mcov + mcov.t()) * 0.5;
      auto [evals, evecs] = at::linalg_eigh(mcov);
      auto u = evecs.flip({1}).narrow(1, 0, c);  // (n, c), largest first
      s.keptEnergy += evals.flip({0}).narrow(0, 0, c).sum().item<double>();
      auto kx = wk.index_select(0, ix), ky = wk.index_select(0, iy);      // (n, d)
      auto rx = torch::matmul(u.t(), kx), ry = torch::matmul(u.t(), ky);  // (c, d)
      s.kpe.narrow(0, k * c, c).copy_(rx);
      s.kpe.narrow(0, dR / 2 + k * c, c).copy_(ry);
      s.res.index_copy_(0, ix, kx - torch::matmul(u, rx));
      s.res.index_copy_(0, iy, ky - torch::matmul(u, ry));
      // Query head h's component j: sum_i u[(g(h), i), j] q_h,i.
      auto uh = u.view({nkv, f, c}).index_select(0, headGroup);  // (nh, f, c)
      auto qxs = wq.index_select(1, rowsOf(qx, device));         // (nh, f, d)
      auto qys = wq.index_select(1, rowsOf(qy, device));
      s.qpe.narrow(1, k * c, c).copy_(torch::matmul(uh.transpose(1, 2), qxs));
      s.qpe.narrow(1, dR / 2 + k * c, c).copy_(torch::matmul(uh.transpose(1, 2), qys));
    }
    return s;
  }

  // One layer: `a`'s weights through RoRoPE, key/value balancing and the
  // joint latent into `m`, with the latent norm set from `cov` (the layer's
  // input statistics over `tokens` calibration tokens); its figures appended
  // to `layerStats` when given.
  void convertLayer(LlamaAttention& a, LatentAttentionLayer& m, const torch::Tensor& cov, std::int64_t tokens,
                    std::vector<DeepSeekLayerStats>* layerStats) const {
    auto wq = a.q_proj->weight.to(torch::kFloat64).view({nh, dh, d});
    auto wk = a.k_proj->weight.to(torch::kFloat64);  // (nkv*dh, d)
    auto wv = a.v_proj->weight.to(torch::kFloat64);
    auto ck = torch::matmul(torch::matmul(wk, cov), wk.t());  // key second moment (nkv*dh, nkv*dh)
    const double keyEnergy = ck.trace().item<double>();
    const RoRopeSplit rope = roRope(wq, wk, ck);

    // Key/value balancing: the residual keys scaled to the values' energy
    // (queries by the inverse), so neither dominates the joint latent.
    const double ev = trace(wv, cov), ek = trace(rope.res, cov);
    const double alpha = opts.balance && ek > 1e-12 * std::max(keyEnergy, 1e-300) ? std::sqrt(ev / ek) : 1.0;
    auto wkv = torch::cat({rope.res * alpha, wv}, 0);  // (2 nkv dh, d)
    auto fac = opts.activations ? activationFactor(wkv, cov, rank) : orthonormalSvdFactor(wkv, rank);
    auto up = fac.up.to(torch::kFloat64), down = fac.down.to(torch::kFloat64);  // (2 nkv dh, rank), (rank, d)
    // kv_b_proj: head h gets its KV head's [k_nope; v] rows.
    auto upK = up.narrow(0, 0, static_cast<std::int64_t>(nkv) * dh).view({nkv, dh, rank}).index_select(0, headGroup);
    auto upV = up.narrow(0, static_cast<std::int64_t>(nkv) * dh, static_cast<std::int64_t>(nkv) * dh)
                   .view({nkv, dh, rank})
                   .index_select(0, headGroup);
    auto kvB = torch::cat({upK, upV}, 1).reshape({static_cast<std::int64_t>(nh) * 2 * dh, rank});
    auto q = torch::cat({wq / alpha, rope.qpe}, 1).reshape({static_cast<std::int64_t>(nh) * (dh + dR), d}) * qFactor;

    m.q_proj->weight.copy_(q);
    m.kv_a_proj_with_mqa->weight.copy_(torch::cat({down, rope.kpe}, 0));
    m.kv_b_proj->weight.copy_(kvB);
    m.o_proj->weight.copy_(a.o_proj->weight);
    // The latent norm's weight: the latent's RMS over the calibration tokens,
    // sqrt(tr(A cov A^T) / (tokens * rank)), so that norm(c) ~ c on them.
    const double normWeight = std::sqrt(trace(down, cov) / (static_cast<double>(tokens) * rank));
    if (m.kv_a_layernorm) m.kv_a_layernorm->weight.fill_(normWeight);

    if (layerStats != nullptr) {
      DeepSeekLayerStats s;
      s.ropeEnergyKept = keyEnergy > 0 ? rope.keptEnergy / keyEnergy : 0.0;
      s.balance = alpha;
      s.latentWeightError = relativeError(wkv, fac);
      s.latentActError = activationError(wkv, cov, fac);
      s.normWeight = normWeight;
      layerStats->push_back(s);
    }
  }
};

}  // namespace

std::shared_ptr<CausalLm> convertToDeepSeek(CausalLm& base, const DeepSeekOptions& opts, const LayerInputStats& stats,
                                            ProgressSink& progress, const CancelToken& cancel,
                                            std::vector<DeepSeekLayerStats>* layerStats) {
  const ModelConfig& cfg = base.config();
  validateDeepSeekConversion(cfg, opts);
  requireCalibration(cfg, stats);
  const ModelConfig mcfg = deepSeekConfig(cfg, opts);
  RoRopeLayout layout;
  roRopeLayout(cfg, mcfg.latent->dRope, opts.freqFold, &layout);
  const auto device = base.model->embed_tokens->weight.device();
  auto out = modelWithBaseOutsideAttention(base, mcfg);
  torch::NoGradGuard noGrad;
  const LayerConverter converter(cfg, mcfg, opts, layout, device);
  if (layerStats != nullptr) layerStats->clear();

  for (int l = 0; l < cfg.numLayers; ++l) {
    throwIfCancelled(cancel, "conversion");
    progress.progress("factorise", l, cfg.numLayers, "layer " + std::to_string(l));
    auto [a, m] = attentionPair(base, *out, l);
    const auto& cov = stats.cov[static_cast<std::size_t>(l)].to(device, torch::kFloat64);
    converter.convertLayer(*a, *m, cov, stats.tokens, layerStats);
  }
  progress.progress("factorise", cfg.numLayers, cfg.numLayers, "");
  out->train(base.is_training());
  return out;
}

}  // namespace latentlab
