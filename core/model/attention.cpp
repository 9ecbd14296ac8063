// Causal scaled-dot-product attention shared by all attention variants.
#include "model/attention.h"

namespace latentlab {

torch::Tensor causalAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              double scale) {
  const auto tq = q.size(2), tk = k.size(2);
  const bool gqa = q.size(1) != k.size(1);
  if (tq == tk) {
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                            /*is_causal=*/true, scale, gqa);
  }
  if (tq == 1) {  // one new token attends to the whole prefix
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0, false, scale, gqa);
  }
  // Chunked prefill on top of a cache: query i sits at position tk - tq + i.
  auto rows = torch::arange(tq, torch::TensorOptions().dtype(torch::kInt64).device(q.device())).unsqueeze(1) + (tk - tq);
  auto cols = torch::arange(tk, torch::TensorOptions().dtype(torch::kInt64).device(q.device())).unsqueeze(0);
  auto mask = cols <= rows;                                        // (tq, tk) bool, true = attend
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, scale, gqa);
}

} // namespace latentlab
