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
#include <vector>

#include "model/kernels/cpu_kernels.h"
#include "model/kernels/simd_f32.h"

namespace latentlab::kernels::LATENTLAB_KERNEL_ISA {
namespace {

using namespace simd;
constexpr std::int64_t kTile = 64;  // keys per pass of a row over the cache

// fn(std::integral_constant<int, count>) for 1 <= count <= Max (larger counts run as Max).
template <int Max, class Fn>
void withCount(std::int64_t count, Fn&& fn) {
  if constexpr (Max > 1) {
    if (count < Max) return withCount<Max - 1>(count, fn);
  }
  fn(std::integral_constant<int, Max>{});
}

// The next tile's cache rows (a latent and its RoPE key heads), asked for
// into the first-level cache one key at a time while this tile's value sums
// run, so that they are there when the tile is transposed. Its lines were
// asked for into the second-level cache a tile earlier (transposeTile); the
// step from there to the first level, left to the loads themselves, stalled
// the transposes, and a burst of the whole tile's lines at once gained less.
struct NextRows {
  const float* k = nullptr;  // row t at k + t * ks, dk floats used
  std::int64_t ks = 0, dk = 0;
  const float* rope = nullptr;  // head i's row t at rope + i * rsh + t * rs, dr floats used
  std::int64_t heads = 0, rsh = 0, rs = 0, dr = 0;
  std::int64_t ropeMask = 0;  // a RoPE row starting a new line: (t & ropeMask) == 0

