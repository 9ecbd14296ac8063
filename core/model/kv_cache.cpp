// Growable per-layer decode caches.
#include "model/kv_cache.h"

#include "latentlab/error.h"
#include "model/intra_op_threads.h"
#include "model/kv_quant.h"

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

namespace {
// `t` (B, H, cap, ...) grown along dim 2 to hold at least `need`, keeping [from, to) at the front.
torch::Tensor grownAlongTime(const torch::Tensor& t, std::int64_t from, std::int64_t to, std::int64_t need,
                             std::int64_t reserve, const torch::Tensor& like) {
  const std::int64_t have = to - from;
  if (t.defined() && from == 0 && t.size(2) >= need) return t;
  const std::int64_t cap = std::max({need, t.defined() ? 2 * t.size(2) : std::int64_t{64}, reserve});
  auto sizes = like.sizes().vec();
  sizes[2] = cap;
  auto grown = torch::empty(sizes, like.options());
  if (have > 0) grown.narrow(2, 0, have).copy_(t.narrow(2, from, have));
  return grown;
}
}  // namespace

void QuantizedSlot::append(const torch::Tensor& chunk) {
  const IntraOpThreads serial(chunk.device().is_cpu() ? 1 : at::get_num_threads());  // small operators
  const std::int64_t held = m_filled - m_start, T = chunk.size(2);
  // Room behind the held tokens; the buffer moves its tokens to the front
  // when it is full, so a decode loop copies the window rarely.
  if (!m_full.defined() || m_filled + T > m_full.size(2)) {
    m_full = grownAlongTime(m_full, m_start, m_filled, held + T + std::max<std::int64_t>(m_q.residual, 64),
                            std::min<std::int64_t>(m_reserve, 2 * (m_q.residual + 64)), chunk);
    m_filled = held;
    m_start = 0;
  }
  m_full.narrow(2, m_filled, T).copy_(chunk);
  m_filled += T;
  const std::int64_t excess = (m_filled - m_start) - m_q.residual;
  if (excess > 0) quantizeOldest(excess);
}

void QuantizedSlot::quantizeOldest(std::int64_t tokens) {
  const QuantizedRows q = quantizeRows(m_full.narrow(2, m_start, tokens), m_q.bits, m_q.group);
  const std::int64_t need = m_quantized + tokens;
  m_codes = grownAlongTime(m_codes, 0, m_quantized, need, m_reserve, q.codes);
  m_scale = grownAlongTime(m_scale, 0, m_quantized, need, m_reserve, q.scale);
  m_zero = grownAlongTime(m_zero, 0, m_quantized, need, m_reserve, q.zero);
  m_codes.narrow(2, m_quantized, tokens).copy_(q.codes);
  m_scale.narrow(2, m_quantized, tokens).copy_(q.scale);
  m_zero.narrow(2, m_quantized, tokens).copy_(q.zero);
  m_quantized = need;
  m_start += tokens;
}

torch::Tensor QuantizedSlot::fullView() const {
  return m_full.narrow(2, m_start, m_filled - m_start);
}

torch::Tensor QuantizedSlot::dequantized(std::int64_t start, std::int64_t len) const {
  if (start < 0 || len < 0 || start + len > m_quantized) {
    throw Error(ErrorCode::Internal, "quantized cache: tokens " + std::to_string(start) + " + " + std::to_string(len) +
                                         " of " + std::to_string(m_quantized));
  }
  const QuantizedRows block{m_codes.narrow(2, start, len), m_scale.narrow(2, start, len), m_zero.narrow(2, start, len)};
  return dequantizeRows(block, m_q.bits, m_q.group, m_full.size(3));
}

torch::Tensor QuantizedSlot::tokens(const TokenBlock& b) const {
  const IntraOpThreads serial(m_full.device().is_cpu() ? 1 : at::get_num_threads());  // small operators
  const std::int64_t coded = std::clamp<std::int64_t>(m_quantized - b.from, 0, b.len);
  if (coded == b.len) return dequantized(b.from, b.len);
  const std::int64_t windowFrom = std::max<std::int64_t>(b.from - m_quantized, 0);
  auto window = fullView().narrow(2, windowFrom, b.len - coded);
  return coded == 0 ? window : torch::cat({dequantized(b.from, coded), window}, 2);
}

std::vector<TokenBlock> QuantizedSlot::blocks(std::int64_t from) const {
  const std::int64_t block = std::max(m_q.block, 1);
  std::vector<TokenBlock> out;
  for (std::int64_t s = from; s < m_quantized; s += block) out.push_back({s, std::min(block, m_quantized - s)});
  const std::int64_t windowFrom = std::max(from, m_quantized);
  if (windowFrom < length()) out.push_back({windowFrom, length() - windowFrom});
  return out;
}

std::int64_t QuantizedSlot::bytes() const {
  std::int64_t total = 0;
  if (m_full.defined()) {
    total += m_full.size(0) * m_full.size(1) * (m_filled - m_start) * m_full.size(3) *
             static_cast<std::int64_t>(m_full.element_size());
  }
  for (const torch::Tensor* t : {&m_codes, &m_scale, &m_zero}) {
    if (t->defined())
      total += t->size(0) * t->size(1) * m_quantized * t->size(3) * static_cast<std::int64_t>(t->element_size());
  }
  return total;
}

void QuantizedSlot::repeatRows(std::int64_t n) {
  const auto repeat = [n](torch::Tensor& t, std::int64_t from, std::int64_t len) {
    if (!t.defined()) return;
    auto grown = torch::empty({t.size(0) * n, t.size(1), std::max<std::int64_t>(len, 1), t.size(3)}, t.options());
    grown.narrow(2, 0, len).view({t.size(0), n, t.size(1), len, t.size(3)}).copy_(t.narrow(2, from, len).unsqueeze(1));
    t = grown;
  };
  repeat(m_full, m_start, m_filled - m_start);
  m_filled -= m_start;
  m_start = 0;
  repeat(m_codes, 0, m_quantized);
  repeat(m_scale, 0, m_quantized);
  repeat(m_zero, 0, m_quantized);
}

QuantizedSlot& LayerCache::appendQuantized(int slot, const torch::Tensor& chunk) {
  const auto s = static_cast<std::size_t>(slot);
  if (m_quantized.size() <= s) m_quantized.resize(s + 1);
  if (!m_quantized[s]) m_quantized[s].emplace(m_quant, m_reserve);
  m_quantized[s]->append(chunk);
  return *m_quantized[s];
}

const QuantizedSlot& LayerCache::quantizedSlot(int slot) const {
  const auto s = static_cast<std::size_t>(slot);
  if (s >= m_quantized.size() || !m_quantized[s]) {
    throw Error(ErrorCode::Internal, "quantized cache: slot " + std::to_string(slot) + " holds nothing");
  }
  return *m_quantized[s];
}

std::int64_t LayerCache::bytes() const {
  std::int64_t total = 0;
  for (const auto& q : m_quantized)
    if (q) total += q->bytes();
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
  m_quantized.clear();
  m_length = 0;  // the reservation stays
}

void LayerCache::repeatRows(std::int64_t n) {
  for (auto& q : m_quantized)
    if (q) q->repeatRows(n);
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
