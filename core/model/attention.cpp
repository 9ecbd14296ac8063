// Causal scaled-dot-product attention shared by all attention variants.
#include "model/attention.h"

#include <algorithm>
#include <limits>

#include "model/decode_attention.h"
#include "model/fused_attention.h"

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
    if (auto out = fusedCausalAttention(q, k, v, scale); out.defined()) return out;  // fp32 on the CPU
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

torch::Tensor blockwiseAttention(const std::vector<TokenBlock>& blocks, const BlockScores& scores,
                                 const BlockValues& values) {
  std::vector<torch::Tensor> logits;
  logits.reserve(blocks.size());
  for (const TokenBlock& b : blocks) logits.push_back(scores(b));
  const auto p = torch::softmax(logits.size() == 1 ? logits.front() : torch::cat(logits, -1), -1);
  torch::Tensor out;
  std::int64_t at = 0;
  for (const TokenBlock& b : blocks) {
    auto y = values(p.narrow(-1, at, b.len), b);
    out = out.defined() ? out.add_(y) : y;
    at += b.len;
  }
  return out;
}

torch::Tensor visibleKeys(std::int64_t rows, std::int64_t queries, std::int64_t last, std::int64_t from,
                          std::int64_t len, std::int64_t window, const torch::Device& device) {
  const auto opts = torch::TensorOptions().dtype(torch::kInt64).device(device);
  auto pos = (torch::arange(rows, opts) % queries + (last - queries + 1)).unsqueeze(1);
  auto cols = torch::arange(from, from + len, opts).unsqueeze(0);
  auto m = cols <= pos;
  if (window > 0) m = m.logical_and(cols > pos - window);
  return m;  // (rows, len)
}

torch::Tensor quantizedCausalAttention(const torch::Tensor& q, const QuantizedSlot& k, const QuantizedSlot& v,
                                       double scale, std::int64_t window) {
  const auto B = q.size(0), H = q.size(1), tq = q.size(2), D = q.size(3);
  const auto hk = k.fullView().size(1), G = H / hk;
  const std::int64_t total = k.length();
  // Keys before the first query's window are never read.
  const std::int64_t from = window > 0 ? std::max<std::int64_t>(0, total - tq - window + 1) : 0;
  const std::vector<TokenBlock> blocks = k.blocks(from);
  if (blocks.size() <= 2 && (blocks.size() == 1 || blocks.back().from >= k.quantizedLength())) {
    // At most one block of codes and the window: read back as one block and
    // attended to in one pass (the decode kernel on the CPU), no per-block softmax.
    const TokenBlock all{from, total - from};
    return causalAttention(q, k.tokens(all), v.tokens(all), scale, window);
  }
  const auto qg = q.reshape({B, hk, G * tq, D}).to(torch::kFloat32);  // row j: query head g*G + j / tq, query j % tq
  const auto out = blockwiseAttention(
      blocks,
      [&](const TokenBlock& b) {
        auto s = torch::matmul(qg, k.tokens(b).to(torch::kFloat32).transpose(2, 3)) * scale;  // (B, hk, G*tq, len)
        if (tq == 1) return s;  // one query: the blocks start at its window and end at itself
        return s.masked_fill(visibleKeys(G * tq, tq, total - 1, b.from, b.len, window, q.device()).logical_not(),
                             -std::numeric_limits<float>::infinity());
      },
      [&](const torch::Tensor& p, const TokenBlock& b) { return torch::matmul(p, v.tokens(b).to(torch::kFloat32)); });
  return out.view({B, H, tq, out.size(3)}).to(q.scalar_type());
}

}  // namespace latentlab
