// Vector helpers for the CPU kernels (fp32, 16 lanes; bf16 widened to fp32), written with GCC/Clang
// vector types so that each kernel file, built once per instruction set, gets
// them in that set's registers. Included only by those files, inside their
// per-instruction-set namespace (LATENTLAB_KERNEL_ISA), so no two builds share
// a definition.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#ifndef LATENTLAB_KERNEL_ISA
#error "LATENTLAB_KERNEL_ISA must name the instruction set this file is built for"
#endif

namespace latentlab::kernels::LATENTLAB_KERNEL_ISA::simd {

constexpr float kNegInfF = -std::numeric_limits<float>::infinity();

using F16 = float __attribute__((vector_size(64)));
using F8 = float __attribute__((vector_size(32)));
using F4 = float __attribute__((vector_size(16)));
using I16 = std::int32_t __attribute__((vector_size(64)));

// How many 16-float vectors the registers hold: 32 in AVX-512's zmm registers,
// 8 in AVX2's 16 ymm (two each), 4 in SSE2's 16 xmm. Kernels size their
// register blocks from it so that no build spills its accumulators.
#if defined(__AVX512F__)
constexpr int kRegisterVectors = 32;
#elif defined(__AVX__)
constexpr int kRegisterVectors = 8;
#else
constexpr int kRegisterVectors = 4;
#endif

template <class V>
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, F16 v) {
  std::memcpy(p, &v, sizeof v);
}
inline F16 splat(float x) {
  return x - F16{};
}  // a broadcast (x + 0 could not fold: -0 + 0 is +0)

// Lane-wise mask ? a : b (mask lanes all ones or all zeros), as bit operations:
// GCC lowers the vector ?: lane by lane when the vector is wider than the target's.
inline F16 select(I16 mask, F16 a, F16 b) {
  return std::bit_cast<F16>((std::bit_cast<I16>(a) & mask) | (std::bit_cast<I16>(b) & ~mask));
}
inline F16 vmax(F16 a, F16 b) {
  return select(a > b, a, b);
}

// Lanes [a-quarter x, a-quarter y, b-quarter z, b-quarter w] of two vectors
// seen as four 4-float quarters each (one AVX-512 shuffle of 128-bit lanes).
template <int X, int Y, int Z, int W>
inline F16 quarters(F16 a, F16 b) {
  return __builtin_shufflevector(a, b, 4 * X, 4 * X + 1, 4 * X + 2, 4 * X + 3, 4 * Y, 4 * Y + 1, 4 * Y + 2, 4 * Y + 3,
                                 16 + 4 * Z, 16 + 4 * Z + 1, 16 + 4 * Z + 2, 16 + 4 * Z + 3, 16 + 4 * W, 16 + 4 * W + 1,
                                 16 + 4 * W + 2, 16 + 4 * W + 3);
}

// Quarters [X, Y, Z, W] of the eight of a (0..3) and b (4..7): one two-source permute.
template <int X, int Y, int Z, int W>
inline F16 pickQuarters(F16 a, F16 b) {
  return __builtin_shufflevector(a, b, 4 * X, 4 * X + 1, 4 * X + 2, 4 * X + 3, 4 * Y, 4 * Y + 1, 4 * Y + 2, 4 * Y + 3,
                                 4 * Z, 4 * Z + 1, 4 * Z + 2, 4 * Z + 3, 4 * W, 4 * W + 1, 4 * W + 2, 4 * W + 3);
}

