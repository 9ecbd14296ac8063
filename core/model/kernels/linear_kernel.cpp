// A linear layer on the few rows of a decode step: y = x W^T + b with each
// weight row read once from memory and used for every row of x while it is in
// registers. LibTorch's GEMM packs the weight panel on every call, which for
// one to eight rows costs more memory traffic than the product itself. Built
// once per instruction set, like decode_attention_kernel.cpp.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "model/kernels/cpu_kernels.h"
#include "model/kernels/simd_f32.h"

namespace latentlab::kernels::LATENTLAB_KERNEL_ISA {
namespace {

using namespace simd;

// Outputs [n, n + count) (count <= 16) for rows [m0, m0 + RB).
// With `ahead`, the whole weight block two further on is asked for as this
// one is read, a line per weight row per step: the hardware prefetchers
// alone leave the loads waiting on memory, and a burst of prefetches would
// overflow the core's miss buffers.
template <int RB>
void block(const LinearKernelArgs<float>& a, std::int64_t m0, std::int64_t n, std::int64_t count, const float* ahead) {
  const float* x[RB];
  for (int r = 0; r < RB; ++r) x[r] = a.x + (m0 + r) * a.xs;
  F16 partial[RB][16];
  const float* w = a.w + n * a.ws;
  std::int64_t j = 0;
  for (; j + 4 <= count; j += 4) {
    F16 acc[RB][4] = {};
    dots4<RB>(x, w + j * a.ws, a.ws, a.dim, acc, ahead != nullptr ? ahead + j * a.ws : nullptr);
    for (int r = 0; r < RB; ++r)
      for (int i = 0; i < 4; ++i) partial[r][j + i] = acc[r][i];
  }
  for (; j < count; ++j) {
    F16 acc[RB] = {};
    dots1<RB>(x, w + j * a.ws, a.dim, acc);
    for (int r = 0; r < RB; ++r) partial[r][j] = acc[r];
  }
  for (; j < 16; ++j)
    for (int r = 0; r < RB; ++r) partial[r][j] = F16{};
  for (int r = 0; r < RB; ++r) {
    F16 out = sumLanesOf16(partial[r]);
    float* y = a.y + (m0 + r) * a.ys + n;
    if (count == 16) {
      if (a.bias != nullptr) out += load<F16>(a.bias + n);
      store(y, out);
    } else {
      for (std::int64_t i = 0; i < count; ++i) y[i] = out[i] + (a.bias != nullptr ? a.bias[n + i] : 0.0f);
    }
  }
}

}  // namespace

void linearOutsF32(const LinearKernelArgs<float>& args, std::int64_t outBegin, std::int64_t outEnd) {
  const LinearKernelArgs<float> a = args;  // a local copy: the stores below cannot alias it
  for (std::int64_t n = outBegin; n < outEnd; n += 16) {
    const std::int64_t count = std::min<std::int64_t>(16, outEnd - n);
    // Four rows at a time share each weight chunk loaded; a 16-row weight block
    // read for a second group of rows comes from the core's cache, not memory.
    // The block two ahead (whole blocks only), asked for by the first group of rows.
    const float* ahead = n + 3 * 16 <= outEnd ? a.w + (n + 2 * 16) * a.ws : nullptr;
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

}  // namespace latentlab::kernels::LATENTLAB_KERNEL_ISA
