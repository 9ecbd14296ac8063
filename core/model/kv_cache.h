// Decode-time cache: per layer a few named buffers that grow along the
// sequence dimension (dim 2 of (B, H, T, D) tensors) with amortised doubling.
// Original models cache K and V; converted MLA caches the latent and the RoPE key.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace latentlab {

class LayerCache {
 public:
  // Appends `chunk` (B, H, T, D) to buffer `slot` and returns the whole
  // prefix (B, H, length, D) as a view.
  torch::Tensor append(int slot, const torch::Tensor& chunk);
  torch::Tensor view(int slot) const;
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
  void clear();
  void repeatRows(std::int64_t n) {
    for (auto& l : m_layers) l.repeatRows(n);
  }

 private:
  std::vector<LayerCache> m_layers;
};

}  // namespace latentlab
