// RoPE pair selection: static lists and 2-norm calibration (algorithms.md §2.1).
#include "convert/rope_selection.h"

#include <algorithm>
#include <numeric>

#include "latentlab/error.h"

namespace latentlab {
namespace F = torch::nn::functional;

// A bad name given to the converter is bad input (a flag or a convert spec).
RopeStrategy parseRopeStrategy(const std::string& name, const std::string& field) {
  try {
    return parseChoice<RopeStrategy>(name, field);
  } catch (const Error& e) {
    throw Error(ErrorCode::BadInput, e.message(), e.hint());
  }
}

const char* ropeStrategyName(RopeStrategy s) {
  return choiceName(s).data();
}

TwoNormScore parseTwoNormScore(const std::string& name, const std::string& field) {
  if (name.empty()) return TwoNormScore::Product;
  try {
    return parseChoice<TwoNormScore>(name, field);
  } catch (const Error& e) {
    throw Error(ErrorCode::BadInput, e.message(), e.hint());
  }
}

const char* twoNormScoreName(TwoNormScore s) {
  return choiceName(s).data();
}

PairNorms calibratePairNorms(CausalLm& model, const std::vector<torch::Tensor>& batches, ProgressSink& progress,
                             const CancelToken& cancel, LayerInputStats* inputs) {
  const ModelConfig& cfg = model.config();
  // Pairs of the rotating dims only (a Phi-3 head's trailing dims never rotate).
  const int L = cfg.numLayers, nh = cfg.numHeads, nkv = cfg.numKvHeads, dh = cfg.headDim, half = cfg.ropeDim() / 2;
  if (batches.empty()) {
    throw Error(ErrorCode::BadInput, "2-norm calibration: no calibration sequences",
                "S_2-norm needs token ids from the training data (calibration data file).");
  }
  PairNorms out;
  out.query = torch::zeros({L, nh, half}, torch::kFloat64);
  out.key = torch::zeros({L, nkv, half}, torch::kFloat64);
  // Pair norms of (B, T, H*dh) projections summed over tokens -> (H, half) fp64.
  // With QK norms the pairs are measured after the norm: what RoPE turns.
  auto pairNormSum = [&](const torch::Tensor& proj, int heads, RmsNorm norm) {
    auto p = proj.view({proj.size(0), proj.size(1), heads, dh});  // (B, T, H, dh)
    if (norm) p = norm->forward(p);
    p = p.to(torch::kFloat64).view({-1, heads, dh});               // (B*T, H, dh)
    auto a = p.narrow(-1, 0, half), b = p.narrow(-1, half, half);  // dims k and k + d_rot/2
    return (a.square() + b.square()).sqrt().sum(0).cpu();          // (H, half)
  };
  if (inputs != nullptr) *inputs = emptyInputStats(model);
  out.tokens = forEachAttentionInput(model, batches, progress, cancel, "2-norm calibration",
                                     [&](int l, LlamaAttention& attn, const torch::Tensor& h) {
                                       if (attn.usesRope()) {  // NoPE layers keep no pairs
                                         out.query[l] += pairNormSum(attn.q_proj(h), nh, attn.q_norm);
                                         out.key[l] += pairNormSum(attn.k_proj(h), nkv, attn.k_norm);
                                       }
                                       if (inputs != nullptr) addAttentionInput(*inputs, l, h);
                                     });
  if (inputs != nullptr) inputs->tokens = out.tokens;
  out.query /= static_cast<double>(out.tokens);
  out.key /= static_cast<double>(out.tokens);
  return out;
}

torch::Tensor twoNormScores(const PairNorms& norms, int kvHeads, TwoNormScore score) {
  const auto L = norms.query.size(0), nh = norms.query.size(1), half = norms.query.size(2);
  auto q = norms.query.view({L, kvHeads, nh / kvHeads, half}).sum(2);  // (L, n_kv, half)
  return score == TwoNormScore::Product ? q * norms.key : q + norms.key;
}

PairSelection selectRopePairs(const ModelConfig& cfg, RopeStrategy strategy, int ropePairs, const PairNorms* norms,
                              TwoNormScore score) {
  const int half = cfg.ropeDim() / 2;
  const int r = strategy == RopeStrategy::Full ? half : ropePairs;
  if (r < 1 || r > half) {
    throw Error(ErrorCode::BadInput, "r = " + std::to_string(r) + " must be in [1, " + std::to_string(half) +
                                         "] frequency pairs per head (the pairs of the rotating dims)");
  }
  std::vector<int> fixed;
  switch (strategy) {
    case RopeStrategy::High:
    case RopeStrategy::Full:
      for (int k = 0; k < r; ++k) fixed.push_back(k);
      break;
    case RopeStrategy::Low:
      for (int k = half - r; k < half; ++k) fixed.push_back(k);
      break;
    case RopeStrategy::Uniform:
      if (half % r != 0) {
        throw Error(ErrorCode::BadInput, "S_uniform needs r to divide " +
                                             std::string(cfg.rotaryDim > 0 ? "the rotating pairs" : "d_h/2") + " = " +
                                             std::to_string(half) + " (got r = " + std::to_string(r) + ")");
      }
      for (int k = 0; k < half; k += half / r) fixed.push_back(k);
      break;
    case RopeStrategy::TwoNorm:
      break;
  }
  const auto L = static_cast<std::size_t>(cfg.numLayers), nkv = static_cast<std::size_t>(cfg.numKvHeads);
  if (strategy != RopeStrategy::TwoNorm) {
    PairSelection out(L, std::vector<std::vector<int>>(nkv, fixed));
    for (int l : cfg.nopeLayers) out[static_cast<std::size_t>(l)] = std::vector<std::vector<int>>(nkv);
    return out;
  }
  if (norms == nullptr || !norms->query.defined()) {
    throw Error(ErrorCode::BadInput, "S_2-norm needs calibration statistics",
                "Give calibration data (token ids from the training data).");
  }
  auto scores = twoNormScores(*norms, cfg.numKvHeads, score).contiguous();  // (L, n_kv, half)
  auto acc = scores.accessor<double, 3>();
  PairSelection out(L, std::vector<std::vector<int>>(nkv));
  for (std::size_t l = 0; l < L; ++l) {
    if (!cfg.usesRope(static_cast<int>(l))) continue;  // a NoPE layer keeps no pairs
    for (std::size_t g = 0; g < nkv; ++g) {
      std::vector<int> order(static_cast<std::size_t>(half));
      std::iota(order.begin(), order.end(), 0);
      // Highest score first; ties keep the higher frequency (lower index).
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return acc[static_cast<std::int64_t>(l)][static_cast<std::int64_t>(g)][a] >
               acc[static_cast<std::int64_t>(l)][static_cast<std::int64_t>(g)][b];
      });
      order.resize(static_cast<std::size_t>(r));
      std::sort(order.begin(), order.end());
      out[l][g] = order;
    }
  }
  return out;
}

}  // namespace latentlab
