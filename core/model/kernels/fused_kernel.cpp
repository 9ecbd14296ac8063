// RMSNorm, the gated MLP activation and rotary embeddings as one pass each,
// and (fp32, for training) the backward of the first two and the
// cross-entropy loss with its gradient: the unfused forms
// run five, two and five LibTorch
// operators, each a pass over the activations and (on a prompt's rows) a
// wake-up of the OpenMP threads. The roundings are the unfused forms' own, so
// that a bf16 result differs from them only where the fp32 sum of squares or
// exp() lands on the other side of a rounding boundary (RoPE's bf16 results
// are theirs bit for bit). Built once per instruction set, like
// decode_attention_kernel.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "model/kernels/cpu_kernels.h"
#include "model/kernels/simd_f32.h"

namespace latentlab::kernels::LATENTLAB_KERNEL_ISA {
namespace {

using namespace simd;

// T's value of a float: itself, or rounded to bf16 and widened back.
template <class T>
inline F16 asStored(F16 v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return roundBf16(v);
  }
}

template <class T>
inline void storeAs(T* p, F16 v, std::int64_t n = 16) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(p, &v, static_cast<std::size_t>(n) * sizeof(float));
  } else {
    storeBf16(p, v, n);
  }
}

// The first n (< 16) values at p, zeros after.
template <class T>
inline F16 loadPartial(const T* p, std::int64_t n) {
  T buf[16] = {};
  std::memcpy(buf, p, static_cast<std::size_t>(n) * sizeof(T));
  return loadAs<F16>(buf);
}

template <class T>
void rmsNormRows(const RmsNormArgs<T>& args, std::int64_t begin, std::int64_t end) {
  const RmsNormArgs<T> a = args;  // a local copy: the stores cannot alias it
  const std::int64_t d = a.dim, full = d / 16 * 16;
  for (std::int64_t m = begin; m < end; ++m) {
    const T* x = a.x + m * a.xs;
    T* y = a.y + m * a.ys;
    F16 acc[4] = {};
    std::int64_t c = 0;
    for (; c + 64 <= d; c += 64) {
      for (int j = 0; j < 4; ++j) {
        const F16 v = loadAs<F16>(x + c + 16 * j);
        acc[j] += v * v;
      }
    }
    for (; c < full; c += 16) {
      const F16 v = loadAs<F16>(x + c);
      acc[0] += v * v;
    }
    if (c < d) {
      const F16 v = loadPartial(x + c, d - c);
      acc[1] += v * v;
    }
    const float sum = sumLanes((acc[0] + acc[1]) + (acc[2] + acc[3]));
    // As LibTorch's rsqrt: a correctly rounded square root, then 1 / it.
    const float r = 1.0f / std::sqrt(sum / static_cast<float>(d) + a.eps);
    if (a.rstd != nullptr) a.rstd[m] = r;
    const F16 rv = splat(r);
    // (1 + w) scaling in fp32 before the one rounding; w scaling after
    // rounding the normalised row to T, in T's arithmetic.
    const auto scaled = [&](F16 v, F16 w) { return a.plusOne ? (v * rv) * (w + 1.0f) : w * asStored<T>(v * rv); };
    for (c = 0; c < full; c += 16) storeAs(y + c, scaled(loadAs<F16>(x + c), loadAs<F16>(a.w + c)));
    if (c < d) storeAs(y + c, scaled(loadPartial(x + c, d - c), loadPartial(a.w + c, d - c)), d - c);
  }
}

// 1 / d for d in [1, 2]: with AVX-512 the 14-bit estimate and one Newton
// step (within an fp32 rounding or two; a division's latency is most of the
// activation's time), else the division.
inline F16 reciprocal(F16 d) {
#if defined(__AVX512F__)
  const F16 r = std::bit_cast<F16>(_mm512_maskz_rcp14_ps(0xffff, std::bit_cast<__m512>(d)));
  return r * (2.0f - d * r);
#else
  return 1.0f / d;
#endif
}

