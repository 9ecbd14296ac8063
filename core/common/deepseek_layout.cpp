// Whether a model's attention can be written in DeepSeek-V3's layout
// (docs/conversion.md, "Export"): the checks made before any weight is read.
#include "common/deepseek_layout.h"

#include <cmath>

#include "latentlab/convert.h"

namespace latentlab {

// The RoPE base the exported head needs, or why there is none.
std::optional<std::string> exportedRopeTheta(const ModelConfig& cfg, double* theta) {
  const LatentAttention& a = *cfg.latent;
  if (a.ropeSourcePairs.empty()) {
    *theta = cfg.ropeTheta;
    return std::nullopt;
  }
  const auto& p = a.ropeSourcePairs;
  const int n = static_cast<int>(p.size());
  const int stride = n > 1 ? p[1] - p[0] : 1;
  bool evenlySpaced = p[0] == 0 && stride >= 1;
  for (int t = 0; t < n && evenlySpaced; ++t) evenlySpaced = p[static_cast<std::size_t>(t)] == t * stride;
  if (!evenlySpaced) {
    return "its shared RoPE key turns at frequencies DeepSeek-V3's table cannot give (pairs must be 0, s, 2s, ... of "
           "the original head, each once; a RoPE key wider than d_h/fold repeats frequencies)";
  }
  *theta = std::pow(cfg.ropeTheta, static_cast<double>(stride) * a.dRope / a.ropeSourceHeadDim);
  return std::nullopt;
}

std::optional<std::string> deepSeekExportProblem(const ModelConfig& cfg) {
  if (cfg.mla) {
    return std::string(
        "it is an MHA2MLA-target conversion: RoPE stays on each KV head's own frequency pairs and the latent has no "
        "norm, while DeepSeek-V3 has one shared RoPE key on a fixed frequency table and an RMSNorm on the latent, so "
        "its attention cannot be written in that layout. Convert the original model with --target deepseek");
  }
  if (!cfg.latent) return std::string("it is an original MHA/GQA model; convert it with --target deepseek first");
  const LatentAttention& a = *cfg.latent;
  if (a.kind != LatentKind::Mla) {
    return "it is " + a.name() + " (" + std::to_string(a.latentHeads) + " latent heads, " + std::to_string(a.branches) +
           " branches); DeepSeek-V3 has one latent shared by every head";
  }
  if (!a.latentNorm) return std::string("its latent has no RMSNorm (kv_a_layernorm), which DeepSeek-V3 always applies");
  if (cfg.attentionBias || cfg.oProjBias || cfg.mlpBias) return std::string("it has biases DeepSeek-V3 does not have");
  if (cfg.slidingWindow) return std::string("it uses a sliding window, which DeepSeek-V3 attention has not");
  const std::string& t = cfg.ropeScaling.type;
  if (t != "default" && t != "linear" && t != "llama3") {
    return "its RoPE scaling (" + t +
           ") depends on the head width, which the export changes; only default, linear "
           "and llama3 scaling carry over exactly";
  }
  double theta = 0.0;
  return exportedRopeTheta(cfg, &theta);
}

}  // namespace latentlab
