// A linear layer on the few rows of a decode step: y = x W^T + b with each
// weight row read once from memory and used for every row of x while it is in
// registers; in fp32, or with bf16 weights widened as they are loaded and fp32
// sums (as LibTorch's bf16 linear accumulates). LibTorch's GEMM packs the weight panel on every call, which for
// one to eight rows costs more memory traffic than the product itself. Built
// once per instruction set, like decode_attention_kernel.cpp.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "model/kernels/cpu_kernels.h"
#include "model/kernels/simd_f32.h"

namespace latentlab::kernels::LATENTLAB_KERNEL_ISA {
namespace {

using namespace simd;

// One call's work: weights, bias and output are T (float, or bf16 bits, the
// output rounded once); the x rows are X: fp32 (bf16 rows converted once a
// call), or bf16 where the CPU multiplies bf16 pairs itself.
template <class T, class X = float>
struct Job {
  const X* x = nullptr;
  const T* w = nullptr;
  const T* bias = nullptr;
  T* y = nullptr;
  std::int64_t xs = 0, ws = 0, ys = 0, rows = 0, dim = 0;
  std::int64_t outs = 0;  // the layer's outputs: a range prefetches past its end, up to these
};

#if defined(__AVX512BF16__)
// Lane-wise sums of products of RB bf16 rows with K bf16 keys (rows `stride`
// apart), 32 products an instruction (vdpbf16ps: each fp32 lane adds a pair
// of exact bf16 products), added to acc[r][k]. The widening path below costs
// a shuffle and a shift per 16 weights, which holds a core under the memory's
// rate; this one reads the weights as they are. A dim off the 32-value grid
// ends with a masked load (zeros past it).
template <int RB, int K>
inline void bf16Dots(const std::uint16_t* const* x, const std::uint16_t* w, std::int64_t stride, std::int64_t d,
                     F16 (*acc)[K], const std::uint16_t* ahead) {
  __m512 sum[RB][K];
  for (int r = 0; r < RB; ++r)
    for (int k = 0; k < K; ++k) sum[r][k] = _mm512_setzero_ps();
  auto step = [&](std::int64_t c, __mmask32 mask) {
    __m512bh wv[K];
    for (int k = 0; k < K; ++k) wv[k] = (__m512bh)_mm512_maskz_loadu_epi16(mask, w + k * stride + c);
    for (int r = 0; r < RB; ++r) {
      const __m512bh xv = (__m512bh)_mm512_maskz_loadu_epi16(mask, x[r] + c);
      for (int k = 0; k < K; ++k) sum[r][k] = _mm512_dpbf16_ps(sum[r][k], xv, wv[k]);
    }
  };
  std::int64_t c = 0;
  for (; c + 32 <= d; c += 32) {
    if (ahead != nullptr)
      for (int k = 0; k < K; ++k) prefetch(ahead + k * stride + c);
    step(c, ~__mmask32{0});
  }
  if (c < d) step(c, static_cast<__mmask32>((std::uint64_t{1} << (d - c)) - 1));
  for (int r = 0; r < RB; ++r)
    for (int k = 0; k < K; ++k) acc[r][k] += std::bit_cast<F16>(sum[r][k]);
}
#else
template <int RB, int K>
inline void bf16Dots(const std::uint16_t* const*, const std::uint16_t*, std::int64_t, std::int64_t, F16 (*)[K],
                     const std::uint16_t*) {}  // not called: X is float in builds without the instruction
#endif

// Outputs [n, n + count) (count <= 16) for rows [m0, m0 + RB).
// With `ahead`, the whole weight block two further on is asked for as this
// one is read, a line per weight row per step: the hardware prefetchers
// alone leave the loads waiting on memory, and a burst of prefetches would
// overflow the core's miss buffers.
template <int RB, class T, class X>
void block(const Job<T, X>& a, std::int64_t m0, std::int64_t n, std::int64_t count, const T* ahead) {
  const X* x[RB];
  for (int r = 0; r < RB; ++r) x[r] = a.x + (m0 + r) * a.xs;
  F16 partial[RB][16];
  const T* w = a.w + n * a.ws;
  std::int64_t j = 0;
  for (; j + 4 <= count; j += 4) {
    F16 acc[RB][4] = {};
    const T* next = ahead != nullptr ? ahead + j * a.ws : nullptr;
    if constexpr (std::is_same_v<X, float>) {
      dots4<RB>(x, w + j * a.ws, a.ws, a.dim, acc, next);
    } else {
      bf16Dots<RB, 4>(x, w + j * a.ws, a.ws, a.dim, acc, next);
    }
    for (int r = 0; r < RB; ++r)
      for (int i = 0; i < 4; ++i) partial[r][j + i] = acc[r][i];
  }
  for (; j < count; ++j) {
    F16 acc[RB][1] = {};
    if constexpr (std::is_same_v<X, float>) {
      F16 one[RB] = {};
      dots1<RB>(x, w + j * a.ws, a.dim, one);
      for (int r = 0; r < RB; ++r) acc[r][0] = one[r];
    } else {
      bf16Dots<RB, 1>(x, w + j * a.ws, a.ws, a.dim, acc, nullptr);
    }
    for (int r = 0; r < RB; ++r) partial[r][j] = acc[r][0];
  }
  for (; j < 16; ++j)
    for (int r = 0; r < RB; ++r) partial[r][j] = F16{};
  for (int r = 0; r < RB; ++r) {
    F16 out = sumLanesOf16(partial[r]);
    T* y = a.y + (m0 + r) * a.ys + n;
    if (a.bias != nullptr) {
      if (count == 16) {
        out += loadAs<F16>(a.bias + n);
      } else {
        for (std::int64_t i = 0; i < count; ++i) out[i] += toFloat(a.bias[n + i]);
      }
    }
    if constexpr (std::is_same_v<T, float>) {
      if (count == 16) {
        store(y, out);
      } else {
        for (std::int64_t i = 0; i < count; ++i) y[i] = out[i];
      }
    } else {
      storeBf16(y, out, count);
    }
  }
}

template <class T, class X>
void outs(const Job<T, X>& a, std::int64_t outBegin, std::int64_t outEnd) {
  for (std::int64_t n = outBegin; n < outEnd; n += 16) {
    const std::int64_t count = std::min<std::int64_t>(16, outEnd - n);
    // Four rows at a time share each weight chunk loaded; a 16-row weight block
    // read for a second group of rows comes from the core's cache, not memory.
    // The block two ahead (whole blocks only), asked for by the first group of
    // rows, also past the range's end: ranges are split over threads in chunks
    // of a few blocks, and the next chunk's first blocks are likely this
    // thread's next work.
    const T* ahead = n + 3 * 16 <= a.outs ? a.w + (n + 2 * 16) * a.ws : nullptr;
    for (std::int64_t m0 = 0; m0 < a.rows; m0 += 4, ahead = nullptr) {
      switch (std::min<std::int64_t>(4, a.rows - m0)) {
        case 1:
          block<1>(a, m0, n, count, ahead);
          break;
        case 2:
          block<2>(a, m0, n, count, ahead);
          break;
        case 3:
          block<3>(a, m0, n, count, ahead);
          break;
        default:
          block<4>(a, m0, n, count, ahead);
          break;
      }
    }
  }
}

}  // namespace

void linearOutsF32(const LinearKernelArgs<float>& args, std::int64_t outBegin, std::int64_t outEnd) {
  // A local copy: the stores cannot alias it.
  const Job<float> a{args.x, args.w, args.bias, args.y, args.xs, args.ws, args.ys, args.rows, args.dim, args.outs};
  outs(a, outBegin, outEnd);
}

void linearOutsBF16(const LinearKernelArgs<std::uint16_t>& args, std::int64_t outBegin, std::int64_t outEnd) {
#if defined(__AVX512BF16__)
  const Job<std::uint16_t, std::uint16_t> direct{args.x,  args.w,  args.bias, args.y,   args.xs,
                                                 args.ws, args.ys, args.rows, args.dim, args.outs};
  outs(direct, outBegin, outEnd);
  return;
#endif
  // The rows in fp32, once a call: a few rows against a share of at least
  // 2 MiB of weights (decode_linear.cpp), so the copy costs under a percent.
  thread_local std::vector<float> rows;
  rows.resize(static_cast<std::size_t>(args.rows * args.dim));
  for (std::int64_t m = 0; m < args.rows; ++m) {
    const std::uint16_t* src = args.x + m * args.xs;
    float* dst = rows.data() + m * args.dim;
    std::int64_t c = 0;
    for (; c + 16 <= args.dim; c += 16) store(dst + c, loadAs<F16>(src + c));
    for (; c < args.dim; ++c) dst[c] = toFloat(src[c]);
  }
  const Job<std::uint16_t> a{rows.data(), args.w,  args.bias, args.y,   args.dim,
                             args.ws,     args.ys, args.rows, args.dim, args.outs};
  outs(a, outBegin, outEnd);
}

}  // namespace latentlab::kernels::LATENTLAB_KERNEL_ISA
