// Growable per-layer decode caches.
#include "model/kv_cache.h"

#include <algorithm>

namespace latentlab {

torch::Tensor LayerCache::append(int slot, const torch::Tensor& chunk) {
  const auto s = static_cast<std::size_t>(slot);
  if (m_buffers.size() <= s) {
    m_buffers.resize(s + 1);
    m_filled.resize(s + 1, 0);
  }
  torch::Tensor& buf = m_buffers[s];
  const std::int64_t have = m_filled[s];
  const std::int64_t need = have + chunk.size(2);
  if (!buf.defined() || buf.size(2) < need) {
    std::int64_t cap = std::max({need, buf.defined() ? 2 * buf.size(2) : std::int64_t{64}, m_reserve});
    auto grown = torch::empty({chunk.size(0), chunk.size(1), cap, chunk.size(3)}, chunk.options());
    if (have > 0) grown.narrow(2, 0, have).copy_(buf.narrow(2, 0, have));
    buf = grown;
  }
  buf.narrow(2, have, chunk.size(2)).copy_(chunk);
  m_filled[s] = need;
  return buf.narrow(2, 0, need);
}

torch::Tensor LayerCache::view(int slot) const {
  const auto s = static_cast<std::size_t>(slot);
  return m_buffers.at(s).narrow(2, 0, m_filled.at(s));
}

std::int64_t LayerCache::bytes() const {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < m_buffers.size(); ++i) {
    if (!m_buffers[i].defined()) continue;
    const auto& b = m_buffers[i];
    total += b.size(0) * b.size(1) * m_filled[i] * b.size(3) * static_cast<std::int64_t>(b.element_size());
  }
  return total;
}

void LayerCache::clear() {
  m_buffers.clear();
  m_filled.clear();
  m_length = 0;  // the reservation stays
}

void LayerCache::repeatRows(std::int64_t n) {
  for (std::size_t s = 0; s < m_buffers.size(); ++s) {
    torch::Tensor& buf = m_buffers[s];
    if (!buf.defined()) continue;
    const std::int64_t have = m_filled[s];
    const std::int64_t cap = std::max(have, m_reserve);
    auto grown = torch::empty({buf.size(0) * n, buf.size(1), cap, buf.size(3)}, buf.options());
    grown.narrow(2, 0, have)
        .view({buf.size(0), n, buf.size(1), have, buf.size(3)})
        .copy_(buf.narrow(2, 0, have).unsqueeze(1));
    buf = grown;
  }
}

std::int64_t KvCache::bytes() const {
  std::int64_t total = 0;
  for (const auto& l : m_layers) total += l.bytes();
  return total;
}

void KvCache::clear() {
  for (auto& l : m_layers) l.clear();
}

}  // namespace latentlab