// act(g) * u for act = SiLU (g * sigmoid(g)) or tanh-approximated GELU
// (g * sigmoid(2z), z = sqrt(2/pi) (g + 0.044715 g^3)). sigmoid(s) is
// 1 / (1 + e) for s >= 0 and e / (1 + e) below, with e = exp(-|s|) <= 1, so
// neither branch overflows. (LibTorch's GELU, 0.5 g (1 + tanh(z)), loses its
// value to cancellation where tanh(z) nears -1, below g = -4 or so in fp32;
// this form keeps it, within 1e-6 of the definition.)
template <class T>
inline F16 gated(F16 g, F16 u, bool gelu) {
  F16 s = g;
  if (gelu) s = 2.0f * 0.7978845608028654f * (g + 0.044715f * g * g * g);
  const I16 negative = s < 0.0f;
  const F16 e = expNonPositive(select(negative, s, -s));
  const F16 act = g * select(negative, e, splat(1.0f)) * reciprocal(1.0f + e);
  return asStored<T>(act) * u;
}

template <class T>
void gatedRange(const GatedArgs<T>& args, std::int64_t begin, std::int64_t end) {
  const GatedArgs<T> a = args;  // a local copy: the stores cannot alias it
  std::int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    storeAs(a.y + i, gated<T>(loadAs<F16>(a.gate + i), loadAs<F16>(a.up + i), a.gelu));
  }
  if (i < end) {
    storeAs(a.y + i, gated<T>(loadPartial(a.gate + i, end - i), loadPartial(a.up + i, end - i), a.gelu), end - i);
  }
}

// x cos + rotate_half(x) sin on the first rd dims of each row (rotate_half:
// [-x2, x1] for halves x1, x2), each product rounded to T, then their sum;
// dims from rd on copied.
template <class T>
void ropeRows(const RopeArgs<T>& args, std::int64_t begin, std::int64_t end) {
  const RopeArgs<T> a = args;  // a local copy: the stores cannot alias it
  const std::int64_t half = a.rd / 2;
  // Row r is (b, h, t) with t inner, or (b, t, h) with h inner where heads
  // lie closer in memory (a projection's output viewed as (B, H, T, d)), so
  // that the rows are read in the order they are stored. The indices are
  // divided out once, then counted on.
  const bool headsInner = a.xsh < a.xst;
  const std::int64_t innerN = headsInner ? a.heads : a.seq, outerN = headsInner ? a.seq : a.heads;
  std::int64_t inner = begin % innerN, outer = (begin / innerN) % outerN, b = begin / (innerN * outerN);
  for (std::int64_t r = begin; r < end; ++r, ++inner) {
    if (inner == innerN) {
      inner = 0;
      if (++outer == outerN) outer = 0, ++b;
    }
    const std::int64_t h = headsInner ? inner : outer, t = headsInner ? outer : inner;
    const T* x = a.x + b * a.xsb + h * a.xsh + t * a.xst;
    T* y = a.y + b * a.ysb + h * a.ysh + t * a.yst;
    const T* cos = a.cos + t * a.rd;
    const T* sin = a.sin + t * a.rd;
    for (std::int64_t c = 0; c < half; c += 16) {
      const std::int64_t n = std::min<std::int64_t>(16, half - c);
      const auto at = [&](const T* p) { return n == 16 ? loadAs<F16>(p) : loadPartial(p, n); };
      const F16 x1 = at(x + c), x2 = at(x + half + c);
      const F16 lo = asStored<T>(x1 * at(cos + c)) + asStored<T>(-x2 * at(sin + c));
      const F16 hi = asStored<T>(x2 * at(cos + half + c)) + asStored<T>(x1 * at(sin + half + c));
      storeAs(y + c, lo, n);
      storeAs(y + half + c, hi, n);
    }
    if (a.rd < a.dim) std::memcpy(y + a.rd, x + a.rd, static_cast<std::size_t>(a.dim - a.rd) * sizeof(T));
  }
}

