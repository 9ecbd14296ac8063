// Chooses the attention module of a layer from the model config.
#include "model/llama.h"
#include "model/mla_attention.h"

namespace latentlab {

std::shared_ptr<AttentionModule> makeAttention(const ModelConfig& cfg, int layer) {
  if (cfg.mla) return std::make_shared<MlaAttention>(cfg, layer);
  return std::make_shared<LlamaAttention>(cfg);
}

}  // namespace latentlab
