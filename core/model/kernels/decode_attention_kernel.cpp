// One pass over a decode cache per (batch, head, key split): scores, an online
// softmax and the value sum, 64 keys at a time, so the cache is read once per
// step and the scores never leave the core. Built once per instruction set
// (LATENTLAB_KERNEL_ISA names the namespace, the build sets the -m flags); the
// fp32 path is written with GCC/Clang vector types, which the compiler lowers
// to that set's registers (16 floats: one AVX-512 register, two AVX2 ones).
// The fp64 path is plain loops: it is the exactness path the tests hold to 1e-10.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "model/kernels/cpu_kernels.h"
#include "model/kernels/simd_f32.h"

namespace latentlab::kernels::LATENTLAB_KERNEL_ISA {
namespace {

using namespace simd;
constexpr std::int64_t kTile = 64;  // keys per pass of a row over the cache

// For RB rows: acc_r[0, dv) = alpha_r * acc_r + sum_t p_r[t] v_t over n value
// rows. Up to four 16-dim chunks of v_t are loaded once per key and serve
// every row, so each FMA costs one broadcast of p_r[t] and no other load.
template <int RB, int NC>
inline void accumulateChunks(float* const* acc, const float* alpha, const float* const* p, const float* v,
                             std::int64_t stride, std::int64_t n, std::int64_t c) {
  F16 sum[RB][NC];
  for (int r = 0; r < RB; ++r)
    for (int j = 0; j < NC; ++j) sum[r][j] = load<F16>(acc[r] + c + 16 * j) * alpha[r];
  const float* vt = v + c;
  for (std::int64_t t = 0; t < n; ++t, vt += stride) {
    F16 vv[NC];
    for (int j = 0; j < NC; ++j) vv[j] = load<F16>(vt + 16 * j);
    for (int r = 0; r < RB; ++r) {
      const F16 pr = splat(p[r][t]);
      for (int j = 0; j < NC; ++j) sum[r][j] += pr * vv[j];
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int j = 0; j < NC; ++j) store(acc[r] + c + 16 * j, sum[r][j]);
}

template <int RB>
inline void accumulate(float* const* acc, const float* alpha, const float* const* p, const float* v,
                       std::int64_t stride, std::int64_t n, std::int64_t dv) {
  std::int64_t c = 0;
  for (; c + 64 <= dv; c += 64) accumulateChunks<RB, 4>(acc, alpha, p, v, stride, n, c);
  switch ((dv - c) / 16) {
    case 3:
      accumulateChunks<RB, 3>(acc, alpha, p, v, stride, n, c);
      break;
    case 2:
      accumulateChunks<RB, 2>(acc, alpha, p, v, stride, n, c);
      break;
    case 1:
      accumulateChunks<RB, 1>(acc, alpha, p, v, stride, n, c);
      break;
    default:
      break;
  }
  c += (dv - c) / 16 * 16;
  for (; c < dv; ++c)
    for (int r = 0; r < RB; ++r) {
      float x = acc[r][c] * alpha[r];
      for (std::int64_t t = 0; t < n; ++t) x += p[r][t] * v[t * stride + c];
      acc[r][c] = x;
    }
}

// The rows of one block: up to four query rows of a head, all scored against
// the same rope key head (if any), over one tile of keys.
struct RowBlock {
  const float* q[4];
  const float* qRope[4];
  float* acc[4];
  float* max[4];
  float* sum[4];
  float* p[4];        // kTile probabilities per row
  std::int64_t n[4];  // keys of the tile each row attends to (>= 1)
  std::int64_t nMax;
};

// Scores of a block against keys in their cache layout: 16-lane partial dot
// products per (row, key), reduced 16 keys at a time. s[r][b] holds keys
// 16b .. 16b+15 of the tile, scaled, -inf past the row's query.
template <int RB>
void scoreByDots(const RowBlock& blk, const float* k, std::int64_t ks, std::int64_t dk, const float* kr,
                 std::int64_t krs, std::int64_t dr, float scale, F16 (*s)[kTile / 16]) {
  const I16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  // 8 RoPE dims stored back to back (MHA2MLA at r = 4): two consecutive keys
  // fill one vector, whose halves land where the lane sums of those two keys
  // are after the first level of sumLanesOf16, so they are added there.
  const bool ropePairs = kr != nullptr && dr == 8 && krs == 8;
  const float* kd = ropePairs ? nullptr : kr;  // the RoPE term inside the dots, in general
  F16 qq[RB] = {};
  if (ropePairs) {
    for (int r = 0; r < RB; ++r) {
      const F8 q8 = load<F8>(blk.qRope[r]);
      qq[r] = __builtin_shufflevector(q8, q8, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
    }
  }
  F16 partial[RB][16];
  F16 pairs[RB][8];
  const std::int64_t blocks = (blk.nMax + 15) / 16;
  for (std::int64_t b16 = 0; b16 < blocks; ++b16) {
    const std::int64_t first = b16 * 16, count = std::min<std::int64_t>(16, blk.nMax - first);
    std::int64_t j = 0;
    for (; j + 4 <= count; j += 4) {
      F16 acc[RB][4] = {};
      const std::int64_t t = first + j;
      dots4<RB>(blk.q, k + t * ks, ks, dk, acc);
      if (kd != nullptr) dots4<RB>(blk.qRope, kd + t * krs, krs, dr, acc);
      for (int r = 0; r < RB; ++r)
        for (int i = 0; i < 4; ++i) partial[r][j + i] = acc[r][i];
    }
    for (; j < count; ++j) {
      F16 acc[RB] = {};
      const std::int64_t t = first + j;
      dots1<RB>(blk.q, k + t * ks, dk, acc);
      if (kd != nullptr) dots1<RB>(blk.qRope, kd + t * krs, dr, acc);
      for (int r = 0; r < RB; ++r) partial[r][j] = acc[r];
    }
    for (; j < 16; ++j)
      for (int r = 0; r < RB; ++r) partial[r][j] = F16{};
    if (ropePairs) {
      for (std::int64_t i = 0; i < 8; ++i) {
        const std::int64_t t = first + 2 * i;
        const F16 kv = 2 * i + 1 < count ? load<F16>(kr + t * 8) : 2 * i < count ? widen(load<F8>(kr + t * 8)) : F16{};
        for (int r = 0; r < RB; ++r) pairs[r][i] = qq[r] * kv;
      }
    }
    for (int r = 0; r < RB; ++r) {
      const I16 live = (iota + static_cast<std::int32_t>(first)) < static_cast<std::int32_t>(blk.n[r]);
      const F16 sc = (ropePairs ? sumLanesOf16<true>(partial[r], pairs[r]) : sumLanesOf16(partial[r])) * scale;
      s[r][b16] = select(live, sc, splat(kNegInfF));  // keys past the row's query weigh 0
    }
  }
}

// The online softmax update of each row from its tile scores, then the value sum.
template <int RB>
void finishBlock(const RowBlock& blk, F16 (*s)[kTile / 16], const float* v, std::int64_t vs, std::int64_t dv) {
  const std::int64_t blocks = (blk.nMax + 15) / 16;
  float alpha[RB];
  const float* p[RB];
  for (int r = 0; r < RB; ++r) {
    F16 m = splat(kNegInfF);
    for (std::int64_t b16 = 0; b16 < blocks; ++b16) m = vmax(m, s[r][b16]);
    const float prev = *blk.max[r], next = std::max(prev, maxLanes(m));
    alpha[r] = prev == kNegInfF ? 0.0f : std::exp(prev - next);
    F16 total{};
    for (std::int64_t b16 = 0; b16 < blocks; ++b16) {
      const F16 e = expNonPositive(s[r][b16] - next);
      const F16 w = select(s[r][b16] > kNegInfF, e, F16{});
      total += w;
      store(blk.p[r] + b16 * 16, w);
    }
    *blk.sum[r] = *blk.sum[r] * alpha[r] + sumLanes(total);
    *blk.max[r] = next;
    p[r] = blk.p[r];
  }
  accumulate<RB>(blk.acc, alpha, p, v, vs, blk.nMax, dv);
}

template <class Fn>
void withRowCount(int count, Fn&& fn) {
  switch (count) {
    case 1:
      fn(std::integral_constant<int, 1>{});
      break;
    case 2:
      fn(std::integral_constant<int, 2>{});
      break;
    case 3:
      fn(std::integral_constant<int, 3>{});
      break;
    default:
      fn(std::integral_constant<int, 4>{});
      break;
  }
}

// Work item `item`: its batch row, cache head and key range, and its rows'
// softmax state, reset (max -inf, sum 0, value sum 0).
template <class T>
struct Item {
  std::int64_t b, h, t0, t1;
  T *acc, *max, *sum;
};

template <class T>
Item<T> beginItem(const DecodeKernelArgs<T>& a, std::int64_t item) {
  const std::int64_t split = item % a.splits, bh = item / a.splits;
  Item<T> it{bh / a.heads,
             bh % a.heads,
             split * a.splitLen,
             std::min(a.keys, split * a.splitLen + a.splitLen),
             a.acc + item * a.rows * a.dv,
             a.max + item * a.rows,
             a.sum + item * a.rows};
  std::fill(it.acc, it.acc + a.rows * a.dv, T(0));
  std::fill(it.max, it.max + a.rows, -std::numeric_limits<T>::infinity());
  std::fill(it.sum, it.sum + a.rows, T(0));
  return it;
}

void runItemF32(const DecodeKernelArgs<float>& args, std::int64_t item) {
  const DecodeKernelArgs<float> a = args;  // a local copy: the stores below cannot alias it
  const auto [b, h, t0, t1, acc, mx, sm] = beginItem(a, item);
  const bool rope = a.qRope.data != nullptr;
  alignas(64) float p[4][kTile];
  F16 s[4][kTile / 16];
  for (std::int64_t tile = t0; tile < t1; tile += kTile) {
    const std::int64_t tileEnd = std::min(t1, tile + kTile);
    const float* k = a.k.row(b, h, tile);
    const float* v = a.v.row(b, h, tile);
    // Blocks of up to four consecutive rows that attend to this tile and share a rope key head.
    std::int64_t r = 0;
    while (r < a.rows) {
      RowBlock blk{};
      int count = 0;
      std::int64_t ropeHead = -1;
      for (; r < a.rows && count < 4; ++r) {
        const std::int64_t n = std::min(tileEnd, a.keys - a.queries + r % a.queries + 1) - tile;
        if (n <= 0) {  // every key of this tile lies after the row's query
          if (count > 0) break;
          continue;
        }
        const std::int64_t g = h * a.rows + r, hr = rope ? g / a.ropeRows : 0;
        if (count > 0 && hr != ropeHead) break;
        ropeHead = hr;
        blk.q[count] = a.q.row(b, h, r);
        blk.qRope[count] = rope ? a.qRope.row(b, hr, g % a.ropeRows) : nullptr;
        blk.acc[count] = acc + r * a.dv;
        blk.max[count] = mx + r;
        blk.sum[count] = sm + r;
        blk.p[count] = p[count];
        blk.n[count] = n;
        blk.nMax = std::max(blk.nMax, n);
        ++count;
      }
      if (count == 0) continue;
      withRowCount(count, [&](auto rb) {
        constexpr int RB = decltype(rb)::value;
        const float* kr = rope ? a.kRope.row(b, ropeHead, tile) : nullptr;
        scoreByDots<RB>(blk, k, a.k.sn, a.dk, kr, a.kRope.sn, a.dRope, a.scale, s);
        finishBlock<RB>(blk, s, v, a.v.sn, a.dv);
      });
    }
  }
}

void runItemF64(const DecodeKernelArgs<double>& a, std::int64_t item) {
  const auto [b, h, t0, t1, acc, mx, sm] = beginItem(a, item);
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const bool rope = a.qRope.data != nullptr;
  double p[kTile];
  for (std::int64_t tile = t0; tile < t1; tile += kTile) {
    const std::int64_t tileEnd = std::min(t1, tile + kTile);
    for (std::int64_t r = 0; r < a.rows; ++r) {
      const std::int64_t n = std::min(tileEnd, a.keys - a.queries + r % a.queries + 1) - tile;
      if (n <= 0) continue;
      const double* q = a.q.row(b, h, r);
      const std::int64_t g = h * a.rows + r, hr = g / a.ropeRows;
      double tileMax = kNegInf;
      for (std::int64_t t = 0; t < n; ++t) {
        const double* k = a.k.row(b, h, tile + t);
        double s = 0;
        for (std::int64_t c = 0; c < a.dk; ++c) s += q[c] * k[c];
        if (rope) {
          const double* qr = a.qRope.row(b, hr, g % a.ropeRows);
          const double* kr = a.kRope.row(b, hr, tile + t);
          for (std::int64_t c = 0; c < a.dRope; ++c) s += qr[c] * kr[c];
        }
        p[t] = s * a.scale;
        tileMax = std::max(tileMax, p[t]);
      }
      const double next = std::max(mx[r], tileMax);
      const double alpha = mx[r] == kNegInf ? 0.0 : std::exp(mx[r] - next);
      double total = 0;
      for (std::int64_t t = 0; t < n; ++t) total += (p[t] = std::exp(p[t] - next));
      double* out = acc + r * a.dv;
      for (std::int64_t c = 0; c < a.dv; ++c) {
        double x = out[c] * alpha;
        for (std::int64_t t = 0; t < n; ++t) x += p[t] * a.v.row(b, h, tile + t)[c];
        out[c] = x;
      }
      sm[r] = sm[r] * alpha + total;
      mx[r] = next;
    }
  }
}

}  // namespace

void decodeItemsF32(const DecodeKernelArgs<float>& a, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) runItemF32(a, i);
}
void decodeItemsF64(const DecodeKernelArgs<double>& a, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) runItemF64(a, i);
}

}  // namespace latentlab::kernels::LATENTLAB_KERNEL_ISA
