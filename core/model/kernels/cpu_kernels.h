// The CPU kernels behind decoding (model/decode_attention.h, model/decode_linear.h,
// model/fused_ops.h):
// raw pointers and strides only, no torch, so that their source files can be
// compiled once per instruction set (AVX-512, AVX2, baseline) and chosen at
// run time, the way ATen builds its own CPU kernels.
#pragma once

#include <cstdint>
#include <vector>

namespace latentlab::kernels {

// A (B, H, N, d) tensor whose last dim is contiguous: element [b][h][n][c] at
// data[b*sb + h*sh + n*sn + c].
template <class T>
struct Strided4 {
  const T* data = nullptr;
  std::int64_t sb = 0, sh = 0, sn = 0;
  const T* row(std::int64_t b, std::int64_t h, std::int64_t n) const { return data + b * sb + h * sh + n * sn; }
};

// Query rows r of cache head h attend over that head's keys and values:
//   s[r][t] = scale * (q[b][h][r] . k[b][h][t] + qRope[b][hr][rr] . kRope[b][hr][t])
// where (hr, rr) = divmod(h*R + r, ropeRows) names the row in the optional
// second score term. Row r is query r % queries, at position Tk - queries +
// r % queries, and attends causally to keys up to that position.
// Work item i = ((b*H + h) * splits + s) covers keys [s*splitLen, (s+1)*splitLen)
// and writes the unnormalised softmax state of its rows: running max m, sum l
// and the l-weighted value sum acc (B, H, splits, R, dv).
template <class T>
struct DecodeKernelArgs {
  Strided4<T> q, k, v, qRope, kRope;  // qRope.data == nullptr: no second term
  std::int64_t batch = 0, heads = 0, rows = 0, keys = 0, queries = 1;
  std::int64_t dk = 0, dv = 0, dRope = 0, ropeRows = 1;
  std::int64_t splits = 1, splitLen = 0;
  T scale = 1;
  T* acc = nullptr;  // (B, H, splits, R, dv)
  T* max = nullptr;  // (B, H, splits, R)
  T* sum = nullptr;  // (B, H, splits, R)
};

// y[m][n] = x[m] . w[n] + bias[n] for rows m < rows and outputs n: a linear
// layer on the few rows of a decode step, reading each weight row once.
template <class T>
struct LinearKernelArgs {
  const T* x = nullptr;     // (rows, dim), row stride xs
  const T* w = nullptr;     // (outs, dim), row stride ws
  const T* bias = nullptr;  // (outs) or null
  T* y = nullptr;           // (rows, outs), row stride ys
  std::int64_t xs = 0, ws = 0, ys = 0, rows = 0, outs = 0, dim = 0;
};

// RMSNorm of rows m in [begin, end): r = 1 / sqrt(mean(x^2) + eps) in fp32,
// then y = w * T(x r) (T's rounding, then T's product), or, with plusOne,
// y = T((x r) (w + 1)) in fp32.
template <class T>
struct RmsNormArgs {
  const T* x = nullptr;  // (rows, dim), row stride xs
  const T* w = nullptr;  // (dim)
  T* y = nullptr;        // (rows, dim), row stride ys
  std::int64_t xs = 0, ys = 0, dim = 0;
  float eps = 0;
  bool plusOne = false;
  float* rstd = nullptr;  // (rows) or null: each row's r, kept for the backward
};

// The backward of fp32 RMSNorm over rows m in [begin, end) (x, gy, gx
// contiguous (rows, dim)): with x^ = x r and v = w (or w + 1),
// gx = r (gy v - x^ mean(gy v x^)), and gy x^ summed over the rows into gw
// (a buffer of dim values the range adds to). A row whose r is 0 (its sum of
// squares overflowed fp32) gets NaN: no finite gradient exists.
struct RmsNormBackwardArgs {
  const float* x = nullptr;
  const float* w = nullptr;
  const float* rstd = nullptr;
  const float* gy = nullptr;
  float* gx = nullptr;
  float* gw = nullptr;
  std::int64_t dim = 0;
  bool plusOne = false;
};

// The backward of fp32 y = act(gate) * up over [begin, end):
// ggate = gy up act'(gate), gup = gy act(gate).
struct GatedBackwardArgs {
  const float* gate = nullptr;
  const float* up = nullptr;
  const float* gy = nullptr;
  float* ggate = nullptr;
  float* gup = nullptr;
  bool gelu = false;
};

// Cross-entropy over rows [begin, end) of fp32 logits (rows, vocab),
// contiguous. Forward (crossEntropyF32): lse[r] = log sum_j exp(x[r][j]) and
// loss[r] = lse[r] - x[r][target[r]]; a row holding NaN or an infinity gets
// NaN for both. Backward (crossEntropyBackwardF32): grad[r][j] = scale *
// (exp(x[r][j] - lse[r]) - [j == target[r]]), NaN across a row whose lse is NaN.
struct CrossEntropyArgs {
  const float* logits = nullptr;
  const std::int64_t* targets = nullptr;  // each in [0, vocab)
  float* lse = nullptr;                   // forward: written; backward: read
  float* loss = nullptr;                  // forward
  float* grad = nullptr;                  // backward
  float scale = 0.0f;                     // backward: the loss's gradient over the rows
  std::int64_t vocab = 0;
};

// The softmax rows of causal self-attention over one block of queries (fp32,
// row r at s + r * ld, ld a multiple of 16 at least width: the columns past
// width are scratch): row r holds query t0 + r's scores against keys
// [0, width) and sees keys [0, t0 + r], `first` = t0 + 1 of them for row 0.
// Forward (attentionSoftmaxF32): s <- softmax(scale * s) over the seen keys
// and 0 past them; lse[r] = log sum exp(scale * s) over the seen keys.
// Backward (attentionSoftmaxBackwardF32), with di = dOut[r] . out[r] (dv
// wide) and p = exp(scale * s - lse[r]) on the seen keys, 0 past them:
// s <- p, dp <- p (dp - di). A row holding NaN or an infinity gets NaN
// throughout, and NaN for its lse.
struct AttentionRowsArgs {
  float* s = nullptr;
  float* dp = nullptr;          // backward: dO V^T in, the scores' gradient (before the scale) out
  const float* dOut = nullptr;  // backward: the rows' output gradients, row stride ldDOut
  const float* out = nullptr;   // backward: the rows' outputs, row stride ldOut
  float* lse = nullptr;         // forward: written; backward: read
  std::int64_t ld = 0, width = 0, first = 1, dv = 0, ldDOut = 0, ldOut = 0;
  float scale = 1.0f;
};

// y[i] = T(act(gate[i])) * up[i] for i in [begin, end), act SiLU or (gelu)
// tanh-approximated GELU, computed in fp32: the gated MLP's activation.
template <class T>
struct GatedArgs {
  const T* gate = nullptr;
  const T* up = nullptr;
  T* y = nullptr;
  bool gelu = false;
};

// Rotary embedding of rows r in [begin, end) of a (batch, heads, seq, dim)
// tensor (row r = (b * heads + h) * seq + t, or (b * seq + t) * heads + h
// where x's heads are closer in memory than its positions; x and y element
// strides per dim, the last dim contiguous): y = x cos[t] + rotate_half(x) sin[t] on the
// first rd dims, each product rounded to T before the sum; the rest copied.
template <class T>
struct RopeArgs {
  const T* x = nullptr;
  T* y = nullptr;
  const T* cos = nullptr;  // (seq, rd)
  const T* sin = nullptr;  // (seq, rd)
  std::int64_t heads = 0, seq = 0, dim = 0, rd = 0;
  std::int64_t xsb = 0, xsh = 0, xst = 0, ysb = 0, ysh = 0, yst = 0;
};

using DecodeItemsF32 = void (*)(const DecodeKernelArgs<float>&, std::int64_t begin, std::int64_t end);
using DecodeItemsF64 = void (*)(const DecodeKernelArgs<double>&, std::int64_t begin, std::int64_t end);
using LinearOutsF32 = void (*)(const LinearKernelArgs<float>&, std::int64_t outBegin, std::int64_t outEnd);
// bf16 values as their bits; sums in fp32, each output rounded once.
using LinearOutsBF16 = void (*)(const LinearKernelArgs<std::uint16_t>&, std::int64_t outBegin, std::int64_t outEnd);

using RmsNormF32 = void (*)(const RmsNormArgs<float>&, std::int64_t begin, std::int64_t end);
using RmsNormBF16 = void (*)(const RmsNormArgs<std::uint16_t>&, std::int64_t begin, std::int64_t end);
using GatedF32 = void (*)(const GatedArgs<float>&, std::int64_t begin, std::int64_t end);
using GatedBF16 = void (*)(const GatedArgs<std::uint16_t>&, std::int64_t begin, std::int64_t end);
using RopeF32 = void (*)(const RopeArgs<float>&, std::int64_t begin, std::int64_t end);
using RopeBF16 = void (*)(const RopeArgs<std::uint16_t>&, std::int64_t begin, std::int64_t end);
using RmsNormBackwardF32 = void (*)(const RmsNormBackwardArgs&, std::int64_t begin, std::int64_t end);
using GatedBackwardF32 = void (*)(const GatedBackwardArgs&, std::int64_t begin, std::int64_t end);
using CrossEntropyF32 = void (*)(const CrossEntropyArgs&, std::int64_t begin, std::int64_t end);
using AttentionRowsF32 = void (*)(const AttentionRowsArgs&, std::int64_t begin, std::int64_t end);

// One build of the kernels: its instruction set, entry points, and whether the running CPU has that set.
struct CpuKernels {
  const char* isa;  // "avx512bf16", "avx512", "avx2", "baseline"
  DecodeItemsF32 decodeF32;
  DecodeItemsF64 decodeF64;
  LinearOutsF32 linearF32;
  LinearOutsBF16 linearBF16;
  RmsNormF32 rmsNormF32;
  RmsNormBF16 rmsNormBF16;
  GatedF32 gatedF32;
  GatedBF16 gatedBF16;
  RopeF32 ropeF32;
  RopeBF16 ropeBF16;
  RmsNormBackwardF32 rmsNormBackwardF32;
  GatedBackwardF32 gatedBackwardF32;
  CrossEntropyF32 crossEntropyF32, crossEntropyBackwardF32;
  AttentionRowsF32 attentionSoftmaxF32, attentionSoftmaxBackwardF32;
  bool supported;
};

// Every build, widest first.
const std::vector<CpuKernels>& cpuKernelBuilds();
// The widest supported build, or the one named `isa` if the CPU supports it
// (else the widest supported, so a name never selects code the CPU cannot run).
const CpuKernels& cpuKernels(const char* isa = nullptr);

}  // namespace latentlab::kernels
