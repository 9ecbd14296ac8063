// The attention interface every variant implements (original MHA/GQA,
// MHA2MLA-converted, and the from-scratch latent variants), so the decoder
// layer is one code path for all of them.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>
#include <vector>

#include "model/kv_cache.h"
#include "model/rope.h"

namespace latentlab {

struct AttentionContext {
  RopeTables* rope = nullptr;   // this layer's tables (a windowed Gemma-3 layer has its own base)
  std::int64_t startPos = 0;    // position of the first token of x
  LayerCache* cache = nullptr;  // decode cache of this layer, or null (training)
};

class AttentionModule : public torch::nn::Module {
 public:
  // x: (B, T, d) -> (B, T, d)
  virtual torch::Tensor forward(const torch::Tensor& x, AttentionContext& ctx) = 0;
};

// Scaled dot-product attention over (B, H, Tq, D) queries and (B, Hk, Tk, D)
// keys/values with causal masking aligned to the end (the queries are the last
// Tq of Tk positions). Hk may divide H (GQA). With a window W > 0 each query
// sees only the last W keys up to itself (sliding-window attention).
torch::Tensor causalAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                              std::int64_t window = 0);

// Softmax attention over cached tokens read a block at a time (a quantized
// cache, docs/kv_quant.md): scores(b) gives block b's scaled logits
// (..., R, b.len) in the softmax's dtype (fp32, or fp64), -inf where a query
// does not see a key; the softmax runs over the blocks side by side;
// values(p, b) gives p @ V_b (..., R, Dv) for the block's probabilities p.
// Returns the sum of the values. Each block is read for its scores and again
// for its values, so at most one block is ever dequantized at a time.
using BlockScores = std::function<torch::Tensor(const TokenBlock&)>;
using BlockValues = std::function<torch::Tensor(const torch::Tensor&, const TokenBlock&)>;
torch::Tensor blockwiseAttention(const std::vector<TokenBlock>& blocks, const BlockScores& scores,
                                 const BlockValues& values);

// Which of the keys [from, from + len) each of R query rows sees, as a bool
// mask (R, len): query row j sits at position `last - queries + 1 + j % queries`
// and sees keys up to itself, with a window W > 0 only the last W of those.
torch::Tensor visibleKeys(std::int64_t rows, std::int64_t queries, std::int64_t last, std::int64_t from,
                          std::int64_t len, std::int64_t window, const torch::Device& device);

// The same over a quantized cache's K and V slots (docs/kv_quant.md), whose
// last Tq tokens are the queries': the older tokens are read back a block of
// KvQuantSettings::block tokens at a time (scores first, then the values),
// never as one full-size copy; the window in full precision as it is. The
// softmax is in fp32.
torch::Tensor quantizedCausalAttention(const torch::Tensor& q, const QuantizedSlot& k, const QuantizedSlot& v,
                                       double scale, std::int64_t window = 0);

}  // namespace latentlab
