// Chooses the attention module of a layer from the model config.
#include "model/latent_attention.h"
#include "model/llama.h"
#include "model/mla_attention.h"

namespace latentlab {

std::shared_ptr<AttentionModule> makeAttention(const ModelConfig& cfg, int layer) {
  if (cfg.latent) return std::make_shared<LatentAttentionLayer>(cfg, layer);
  if (cfg.mla && cfg.mla->converts(layer)) return std::make_shared<MlaAttention>(cfg, layer);
  return std::make_shared<LlamaAttention>(cfg, layer);
}

}  // namespace latentlab