  [[gnu::always_inline]] void at(std::int64_t t) const {
    const float* row = k + t * ks;
    for (std::int64_t c = 0; c < dk; c += 16) prefetch<1>(row + c);
    prefetch<1>(row + dk - 1);
    if ((t & ropeMask) != 0) return;
    for (std::int64_t i = 0; i < heads; ++i) {
      const float* r = rope + i * rsh + t * rs;
      prefetch<1>(r);
      prefetch<1>(r + dr - 1);
    }
  }
};

// For RB consecutive rows (value sums dv apart, weights p kTile apart):
// acc_r[c, c + 16 NC) = alpha_r * acc_r + sum_t p_r[t] v_t over n value rows.
// The NC 16-dim chunks of v_t are loaded once per key and serve every row, so
// each FMA costs one broadcast of p_r[t] and no other load.
template <int RB, int NC>
inline void accumulateChunks(float* acc, std::int64_t dv, const float* alpha, const float* p, const float* v,
                             std::int64_t vs, std::int64_t n, std::int64_t c, const NextRows* next) {
  F16 sum[RB][NC];
  for (int r = 0; r < RB; ++r)
    for (int j = 0; j < NC; ++j) sum[r][j] = load<F16>(acc + r * dv + c + 16 * j) * alpha[r];
  const float* vt = v + c;
  for (std::int64_t t = 0; t < n; ++t, vt += vs) {
    if (next != nullptr) next->at(t);
    F16 vv[NC];
    for (int j = 0; j < NC; ++j) vv[j] = load<F16>(vt + 16 * j);
    for (int r = 0; r < RB; ++r) {
      const F16 pr = splat(p[r * kTile + t]);
      for (int j = 0; j < NC; ++j) sum[r][j] += pr * vv[j];
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int j = 0; j < NC; ++j) store(acc + r * dv + c + 16 * j, sum[r][j]);
}

// The same over all dv dims: NC chunks at a time, then the fewer left, then
// the dims past the last whole chunk. `next` (n of its rows), if any, is asked
// for during the first pass over the keys.
template <int RB, int NC>
inline void accumulate(float* acc, std::int64_t dv, const float* alpha, const float* p, const float* v, std::int64_t vs,
                       std::int64_t n, const NextRows* next = nullptr) {
  std::int64_t c = 0;
  for (; c + 16 * NC <= dv; c += 16 * NC, next = nullptr)
    accumulateChunks<RB, NC>(acc, dv, alpha, p, v, vs, n, c, next);
  if constexpr (NC > 1) {
    if (const std::int64_t rest = (dv - c) / 16; rest > 0) {
      withCount<NC - 1>(
          rest, [&](auto m) { accumulateChunks<RB, decltype(m)::value>(acc, dv, alpha, p, v, vs, n, c, next); });
      c += 16 * rest;
      next = nullptr;
    }
  }
  if (next != nullptr)
    for (std::int64_t t = 0; t < n; ++t) next->at(t);
  for (; c < dv; ++c)
    for (int r = 0; r < RB; ++r) {
      float x = acc[r * dv + c] * alpha[r];
      for (std::int64_t t = 0; t < n; ++t) x += p[r * kTile + t] * v[t * vs + c];
      acc[r * dv + c] = x;
    }
}

// The rows of one block: up to four query rows of a head, all scored against
// the same rope key head (if any), over one tile of keys.
struct RowBlock {
  const float* q[4];
  const float* qRope[4];
  float* acc;  // the block's rows are consecutive: their value sums dv apart
  float* max[4];
  float* sum[4];
  float* p;           // (4, kTile) weights
  std::int64_t n[4];  // keys of the tile each row attends to (>= 1)
  std::int64_t nMax;
};

// The same keys and values further on, asked for while a tile is scored (see
// transposeTile): null, or the key and value rows of the tile two ahead.
struct Ahead {
  const float* k = nullptr;
  const float* v = nullptr;  // null where the values are the keys (a latent)
  std::int64_t vs = 0, dv = 0;
};

// Scores of a block against keys in their cache layout: 16-lane partial dot
// products per (row, key), reduced 16 keys at a time. s[r][b] holds keys
// 16b .. 16b+15 of the tile, scaled, -inf past the row's query.
template <int RB>
void scoreByDots(const RowBlock& blk, const float* k, std::int64_t ks, std::int64_t dk, const float* kr,
                 std::int64_t krs, std::int64_t dr, float scale, F16 (*s)[kTile / 16], const Ahead& ahead) {
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
      if (ahead.v != nullptr)
        for (std::int64_t i = t; i < t + 4; ++i)
          for (std::int64_t c = 0; c < ahead.dv; c += 16) prefetch(ahead.v + i * ahead.vs + c);
      dots4<RB>(blk.q, k + t * ks, ks, dk, acc, ahead.k != nullptr ? ahead.k + t * ks : nullptr);
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

// The online softmax update of one row from its scores over a tile (scaled,
// -inf for keys it does not attend to), in `blocks` vectors of 16 keys: the
// running max moves on, p gets the tile's weights, the running sum grows (a
// float, or a vector of 16 lane sums reduced when the work item ends), and
// the factor the row's value sum must be scaled by is returned. Once a few
// tiles are in the max rarely moves, so it is only looked for across lanes
// when a lane compare finds a score above it; the factor is then exactly 1.
template <class Sum>
inline float updateRow(const F16* s, std::int64_t blocks, float* max, Sum* sum, float* p) {
  F16 m = s[0];
  for (std::int64_t b16 = 1; b16 < blocks; ++b16) m = vmax(m, s[b16]);
  const float prev = *max;
  const float next = prev != kNegInfF && !anyGreater(m, prev) ? prev : std::max(prev, maxLanes(m));
  const float alpha = prev == kNegInfF ? 0.0f : prev == next ? 1.0f : expNonPositive(splat(prev - next))[0];
  F16 total{};
  for (std::int64_t b16 = 0; b16 < blocks; ++b16) {
    const F16 e = expNonPositive(s[b16] - next);
    const F16 w = select(s[b16] > kNegInfF, e, F16{});
    total += w;
    store(p + b16 * 16, w);
  }
  if constexpr (std::is_same_v<Sum, float>) {
    *sum = *sum * alpha + sumLanes(total);
  } else {
    *sum = *sum * alpha + total;
  }
  *max = next;
  return alpha;
}

// The online softmax update of each row from its tile scores, then the value sum.
template <int RB>
void finishBlock(const RowBlock& blk, F16 (*s)[kTile / 16], const float* v, std::int64_t vs, std::int64_t dv) {
  const std::int64_t blocks = (blk.nMax + 15) / 16;
  float alpha[RB];
  for (int r = 0; r < RB; ++r) alpha[r] = updateRow(s[r], blocks, blk.max[r], blk.sum[r], blk.p + r * kTile);
  accumulate<RB, 4>(blk.acc, dv, alpha, blk.p, v, vs, blk.nMax);
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
    // The tile after next is asked for while the first block scores this one
    // (whole tiles only: a short last one is left to the hardware).
    Ahead ahead;
    if (tile + 3 * kTile <= t1) {
      ahead.k = a.k.row(b, h, tile + 2 * kTile);
      if (a.v.data != a.k.data) ahead.v = a.v.row(b, h, tile + 2 * kTile), ahead.vs = a.v.sn, ahead.dv = a.dv;
    }
    // Blocks of up to four consecutive rows that attend to this tile and share a rope key head.
    std::int64_t r = 0;
    while (r < a.rows) {
      RowBlock blk{};
      blk.p = &p[0][0];
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
        if (count == 0) blk.acc = acc + r * a.dv;
        blk.max[count] = mx + r;
        blk.sum[count] = sm + r;
        blk.n[count] = n;
        blk.nMax = std::max(blk.nMax, n);
        ++count;
      }
      if (count == 0) continue;
      withCount<4>(count, [&](auto rb) {
        constexpr int RB = decltype(rb)::value;
        const float* kr = rope ? a.kRope.row(b, ropeHead, tile) : nullptr;
        scoreByDots<RB>(blk, k, a.k.sn, a.dk, kr, a.kRope.sn, a.dRope, a.scale, s, ahead);
        ahead = {};  // the first block asks for the whole tile
        finishBlock<RB>(blk, s, v, a.v.sn, a.dv);
      });
    }
  }
}

// ---- Many rows per cache head (MLA's latent cache: every query head of a
// group reads the same latent): the tile is transposed once, keys into vector
// lanes, so that each row's scores come out 16 keys to a vector with no lane
// sums, and the transposing is shared by all the rows.

// Register blocks, sized so that no build spills its accumulators: score rows
// x 16-key vectors, and value rows x 16-dim chunks.
constexpr int kScoreKeyVecs = kRegisterVectors >= 32 ? 4 : 2;
constexpr int kScoreRows = kRegisterVectors >= 32 ? 6 : kRegisterVectors >= 8 ? 2 : 1;
constexpr int kValueChunks = kRegisterVectors >= 32 ? 3 : 1;
constexpr int kValueRows = kRegisterVectors >= 32 ? 9 : kRegisterVectors >= 8 ? 6 : 3;
// From this many rows on, the transposes cost less than the lane sums they save.
constexpr std::int64_t kLaneRowsMin = 6;

// kt[c * kTile + t] = dim c of key t (keys `stride` apart), c < dims, t < n
// rounded up to 16; the keys past n repeat real ones, whose scores are masked.
// With `ahead` (the same tile further on, n keys), its lines are asked for as
// the tile's own are read, a few at a time: a burst of prefetches overflows
// the core's miss buffers, which then drop them.
void transposeTile(const float* k, std::int64_t stride, std::int64_t dims, std::int64_t n, float* kt,
                   const float* ahead) {
  for (std::int64_t g = 0; g * 16 < n; ++g) {
    const float* row[16];
    for (std::int64_t i = 0; i < 16; ++i) row[i] = k + (g * 16 + (g * 16 + i < n ? i : 0)) * stride;
    const float* next = ahead != nullptr ? ahead + g * 16 * stride : nullptr;
    float* out = kt + g * 16;
    std::int64_t c = 0;
    for (; c + 16 <= dims; c += 16) {
      F16 x[16], t[16];
      for (int i = 0; i < 16; ++i) x[i] = load<F16>(row[i] + c);
      if (next != nullptr)
        for (int i = 0; i < 16; ++i) prefetch(next + i * stride + c);
      transpose16(x, t);
      for (int j = 0; j < 16; ++j) store(out + (c + j) * kTile, t[j]);
    }
    if (c + 8 <= dims) {
      F16 x[8], t[8];
      for (int i = 0; i < 8; ++i) x[i] = join(load<F8>(row[i] + c), load<F8>(row[i + 8] + c));
      if (next != nullptr)
        for (int i = 0; i < 16; ++i) prefetch(next + i * stride + c);
      transpose16x8(x, t);
      for (int j = 0; j < 8; ++j) store(out + (c + j) * kTile, t[j]);
      c += 8;
    }
    for (; c < dims; ++c)
      for (int i = 0; i < 16; ++i) out[c * kTile + i] = row[i][c];
  }
}

// s_r[o + 16j .. o + 16j + 15] = q_r . k + qRope_r . kRope for KV vectors of
// keys of the transposed tile from key o on, for RB rows (s rows kTile apart):
// each key vector loaded serves every row, each query element is one
// broadcast, and the RB x KV sums are independent. ropeT[r] is row r's RoPE
// key head in the tile buffer.
template <int RB, int KV>
void laneScores(const float* const* q, const float* const* qRope, const float* const* ropeT, const float* kt,
                std::int64_t o, std::int64_t dk, std::int64_t dr, float* s) {
  F16 acc[RB][KV] = {};
  for (std::int64_t c = 0; c < dk; ++c) {
    F16 kv[KV];
    for (int j = 0; j < KV; ++j) kv[j] = load<F16>(kt + c * kTile + o + 16 * j);
    for (int r = 0; r < RB; ++r) {
      const F16 qv = splat(q[r][c]);
      for (int j = 0; j < KV; ++j) acc[r][j] += qv * kv[j];
    }
  }
  for (int r = 0; r < RB; ++r)
    for (std::int64_t c = 0; c < dr; ++c) {
      const F16 qv = splat(qRope[r][c]);
      for (int j = 0; j < KV; ++j) acc[r][j] += qv * load<F16>(ropeT[r] + c * kTile + o + 16 * j);
    }
  for (int r = 0; r < RB; ++r)
    for (int j = 0; j < KV; ++j) store(s + r * kTile + o + 16 * j, acc[r][j]);
}

// Asks for n cache rows from `row` on (`stride` floats apart, `dims` used)
// ahead of their use: the hardware prefetchers alone leave this path waiting
// on memory.
inline void prefetchRows(const float* row, std::int64_t stride, std::int64_t dims, std::int64_t n) {
  constexpr std::int64_t kLine = 64 / sizeof(float);
  if (stride == dims) {  // one contiguous span
    for (std::int64_t i = 0; i < n * dims; i += kLine) prefetch(row + i);
    prefetch(row + n * dims - 1);
    return;
  }
  for (std::int64_t t = 0; t < n; ++t, row += stride) {
    for (std::int64_t i = 0; i < dims; i += kLine) prefetch(row + i);
    prefetch(row + dims - 1);
  }
}

// Per-thread buffers of the keys-in-lanes path, 64-byte aligned, grown on demand.
float* laneScratch(std::size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats + 16) buffer.resize(floats + 16);
  auto* p = buffer.data();
  return p + (16 - (reinterpret_cast<std::uintptr_t>(p) / sizeof(float)) % 16) % 16;
}

void runItemLanes(const DecodeKernelArgs<float>& args, std::int64_t item) {
  const DecodeKernelArgs<float> a = args;  // a local copy: the stores below cannot alias it
  const auto [b, h, t0, t1, acc, mx, sm] = beginItem(a, item);
  const std::int64_t R = a.rows;
  const bool rope = a.qRope.data != nullptr;
  // The RoPE key heads this item's rows use: hrFirst .. hrFirst + ropeHeads - 1.
  const std::int64_t hrFirst = rope ? h * R / a.ropeRows : 0;
  const std::int64_t ropeHeads = rope ? (h * R + R - 1) / a.ropeRows - hrFirst + 1 : 0;
  const std::int64_t dims = a.dk + ropeHeads * a.dRope;
  const std::int64_t dr = rope ? a.dRope : 0;
  // Scratch: the transposed tile, scores, weights, value-sum factors, running
  // sums, and the queries with the softmax scale folded in.
  const std::int64_t alphaFloats = (R + 15) / 16 * 16;  // keeps the running sums 64-byte aligned
  float* kt = laneScratch(dims * kTile + 2 * R * kTile + alphaFloats + 16 * R + R * (a.dk + dr));
  float* s = kt + dims * kTile;                              // (R, kTile) scores
  float* p = s + R * kTile;                                  // (R, kTile) weights
  float* alpha = p + R * kTile;                              // (R) value-sum factors
  auto* sumV = reinterpret_cast<F16*>(alpha + alphaFloats);  // (R) running sums, 16 lanes each
  float* qs = alpha + alphaFloats + 16 * R;                  // (R, dk + dr) scaled queries
  // Per row: its query, its RoPE query, and where its RoPE key head lies in kt.
  thread_local std::vector<const float*> rowPtrs;
  rowPtrs.resize(3 * R);
  const float** q = rowPtrs.data();
  const float** qRope = q + R;
  const float** ropeT = qRope + R;
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int64_t g = h * R + r, hr = rope ? g / a.ropeRows : 0;
    float* qr = qs + r * (a.dk + dr);
    const float* src = a.q.row(b, h, r);
    for (std::int64_t c = 0; c < a.dk; ++c) qr[c] = src[c] * a.scale;
    if (rope) {
      const float* srcRope = a.qRope.row(b, hr, g % a.ropeRows);
      for (std::int64_t c = 0; c < dr; ++c) qr[a.dk + c] = srcRope[c] * a.scale;
    }
    q[r] = qr;
    qRope[r] = qr + a.dk;
    ropeT[r] = kt + (a.dk + (hr - hrFirst) * a.dRope) * kTile;
    sumV[r] = F16{};
  }
  // The next tile's rows: their layout here, their place at each tile.
  NextRows next;
  next.ks = a.k.sn, next.dk = a.dk;
  if (ropeHeads > 0) {
    next.heads = ropeHeads, next.rsh = a.kRope.sh, next.rs = a.kRope.sn, next.dr = a.dRope;
    next.ropeMask = next.rs < 16 && 16 % next.rs == 0 ? 16 / next.rs - 1 : 0;
  }
  const I16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  for (std::int64_t tile = t0; tile < t1; tile += kTile) {
    const std::int64_t tileEnd = std::min(t1, tile + kTile);
    // Keys of the tile row r attends to: those up to its query's position.
    std::int64_t nMax = 0;
    for (std::int64_t r = 0; r < std::min(R, a.queries); ++r)
      nMax = std::max(nMax, std::min(tileEnd, a.keys - a.queries + r + 1) - tile);
    if (nMax <= 0) continue;
    const std::int64_t vecs = (nMax + 15) / 16;
    // Every row attends to every key of the tile, in whole vectors: no mask.
    const bool allLive = std::min(tileEnd, a.keys - a.queries + 1) == tileEnd && nMax % 16 == 0;
    // The tile after next is asked for as this one is transposed (into the
    // second-level cache: the first holds this tile's working set). Only whole
    // tiles are: a short last tile is left to the hardware.
    const bool aheadWhole = tile + 3 * kTile <= t1 && nMax == kTile;
    const float* kAhead = aheadWhole ? a.k.row(b, h, tile + 2 * kTile) : nullptr;
    transposeTile(a.k.row(b, h, tile), a.k.sn, a.dk, nMax, kt, kAhead);
    if (aheadWhole && a.v.data != a.k.data) prefetchRows(a.v.row(b, h, tile + 2 * kTile), a.v.sn, a.dv, kTile);
    for (std::int64_t i = 0; i < ropeHeads; ++i)
      transposeTile(a.kRope.row(b, hrFirst + i, tile), a.kRope.sn, a.dRope, nMax, kt + (a.dk + i * a.dRope) * kTile,
                    aheadWhole ? a.kRope.row(b, hrFirst + i, tile + 2 * kTile) : nullptr);
    for (std::int64_t r0 = 0; r0 < R; r0 += kScoreRows)
      for (std::int64_t j0 = 0; j0 < vecs; j0 += kScoreKeyVecs)
        withCount<kScoreRows>(R - r0, [&](auto rb) {
          withCount<kScoreKeyVecs>(vecs - j0, [&](auto kv) {
            constexpr int RB = decltype(rb)::value, KV = decltype(kv)::value;
            laneScores<RB, KV>(q + r0, qRope + r0, ropeT + r0, kt, 16 * j0, a.dk, dr, s + r0 * kTile);
          });
        });
    for (std::int64_t r = 0; r < R; ++r) {
      F16 sv[kTile / 16];
      for (std::int64_t j = 0; j < vecs; ++j) sv[j] = load<F16>(s + r * kTile + 16 * j);
      if (!allLive) {  // keys past the row's query weigh 0
        const std::int64_t n = std::min(tileEnd, a.keys - a.queries + r % a.queries + 1) - tile;
        for (std::int64_t j = 0; j < vecs; ++j)
          sv[j] =
              select((iota + static_cast<std::int32_t>(16 * j)) < static_cast<std::int32_t>(n), sv[j], splat(kNegInfF));
      }
      alpha[r] = updateRow(sv, vecs, mx + r, sumV + r, p + r * kTile);
    }
    const float* v = a.v.row(b, h, tile);
    // The next tile, a whole one, is asked for as the first row block sums its values.
    const bool nextWhole = tile + 2 * kTile <= t1 && nMax == kTile;
    if (nextWhole) {
      next.k = a.k.row(b, h, tile + kTile);
      if (ropeHeads > 0) next.rope = a.kRope.row(b, hrFirst, tile + kTile);
    }
    for (std::int64_t r0 = 0; r0 < R; r0 += kValueRows) {
      withCount<kValueRows>(R - r0, [&](auto rb) {
        accumulate<decltype(rb)::value, kValueChunks>(acc + r0 * a.dv, a.dv, alpha + r0, p + r0 * kTile, v, a.v.sn,
                                                      nMax, nextWhole && r0 == 0 ? &next : nullptr);
      });
    }
  }
  for (std::int64_t r = 0; r < R; ++r) sm[r] = sumLanes(sumV[r]);
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
  const auto run = a.rows >= kLaneRowsMin ? runItemLanes : runItemF32;
  for (std::int64_t i = begin; i < end; ++i) run(a, i);
}
void decodeItemsF64(const DecodeKernelArgs<double>& a, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) runItemF64(a, i);
}

}  // namespace latentlab::kernels::LATENTLAB_KERNEL_ISA