// RMSNorm's backward, fp32 (RmsNormBackwardArgs): per row, one pass for the
// mean of gy v x^ (and gw's share), one for gx.
void rmsNormBackwardRows(const RmsNormBackwardArgs& args, std::int64_t begin, std::int64_t end) {
  const RmsNormBackwardArgs a = args;  // a local copy: the stores cannot alias it
  const std::int64_t d = a.dim;
  const auto at = [](const float* p, std::int64_t c, std::int64_t n) {
    return n == 16 ? loadAs<F16>(p + c) : loadPartial(p + c, n);
  };
  for (std::int64_t m = begin; m < end; ++m) {
    const float* x = a.x + m * d;
    const float* gy = a.gy + m * d;
    float* gx = a.gx + m * d;
    if (!(a.rstd[m] > 0.0f)) {
      // The sum of squares overflowed fp32: no finite normalisation. The
      // gradient is NaN, so that the step's finite check stops the run
      // instead of training on zeros (the operators' chain gets there through
      // inf x 0 once the incoming gradient is large).
      std::fill(gx, gx + d, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    const F16 rv = splat(a.rstd[m]);
    F16 dot0 = {}, dot1 = {};
    for (std::int64_t c = 0; c < d; c += 16) {
      const std::int64_t n = std::min<std::int64_t>(16, d - c);
      const F16 xh = at(x, c, n) * rv, g = at(gy, c, n);
      const F16 w = a.plusOne ? at(a.w, c, n) + 1.0f : at(a.w, c, n);
      (c / 16 % 2 == 0 ? dot0 : dot1) += g * w * xh;
      storeAs(a.gw + c, at(a.gw, c, n) + g * xh, n);
    }
    const F16 mean = splat(sumLanes(dot0 + dot1) / static_cast<float>(d));
    for (std::int64_t c = 0; c < d; c += 16) {
      const std::int64_t n = std::min<std::int64_t>(16, d - c);
      const F16 xh = at(x, c, n) * rv, g = at(gy, c, n);
      const F16 w = a.plusOne ? at(a.w, c, n) + 1.0f : at(a.w, c, n);
      storeAs(gx + c, rv * (g * w - xh * mean), n);
    }
  }
}

// The gated activation's backward, fp32: act and its derivative from one
// sigmoid, sigma(s), s = g (SiLU) or 2z (GELU); act = g sigma, act' = sigma
// + g sigma (1 - sigma) ds/dg.
inline void gatedBackward(F16 g, F16 u, F16 gy, bool gelu, F16& gg, F16& gu) {
  F16 s = g, ds = splat(1.0f);
  if (gelu) {
    constexpr float k2c = 2.0f * 0.7978845608028654f;
    s = k2c * (g + 0.044715f * g * g * g);
    ds = k2c * (1.0f + 3.0f * 0.044715f * g * g);
  }
  const I16 negative = s < 0.0f;
  const F16 e = expNonPositive(select(negative, s, -s));
  const F16 sigma = select(negative, e, splat(1.0f)) / (1.0f + e);
  const F16 act = g * sigma;
  gu = gy * act;
  gg = gy * u * (sigma + act * (1.0f - sigma) * ds);
}

void gatedBackwardRange(const GatedBackwardArgs& args, std::int64_t begin, std::int64_t end) {
  const GatedBackwardArgs a = args;  // a local copy: the stores cannot alias it
  for (std::int64_t i = begin; i < end; i += 16) {
    const std::int64_t n = std::min<std::int64_t>(16, end - i);
    const auto at = [&](const float* p) { return n == 16 ? loadAs<F16>(p + i) : loadPartial(p + i, n); };
    F16 gg, gu;
    gatedBackward(at(a.gate), at(a.up), at(a.gy), a.gelu, gg, gu);
    storeAs(a.ggate + i, gg, n);
    storeAs(a.gup + i, gu, n);
  }
}

}  // namespace

// Cross-entropy (CrossEntropyArgs): the row's max, then the sum of
// exp(x - max) from four accumulators; the row is read twice (it stays in
// the second-level cache between the passes at vocabularies up to a few
// hundred thousand). x * 0 summed on the way flags NaN and infinities, which
// expNonPositive's clamp would otherwise hide.
void crossEntropyF32(const CrossEntropyArgs& args, std::int64_t begin, std::int64_t end) {
  const CrossEntropyArgs a = args;  // a local copy: the stores cannot alias it
  const std::int64_t V = a.vocab, whole = V / 16 * 16;
  for (std::int64_t r = begin; r < end; ++r) {
    const float* x = a.logits + r * V;
    F16 mx = splat(-std::numeric_limits<float>::infinity()), flags = splat(0.0f);
    for (std::int64_t j = 0; j < whole; j += 16) {
      const F16 v = loadAs<F16>(x + j);
      mx = vmax(mx, v);
      flags += v * 0.0f;
    }
    float m = maxLanes(mx), bad = sumLanes(flags);
    for (std::int64_t j = whole; j < V; ++j) m = std::max(m, x[j]), bad += x[j] * 0.0f;
    if (!std::isfinite(bad) || !std::isfinite(m)) {
      a.lse[r] = a.loss[r] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    F16 acc[4] = {splat(0.0f), splat(0.0f), splat(0.0f), splat(0.0f)};
    std::int64_t j = 0;
    for (; j + 64 <= whole; j += 64)
      for (int k = 0; k < 4; ++k) acc[k] += expNonPositive(loadAs<F16>(x + j + 16 * k) - m);
    for (; j < whole; j += 16) acc[0] += expNonPositive(loadAs<F16>(x + j) - m);
    float sum = sumLanes((acc[0] + acc[1]) + (acc[2] + acc[3]));
    for (; j < V; ++j) sum += std::exp(x[j] - m);
    const float lse = m + std::log(sum);
    a.lse[r] = lse;
    a.loss[r] = lse - x[a.targets[r]];
  }
}

void crossEntropyBackwardF32(const CrossEntropyArgs& args, std::int64_t begin, std::int64_t end) {
  const CrossEntropyArgs a = args;  // a local copy: the stores cannot alias it
  const std::int64_t V = a.vocab, whole = V / 16 * 16;
  for (std::int64_t r = begin; r < end; ++r) {
    const float* x = a.logits + r * V;
    float* g = a.grad + r * V;
    const float lse = a.lse[r];
    if (std::isnan(lse)) {
      std::fill(g, g + V, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    for (std::int64_t j = 0; j < whole; j += 16) store(g + j, a.scale * expNonPositive(loadAs<F16>(x + j) - lse));
    for (std::int64_t j = whole; j < V; ++j) g[j] = a.scale * std::exp(x[j] - lse);
    g[a.targets[r]] -= a.scale;
  }
}

// Causal attention's softmax rows (AttentionRowsArgs), whole vectors up to
// the seen keys' next multiple of 16 (the row's scratch room), the lanes past
// them masked. Forward: the scaled scores written back with their max and a
// NaN/infinity flag (x * 0) found on the way, then exp(z - max) and its sum,
// then the normalisation, each pass over a row that stays in the
// first-level cache.
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline I16 lanesBelow(std::int64_t j, std::int64_t n) {
  const I16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return (iota + static_cast<std::int32_t>(j)) < static_cast<std::int32_t>(n);
}

void attentionSoftmaxF32(const AttentionRowsArgs& args, std::int64_t begin, std::int64_t end) {
  const AttentionRowsArgs a = args;  // a local copy: the stores cannot alias it
  for (std::int64_t r = begin; r < end; ++r) {
    float* s = a.s + r * a.ld;
    const std::int64_t n = std::min(a.width, a.first + r), last = (n - 1) / 16 * 16;
    F16 mx = splat(kNegInf), flags = splat(0.0f);
    for (std::int64_t j = 0; j <= last; j += 16) {
      F16 z = loadAs<F16>(s + j) * a.scale;
      if (j == last) z = select(lanesBelow(j, n), z, splat(kNegInf));
      store(s + j, z);
      mx = vmax(mx, z);
      flags += select(lanesBelow(j, n), z * 0.0f, splat(0.0f));
    }
    const float m = maxLanes(mx);
    if (!std::isfinite(sumLanes(flags)) || !std::isfinite(m)) {
      std::fill(s, s + a.width, std::numeric_limits<float>::quiet_NaN());
      a.lse[r] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    F16 acc = splat(0.0f);
    for (std::int64_t j = 0; j <= last; j += 16) {
      F16 e = expNonPositive(loadAs<F16>(s + j) - m);
      if (j == last) e = select(lanesBelow(j, n), e, splat(0.0f));
      store(s + j, e);
      acc += e;
    }
    const float sum = sumLanes(acc), inv = 1.0f / sum;
    for (std::int64_t j = 0; j <= last; j += 16) store(s + j, loadAs<F16>(s + j) * inv);
    if (last + 16 < a.width) std::fill(s + last + 16, s + a.width, 0.0f);
    a.lse[r] = m + std::log(sum);
  }
}

// Backward: the row's sum of dO * O, then the probabilities again from the
// scores and the row's lse, and the scores' gradient p (dp - di), in one pass.
void attentionSoftmaxBackwardF32(const AttentionRowsArgs& args, std::int64_t begin, std::int64_t end) {
  const AttentionRowsArgs a = args;  // a local copy: the stores cannot alias it
  const std::int64_t dv = a.dv, dvWhole = dv / 16 * 16;
  for (std::int64_t r = begin; r < end; ++r) {
    float* s = a.s + r * a.ld;
    float* dp = a.dp + r * a.ld;
    const float* dOut = a.dOut + r * a.ldDOut;
    const float* out = a.out + r * a.ldOut;
    F16 dot = splat(0.0f);
    for (std::int64_t c = 0; c < dvWhole; c += 16) dot += loadAs<F16>(dOut + c) * loadAs<F16>(out + c);
    if (dvWhole < dv) dot += loadPartial(dOut + dvWhole, dv - dvWhole) * loadPartial(out + dvWhole, dv - dvWhole);
    const float lse = a.lse[r], di = sumLanes(dot);
    const std::int64_t n = std::min(a.width, a.first + r), last = (n - 1) / 16 * 16;
    if (!std::isfinite(lse) || !std::isfinite(di)) {
      std::fill(s, s + a.width, std::numeric_limits<float>::quiet_NaN());
      std::fill(dp, dp + a.width, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    for (std::int64_t j = 0; j <= last; j += 16) {
      F16 p = expNonPositive(loadAs<F16>(s + j) * a.scale - lse);
      F16 g = p * (loadAs<F16>(dp + j) - di);
      if (j == last) {
        const I16 seen = lanesBelow(j, n);
        p = select(seen, p, splat(0.0f));
        g = select(seen, g, splat(0.0f));
      }
      store(s + j, p);
      store(dp + j, g);
    }
    if (last + 16 < a.width) {
      std::fill(s + last + 16, s + a.width, 0.0f);
      std::fill(dp + last + 16, dp + a.width, 0.0f);
    }
  }
}

void rmsNormBackwardF32(const RmsNormBackwardArgs& a, std::int64_t begin, std::int64_t end) {
  rmsNormBackwardRows(a, begin, end);
}
void gatedBackwardF32(const GatedBackwardArgs& a, std::int64_t begin, std::int64_t end) {
  gatedBackwardRange(a, begin, end);
}

void rmsNormF32(const RmsNormArgs<float>& a, std::int64_t begin, std::int64_t end) {
  rmsNormRows(a, begin, end);
}
void rmsNormBF16(const RmsNormArgs<std::uint16_t>& a, std::int64_t begin, std::int64_t end) {
  rmsNormRows(a, begin, end);
}
void gatedF32(const GatedArgs<float>& a, std::int64_t begin, std::int64_t end) {
  gatedRange(a, begin, end);
}
void gatedBF16(const GatedArgs<std::uint16_t>& a, std::int64_t begin, std::int64_t end) {
  gatedRange(a, begin, end);
}
void ropeF32(const RopeArgs<float>& a, std::int64_t begin, std::int64_t end) {
  ropeRows(a, begin, end);
}
void ropeBF16(const RopeArgs<std::uint16_t>& a, std::int64_t begin, std::int64_t end) {
  ropeRows(a, begin, end);
}

}  // namespace latentlab::kernels::LATENTLAB_KERNEL_ISA
