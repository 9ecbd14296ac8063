// Causal scaled-dot-product attention shared by all attention variants.
#include "model/attention.h"

#include <algorithm>

#include "model/decode_attention.h"

namespace latentlab {

torch::Tensor causalAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                              std::int64_t window) {
  const auto tq = q.size(2), tk = k.size(2);
  if (window > 0 && tk > window) {
    // Query i (at position tk - tq + i) sees keys (pos - window, pos]: the keys
    // before the first query's window are dropped, the rest masked per query.
    const std::int64_t start = std::max<std::int64_t>(0, tk - tq - window + 1);
    auto kw = k.narrow(2, start, tk - start), vw = v.narrow(2, start, tk - start);
    if (tq == 1) return causalAttention(q, kw, vw, scale);  // every key left is in the window
    const auto opts = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
    auto rows = torch::arange(tq, opts).unsqueeze(1) + (tk - tq - start);
    auto cols = torch::arange(tk - start, opts).unsqueeze(0);
    auto mask = (cols <= rows).logical_and(cols > rows - window);  // (tq, tk - start) bool, true = attend
    return at::scaled_dot_product_attention(q, kw, vw, mask, 0.0, false, scale, q.size(1) != k.size(1));
  }
  const bool gqa = q.size(1) != k.size(1);
  if (tq == tk) {
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                            /*is_causal=*/true, scale, gqa);
  }
  if (tq < tk && fusedDecodeApplies(q, k, tq)) {
    // Decoding on the CPU: one pass over the cache. Query heads of KV head g are
    // g*G .. g*G+G-1, so (B, H, tq, D) views as (B, Hk, G*tq, D), row j = query j % tq.
    const auto B = q.size(0), hk = k.size(1);
    DecodeAttentionInputs in;
    in.q = q.contiguous().view({B, hk, -1, q.size(3)});  // (B, Hk, G*tq, D)
    in.k = k;
    in.v = v;
    in.queries = tq;
    in.scale = scale;
    return fusedDecodeAttention(in).view({B, q.size(1), tq, v.size(3)});  // (B, H, tq, Dv)
  }
  if (tq == 1) {  // one new token attends to the whole prefix
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0, false, scale, gqa);
  }
  // Chunked prefill on top of a cache: query i sits at position tk - tq + i.
  auto rows =
      torch::arange(tq, torch::TensorOptions().dtype(torch::kInt64).device(q.device())).unsqueeze(1) + (tk - tq);
  auto cols = torch::arange(tk, torch::TensorOptions().dtype(torch::kInt64).device(q.device())).unsqueeze(0);
  auto mask = cols <= rows;  // (tq, tk) bool, true = attend
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, scale, gqa);
}

}  // namespace latentlab