// The first two transpose stages of 4 rows x0..x3 (each 16 columns): after
// them u[j] holds, in quarter L, column 4L + j of the four rows.
inline void transpose4InQuarters(const F16* x, F16* u) {
  F16 t[4];
  for (int i = 0; i < 2; ++i) {  // interleave the floats of rows 2i and 2i+1, per quarter
    const F16 a = x[2 * i], b = x[2 * i + 1];
    t[2 * i] = __builtin_shufflevector(a, b, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
    t[2 * i + 1] = __builtin_shufflevector(a, b, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
  }
  for (int s = 0; s < 2; ++s) {  // then their float pairs: rows 0,1 with rows 2,3
    const F16 a = t[s], b = t[2 + s];
    u[2 * s] = __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    u[2 * s + 1] = __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  }
}

// out[c][i] = x[i][c]: a 16 x 16 transpose in 64 shuffles.
inline void transpose16(const F16* x, F16* out) {
  F16 u[16];
  for (int b = 0; b < 4; ++b) transpose4InQuarters(x + 4 * b, u + 4 * b);  // u[4b+j] quarter L: col 4L+j, rows 4b..
  for (int j = 0; j < 4; ++j) {  // a 4 x 4 transpose of quarters among u[j], u[4+j], u[8+j], u[12+j]
    const F16 p = quarters<0, 2, 0, 2>(u[j], u[4 + j]), q = quarters<1, 3, 1, 3>(u[j], u[4 + j]);
    const F16 r = quarters<0, 2, 0, 2>(u[8 + j], u[12 + j]), s = quarters<1, 3, 1, 3>(u[8 + j], u[12 + j]);
    out[j] = quarters<0, 2, 0, 2>(p, r);
    out[8 + j] = quarters<1, 3, 1, 3>(p, r);
    out[4 + j] = quarters<0, 2, 0, 2>(q, s);
    out[12 + j] = quarters<1, 3, 1, 3>(q, s);
  }
}

// The same for 16 rows of 8 columns, given as x[i] = row i in the low half and
// row i + 8 in the high half (i < 8): out[c][i] = row i's column c, c < 8.
inline void transpose16x8(const F16* x, F16* out) {
  F16 u[8];
  for (int b = 0; b < 2; ++b) transpose4InQuarters(x + 4 * b, u + 4 * b);  // quarters 0,1: rows 4b..; 2,3: rows 8+4b..
  for (int j = 0; j < 4; ++j) {
    out[j] = pickQuarters<0, 4, 2, 6>(u[j], u[4 + j]);
    out[4 + j] = pickQuarters<1, 5, 3, 7>(u[j], u[4 + j]);
  }
}

// Asks for the cache line holding p to be brought into a cache level ahead of
// its use: by default the second (the first holds a kernel's working set),
// Level 1 for data wanted shortly. GCC deletes loops whose only statements
// are __builtin_prefetch, so on x86 the instruction is written out.
template <int Level = 2, class T>
inline void prefetch(const T* p) {
  static_assert(Level == 1 || Level == 2);
#if defined(__x86_64__) || defined(__i386__)
  if constexpr (Level == 1) {
    asm volatile("prefetcht0 %0" : : "m"(*p));
  } else {
    asm volatile("prefetcht1 %0" : : "m"(*p));
  }
#else
  __builtin_prefetch(p, 0, Level == 1 ? 3 : 2);
#endif
}

// [lo, hi] as one vector.
inline F16 join(F8 lo, F8 hi) {
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

inline F16 widen(F8 v) {
  return join(v, F8{});
}

// bf16 values held as their bits (the high half of an fp32's): widening is a
// shift, exact; narrowing rounds to nearest, ties to even, as LibTorch does,
// and keeps a NaN a (quiet) NaN.
using U16x16 = std::uint16_t __attribute__((vector_size(32)));
using U16x8 = std::uint16_t __attribute__((vector_size(16)));
using U32x16 = std::uint32_t __attribute__((vector_size(64)));
using U32x8 = std::uint32_t __attribute__((vector_size(32)));

inline float toFloat(float x) {
  return x;
}
inline float toFloat(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}
inline std::uint16_t toBf16(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffU) > 0x7f800000U) return static_cast<std::uint16_t>((u >> 16) | 0x40U);
  return static_cast<std::uint16_t>((u + 0x7fffU + ((u >> 16) & 1U)) >> 16);
}

// V (F16 or F8) from as many floats, or bf16 values widened to floats.
template <class V>
inline V loadAs(const float* p) {
  return load<V>(p);
}
template <class V>
inline V loadAs(const std::uint16_t* p) {
  if constexpr (sizeof(V) == sizeof(F16)) {
#if defined(__AVX512F__)
    // One zero-extending load and a shift (GCC splits the generic form in halves).
    // (The masked forms: GCC 12 warns that the unmasked ones read an undefined vector.)
    const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return std::bit_cast<F16>(std::bit_cast<U32x16>(wide) << 16);
#else
    U16x16 h;
    std::memcpy(&h, p, sizeof h);
    return std::bit_cast<F16>(__builtin_convertvector(h, U32x16) << 16);
#endif
  } else {
    U16x8 h;
    std::memcpy(&h, p, sizeof h);
    return std::bit_cast<F8>(__builtin_convertvector(h, U32x8) << 16);
  }
}

// The 16 lanes of v rounded to bf16, the first n of them stored.
inline void storeBf16(std::uint16_t* p, F16 v, std::int64_t n = 16) {
  const U32x16 u = std::bit_cast<U32x16>(v);
  const U32x16 rounded = (u + 0x7fffU + ((u >> 16) & 1U)) >> 16;
  const U32x16 nan = std::bit_cast<U32x16>((u & 0x7fffffffU) > 0x7f800000U);
  const U16x16 h = __builtin_convertvector((rounded & ~nan) | (((u >> 16) | 0x40U) & nan), U16x16);
  std::memcpy(p, &h, static_cast<std::size_t>(n) * sizeof(std::uint16_t));
}

// The 16 lanes of v rounded to bf16 as storeBf16 rounds them, kept as fp32
// (the low 16 bits zero): a product's rounding to bf16 without leaving the registers.
inline F16 roundBf16(F16 v) {
  const U32x16 u = std::bit_cast<U32x16>(v);
  const U32x16 rounded = (u + 0x7fffU + ((u >> 16) & 1U)) & 0xffff0000U;
  const U32x16 nan = std::bit_cast<U32x16>((u & 0x7fffffffU) > 0x7f800000U);
  return std::bit_cast<F16>((rounded & ~nan) | ((u | 0x400000U) & 0xffff0000U & nan));
}

// Lane-wise products of RB query rows with four consecutive keys k_0..k_3
// (rows `stride` apart) over d dims, added to acc[r][j]: the sum of the lanes
// of acc[r][j] is q_r . k_j. Each key chunk loaded serves every row, and the
// RB x 4 accumulators are independent FMA chains.
// With `ahead`, four rows laid out as k's (the same rows further on) are asked
// for a line at a time as k's are read.
// The keys may be bf16 (K = std::uint16_t), widened as they are loaded.
template <int RB, class K>
inline void dots4(const float* const* q, const K* k, std::int64_t stride, std::int64_t d, F16 (*acc)[4],
                  const K* ahead = nullptr) {
  constexpr std::int64_t kLine = 64 / sizeof(K);  // values in a cache line
  const K* kj[4] = {k, k + stride, k + 2 * stride, k + 3 * stride};
  std::int64_t c = 0;
  if constexpr (kLine == 32) {  // bf16: a whole line of each key a step, as fp32 reads
    for (; c + 32 <= d; c += 32) {
      if (ahead != nullptr)
        for (int j = 0; j < 4; ++j) prefetch(ahead + j * stride + c);
      F16 kv[4][2];
      for (int j = 0; j < 4; ++j)
        for (int h = 0; h < 2; ++h) kv[j][h] = loadAs<F16>(kj[j] + c + 16 * h);
      for (int r = 0; r < RB; ++r) {
        const F16 q0 = load<F16>(q[r] + c), q1 = load<F16>(q[r] + c + 16);
        for (int j = 0; j < 4; ++j) acc[r][j] += q0 * kv[j][0] + q1 * kv[j][1];
      }
    }
  }
  for (; c + 16 <= d; c += 16) {
    if (ahead != nullptr && c % kLine == 0)
      for (int j = 0; j < 4; ++j) prefetch(ahead + j * stride + c);
    F16 kv[4];
    for (int j = 0; j < 4; ++j) kv[j] = loadAs<F16>(kj[j] + c);
    for (int r = 0; r < RB; ++r) {
      const F16 qv = load<F16>(q[r] + c);
      for (int j = 0; j < 4; ++j) acc[r][j] += qv * kv[j];
    }
  }
  if (c + 8 <= d) {
    F8 kv[4];
    for (int j = 0; j < 4; ++j) kv[j] = loadAs<F8>(kj[j] + c);
    for (int r = 0; r < RB; ++r) {
      const F8 qv = load<F8>(q[r] + c);
      for (int j = 0; j < 4; ++j) acc[r][j] += widen(qv * kv[j]);
    }
    c += 8;
  }
  for (; c < d; ++c)
    for (int r = 0; r < RB; ++r)
      for (int j = 0; j < 4; ++j) acc[r][j][0] += q[r][c] * toFloat(kj[j][c]);
}

// The same for one key.
template <int RB, class K>
inline void dots1(const float* const* q, const K* k, std::int64_t d, F16* acc) {
  std::int64_t c = 0;
  for (; c + 16 <= d; c += 16) {
    const F16 kv = loadAs<F16>(k + c);
    for (int r = 0; r < RB; ++r) acc[r] += load<F16>(q[r] + c) * kv;
  }
  if (c + 8 <= d) {
    const F8 kv = loadAs<F8>(k + c);
    for (int r = 0; r < RB; ++r) acc[r] += widen(load<F8>(q[r] + c) * kv);
    c += 8;
  }
  for (; c < d; ++c)
    for (int r = 0; r < RB; ++r) acc[r][0] += q[r][c] * toFloat(k[c]);
}

// out[t] = sum of the 16 lanes of p[t]: a transposing tree of shuffles and adds
// (15 adds for 16 keys instead of 16 horizontal sums). After the first level,
// vector i holds 8 partial sums of key 2i in its low half and 8 of key 2i+1 in
// its high half; with `pairs`, pairs[i] (the same layout: two keys' 8-lane
// products side by side) is added there, for free.
template <bool kPairs = false>
inline F16 sumLanesOf16(const F16* p, const F16* pairs = nullptr) {
  F16 c[8], d[4], e[2];
  for (int i = 0; i < 8; ++i) {
    const F16 a = p[2 * i], b = p[2 * i + 1];
    c[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
           __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    if constexpr (kPairs) c[i] += pairs[i];
  }
  for (int i = 0; i < 4; ++i) {
    const F16 a = c[2 * i], b = c[2 * i + 1];
    d[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27) +
           __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  }
  for (int i = 0; i < 2; ++i) {
    const F16 a = d[2 * i], b = d[2 * i + 1];
    e[i] = __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) +
           __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  }
  const F16 f = __builtin_shufflevector(e[0], e[1], 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) +
                __builtin_shufflevector(e[0], e[1], 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
  // f holds key t in lane bitreverse4(t).
  return __builtin_shufflevector(f, f, 0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15);
}

inline float sumLanes(F16 v) {
  F8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
         __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  F4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (b[0] + b[2]) + (b[1] + b[3]);
}
// Whether any lane of v is greater than x.
inline bool anyGreater(F16 v, float x) {
#if defined(__AVX512F__)
  return _mm512_cmp_ps_mask(std::bit_cast<__m512>(v), _mm512_set1_ps(x), _CMP_GT_OQ) != 0;
#else
  const I16 gt = v > x;
  std::int32_t any = 0;
  for (int i = 0; i < 16; ++i) any |= gt[i];
  return any != 0;
#endif
}
inline float maxLanes(F16 v) {
  F16 m = vmax(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  m = vmax(m, __builtin_shufflevector(m, m, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  m = vmax(m, __builtin_shufflevector(m, m, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  m = vmax(m, __builtin_shufflevector(m, m, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  return m[0];
}

// exp(x) for x <= 0, all a softmax needs once the running max is subtracted:
// Cody-Waite reduction x = n ln2 + r with |r| <= ln2/2, Cephes' degree-5
// polynomial for exp(r), 2^n written into the exponent bits. Relative error
// below 2e-7; inputs under -87 give exp(-87), about 1.6e-38.
[[gnu::always_inline]] inline F16 expNonPositive(F16 x) {
  const F16 lo = splat(-87.0f);
  x = vmax(x, lo);
  const F16 n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const F16 r = x - n * 0.693359375f + n * 2.12194440e-4f;
  F16 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const I16 e = (__builtin_convertvector(n, I16) + 127) << 23;
  return p * std::bit_cast<F16>(e);
}

}  // namespace latentlab::kernels::LATENTLAB_KERNEL_ISA::simd
