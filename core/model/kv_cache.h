// Decode-time cache: per layer a few named buffers that grow along the
// sequence dimension (dim 2 of (B, H, T, D) tensors) with amortised doubling.
// Original models cache K and V; converted MLA caches the latent and the RoPE key.
// A quantized cache (docs/kv_quant.md) keeps a slot's newest `residual`
// tokens in full precision and the older ones as codes with a scale and a
// zero-point per token and group, read back a block at a time.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <vector>

#include "latentlab/kv_quant.h"

namespace latentlab {

// Tokens [from, from + len) of a cache.
struct TokenBlock {
  std::int64_t from = 0, len = 0;
};

// One slot of a quantized cache.
class QuantizedSlot {
 public:
  QuantizedSlot(const KvQuantSettings& q, std::int64_t reserve) : m_q(q), m_reserve(reserve) {}
  // Appends chunk (B, H, T, D); tokens older than the residual window move to codes.
  void append(const torch::Tensor& chunk);
  std::int64_t quantizedLength() const { return m_quantized; }
  std::int64_t length() const { return m_quantized + (m_filled - m_start); }
  // The newest tokens, in full precision: (B, H, length() - quantizedLength(), D).
  torch::Tensor fullView() const;
  // Quantized tokens [start, start + len) dequantized: (B, H, len, D) in the cache's dtype.
  torch::Tensor dequantized(std::int64_t start, std::int64_t len) const;
  // Tokens of b as they read back (B, H, b.len, D): dequantized, the window as
  // it is, or both side by side where b spans them.
  torch::Tensor tokens(const TokenBlock& b) const;
  // The blocks a reader visits from token `from` on: the quantized tokens
  // KvQuantSettings::block at a time, then the full-precision window as one block.
  std::vector<TokenBlock> blocks(std::int64_t from) const;
  std::int64_t bytes() const;
  void repeatRows(std::int64_t n);

 private:
  void quantizeOldest(std::int64_t tokens);
  KvQuantSettings m_q;
  std::int64_t m_reserve = 0;
  torch::Tensor m_full;  // (B, H, capacity, D): tokens [m_start, m_filled) are held
  std::int64_t m_start = 0, m_filled = 0;
  torch::Tensor m_codes, m_scale, m_zero;  // (B, H, capacity, ...): the first m_quantized tokens
  std::int64_t m_quantized = 0;
};

class LayerCache {
 public:
  // Appends `chunk` (B, H, T, D) to buffer `slot` and returns the whole
  // prefix (B, H, length, D) as a view.
  torch::Tensor append(int slot, const torch::Tensor& chunk);
  torch::Tensor view(int slot) const;
  // A quantized cache (KvCache::setQuant): `slot` keeps its newest tokens in
  // full precision and the older ones as codes; what an attention reads back
  // a block at a time. (Slots appended with append() stay full precision.)
  QuantizedSlot& appendQuantized(int slot, const torch::Tensor& chunk);
  const QuantizedSlot& quantizedSlot(int slot) const;
  bool quantizes() const { return m_quant.on(); }
  void setQuant(const KvQuantSettings& q) { m_quant = q; }
  std::int64_t length() const { return m_length; }  // tokens cached
  void advance(std::int64_t tokens) { m_length += tokens; }
  // Buffers allocated from now on hold at least `tokens` tokens, so a decode
  // loop that knows its final length never regrows (and recopies) the cache.
  void reserve(std::int64_t tokens) { m_reserve = tokens; }
  std::int64_t bytes() const;  // bytes of the cached prefix
  void clear();
  // Each cached row n times over (rows b*n .. b*n+n-1 copy row b): a prefix
  // computed once, continued by n different suffixes. Capacity: the
  // reservation, or the cached length.
  void repeatRows(std::int64_t n);

 private:
  std::vector<torch::Tensor> m_buffers;
  std::vector<std::int64_t> m_filled;
  std::vector<std::optional<QuantizedSlot>> m_quantized;
  KvQuantSettings m_quant;
  std::int64_t m_length = 0;
  std::int64_t m_reserve = 0;
};

class KvCache {
 public:
  explicit KvCache(int layers) : m_layers(static_cast<std::size_t>(layers)) {}
  LayerCache& layer(int i) { return m_layers.at(static_cast<std::size_t>(i)); }
  std::int64_t length() const { return m_layers.empty() ? 0 : m_layers.front().length(); }
  // Bytes actually held for the cached tokens, summed over layers.
  std::int64_t bytes() const;
  void reserve(std::int64_t tokens) {
    for (auto& l : m_layers) l.reserve(tokens);
  }
  // Quantize the slots the attentions append with appendQuantized (set before the first token).
  void setQuant(const KvQuantSettings& q) {
    for (auto& l : m_layers) l.setQuant(q);
  }
  void clear();
  void repeatRows(std::int64_t n) {
    for (auto& l : m_layers) l.repeatRows(n);
  }

 private:
  std::vector<LayerCache> m_layers;
};

}  // namespace latentlab
