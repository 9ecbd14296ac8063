// Causal self-attention on the CPU (see fused_attention.h).
#include "model/fused_attention.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "model/fused_ops.h"
#include "model/kernels/cpu_kernels.h"

namespace latentlab {

namespace {

// Queries per block. A block's scores (64 x T floats, 64 KiB at T 256) stay
// in the second-level cache for the two products that read them; at T 256
// the four blocks compute 10 of the score matrix's 16 tiles of 64 x 64.
constexpr std::int64_t kBlock = 64;

// The Fortran BLAS sgemm inside LibTorch (the one its own matrix products
// call), found at run time: column-major, 32-bit sizes.
using Sgemm = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                       const int*, const float*, const int*, const float*, float*, const int*);

Sgemm blasSgemm() {
  static const Sgemm fn = [] {
    Sgemm f = nullptr;
    void* sym = dlsym(RTLD_DEFAULT, "sgemm_");
    static_assert(sizeof(sym) == sizeof(f));
    std::memcpy(&f, &sym, sizeof(f));
    return f;
  }();
  return fn;
}

// Row-major C (m x n, row stride ldc) = alpha op(A) op(B) + beta C, with op(A)
// m x k and op(B) k x n; A and B row-major with row strides lda and ldb,
// stored k x m (ta) and n x k (tb) where transposed. Column-major BLAS
// computes C^T = op(B)^T op(A)^T.
void gemm(Sgemm f, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  const char opB = tb ? 'T' : 'N', opA = ta ? 'T' : 'N';
  const int M = static_cast<int>(n), N = static_cast<int>(m), K = static_cast<int>(k);
  const int la = static_cast<int>(ldb), lb = static_cast<int>(lda), lc = static_cast<int>(ldc);
  f(&opB, &opA, &M, &N, &K, &alpha, b, &la, a, &lb, &beta, c, &lc);
}

// A (B, H, T, d) fp32 tensor's rows: row (b, h, t) at data + b sb + h sh + t st.
struct Rows {
  float* data;
  std::int64_t sb, sh, st;
  float* at(std::int64_t b, std::int64_t h, std::int64_t t) const { return data + b * sb + h * sh + t * st; }
};

// (A single position's row stride is any number: the BLAS wants one of at
// least the row's length.)
Rows rowsOf(const torch::Tensor& t) {
  return {t.data_ptr<float>(), t.stride(0), t.stride(1), t.size(2) == 1 ? t.size(3) : t.stride(2)};
}

// t itself where its rows are BLAS rows (the last dim contiguous, rows apart
// by at least their length), else a contiguous copy.
torch::Tensor blasRows(const torch::Tensor& t) {
  return t.stride(3) == 1 && (t.size(2) == 1 || t.stride(2) >= t.size(3)) ? t : t.contiguous();
}

// (B, H, T, d) laid out as a projection's output viewed as heads, (B, T, H, d)
// in memory: the reshape back to (B, T, H d) is a view.
torch::Tensor headsInsidePositions(std::int64_t B, std::int64_t H, std::int64_t T, std::int64_t d,
                                   const torch::TensorOptions& options) {
  return at::empty_strided({B, H, T, d}, {T * H * d, d, H * d, 1}, options);
}

// A score row's stride: the row's length rounded up to whole 16-lane vectors
// (the softmax kernels' scratch room).
std::int64_t padded(std::int64_t width) {
  return (width + 15) / 16 * 16;
}

// Items of about this many multiply-adds go to a thread at least.
constexpr std::int64_t kGrainMacs = std::int64_t{1} << 18;

struct Shape {
  std::int64_t B, H, Hk, G, T, D, Dv, blocks;
  explicit Shape(const torch::Tensor& q, const torch::Tensor& v)
      : B(q.size(0)),
        H(q.size(1)),
        Hk(v.size(1)),
        G(q.size(1) / v.size(1)),
        T(q.size(2)),
        D(q.size(3)),
        Dv(v.size(3)),
        blocks((q.size(2) + kBlock - 1) / kBlock) {}
};

// Rows t0 .. t0 + n - 1 of heads h0 .. h0 + G - 1 (each d wide) to and from
// a buffer, head by head: buffer row g n + r is head h0 + g's row t0 + r.
void gatherRows(const Rows& x, std::int64_t b, std::int64_t h0, std::int64_t G, std::int64_t t0, std::int64_t n,
                std::int64_t d, float* buf) {
  for (std::int64_t g = 0; g < G; ++g)
    for (std::int64_t r = 0; r < n; ++r)
      std::memcpy(buf + (g * n + r) * d, x.at(b, h0 + g, t0 + r), static_cast<std::size_t>(d) * sizeof(float));
}

void scatterRows(const float* buf, const Rows& x, std::int64_t b, std::int64_t h0, std::int64_t G, std::int64_t t0,
                 std::int64_t n, std::int64_t d) {
  for (std::int64_t g = 0; g < G; ++g)
    for (std::int64_t r = 0; r < n; ++r)
      std::memcpy(x.at(b, h0 + g, t0 + r), buf + (g * n + r) * d, static_cast<std::size_t>(d) * sizeof(float));
}

// Forward, per (batch, key head, query block): the scores of the block's
// queries of every head reading that key head (one product of G n rows)
// against the keys up to the block's last query, their softmax rows, and
// each head's output rows.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                     torch::Tensor& lse) {
  const Shape s(q, v);
  auto out = headsInsidePositions(s.B, s.H, s.T, s.Dv, q.options());
  lse = torch::empty({s.B, s.H, s.T}, q.options());
  const Rows Q = rowsOf(q), K = rowsOf(k), V = rowsOf(v), O = rowsOf(out);
  float* L = lse.data_ptr<float>();
  const auto softmaxRows = kernels::cpuKernels().attentionSoftmaxF32;
  const Sgemm f = blasSgemm();
  const std::int64_t rowsMax = std::min(kBlock, s.T), perItem = s.G * rowsMax * s.T * (s.D + s.Dv) / 2;
  at::parallel_for(
      0, s.B * s.Hk * s.blocks, std::max<std::int64_t>(1, kGrainMacs / perItem), [&](std::int64_t i0, std::int64_t i1) {
        std::vector<float> scores(static_cast<std::size_t>(s.G * rowsMax * padded(s.T)));
        std::vector<float> queries(s.G > 1 ? static_cast<std::size_t>(s.G * rowsMax * s.D) : 0);
        for (std::int64_t i = i0; i < i1; ++i) {
          const std::int64_t bk = i / s.blocks, j = i % s.blocks, b = bk / s.Hk, kh = bk % s.Hk, h0 = kh * s.G;
          const std::int64_t t0 = j * kBlock, n = std::min(kBlock, s.T - t0), width = t0 + n, ld = padded(width);
          const float* qj = Q.at(b, h0, t0);
          std::int64_t ldq = Q.st;
          if (s.G > 1) {
            gatherRows(Q, b, h0, s.G, t0, n, s.D, queries.data());
            qj = queries.data();
            ldq = s.D;
          }
          gemm(f, false, true, s.G * n, width, s.D, 1.0f, qj, ldq, K.at(b, kh, 0), K.st, 0.0f, scores.data(), ld);
          for (std::int64_t g = 0; g < s.G; ++g) {
            float* p = scores.data() + g * n * ld;
            kernels::AttentionRowsArgs a;
            a.s = p;
            a.lse = L + (b * s.H + h0 + g) * s.T + t0;
            a.ld = ld;
            a.width = width;
            a.first = t0 + 1;
            a.scale = static_cast<float>(scale);
            softmaxRows(a, 0, n);
            gemm(f, false, false, n, s.Dv, width, 1.0f, p, ld, V.at(b, kh, 0), V.st, 0.0f, O.at(b, h0 + g, t0), O.st);
          }
        }
      });
  return out;
}

struct Gradients {
  torch::Tensor q, k, v;
};

// Backward, per (batch, key head): the query blocks from the last (which
// spans every key, so its products initialise the key and value gradients)
// to the first, each recomputing its probabilities from the saved
// log-sum-exp; the G heads reading the key head in each product, so their
// key and value gradients sum inside it.
Gradients attendBackward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& gradOut,
                         double scale) {
  const Shape s(q, v);
  const auto dOut = blasRows(gradOut);
  const auto opts = q.options();
  Gradients g{headsInsidePositions(s.B, s.H, s.T, s.D, opts), headsInsidePositions(s.B, s.Hk, s.T, s.D, opts),
              headsInsidePositions(s.B, s.Hk, s.T, s.Dv, opts)};
  const Rows Q = rowsOf(q), K = rowsOf(k), V = rowsOf(v), O = rowsOf(out), DO = rowsOf(dOut), DQ = rowsOf(g.q);
  const Rows DK = rowsOf(g.k), DV = rowsOf(g.v);
  const float* L = lse.data_ptr<float>();
  const auto backwardRows = kernels::cpuKernels().attentionSoftmaxBackwardF32;
  const Sgemm f = blasSgemm();
  const float sc = static_cast<float>(scale);
  const std::int64_t rowsMax = std::min(kBlock, s.T), perItem = s.G * s.T * s.T * (s.D + s.Dv) * 5 / 4;
  at::parallel_for(
      0, s.B * s.Hk, std::max<std::int64_t>(1, kGrainMacs / perItem), [&](std::int64_t i0, std::int64_t i1) {
        const auto rows = static_cast<std::size_t>(s.G * rowsMax);
        std::vector<float> probs(rows * padded(s.T)), dScores(rows * padded(s.T));
        std::vector<float> queries(rows * s.D), dOutRows(rows * s.Dv), dQueries(rows * s.D);
        for (std::int64_t bk = i0; bk < i1; ++bk) {
          const std::int64_t b = bk / s.Hk, kh = bk % s.Hk, h0 = kh * s.G;
          for (std::int64_t j = s.blocks - 1; j >= 0; --j) {
            const std::int64_t t0 = j * kBlock, n = std::min(kBlock, s.T - t0), width = t0 + n, m = s.G * n;
            const std::int64_t ld = padded(width);
            gatherRows(Q, b, h0, s.G, t0, n, s.D, queries.data());
            gatherRows(DO, b, h0, s.G, t0, n, s.Dv, dOutRows.data());
            gemm(f, false, true, m, width, s.D, 1.0f, queries.data(), s.D, K.at(b, kh, 0), K.st, 0.0f, probs.data(),
                 ld);
            gemm(f, false, true, m, width, s.Dv, 1.0f, dOutRows.data(), s.Dv, V.at(b, kh, 0), V.st, 0.0f,
                 dScores.data(), ld);
            for (std::int64_t gi = 0; gi < s.G; ++gi) {
              kernels::AttentionRowsArgs a;
              a.s = probs.data() + gi * n * ld;
              a.dp = dScores.data() + gi * n * ld;
              a.dOut = dOutRows.data() + gi * n * s.Dv;
              a.ldDOut = s.Dv;
              a.out = O.at(b, h0 + gi, t0);
              a.ldOut = O.st;
              a.dv = s.Dv;
              a.lse = const_cast<float*>(L + (b * s.H + h0 + gi) * s.T + t0);
              a.ld = ld;
              a.width = width;
              a.first = t0 + 1;
              a.scale = sc;
              backwardRows(a, 0, n);
            }
            const float beta = j == s.blocks - 1 ? 0.0f : 1.0f;
            gemm(f, false, false, m, s.D, width, sc, dScores.data(), ld, K.at(b, kh, 0), K.st, 0.0f, dQueries.data(),
                 s.D);
            scatterRows(dQueries.data(), DQ, b, h0, s.G, t0, n, s.D);
            gemm(f, true, false, width, s.D, m, sc, dScores.data(), ld, queries.data(), s.D, beta, DK.at(b, kh, 0),
                 DK.st);
            gemm(f, true, false, width, s.Dv, m, 1.0f, probs.data(), ld, dOutRows.data(), s.Dv, beta, DV.at(b, kh, 0),
                 DV.st);
          }
        }
      });
  return g;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct CausalAttentionFn : torch::autograd::Function<CausalAttentionFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double scale) {
    torch::Tensor lse;
    auto out = attend(q, k, v, scale, lse);
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    RECORD_FUNCTION("latentlab::fused_causal_attention_backward", std::vector<c10::IValue>());
    const auto saved = ctx->get_saved_variables();
    const auto g =
        attendBackward(saved[0], saved[1], saved[2], saved[3], saved[4], grads[0], ctx->saved_data["scale"].toDouble());
    return {g.q, g.k, g.v, torch::Tensor()};
  }
};

bool applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  if (!fp32KernelsApply({&q, &k, &v}) || blasSgemm() == nullptr) return false;
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  const auto T = q.size(2);
  if (k.size(2) != T || v.size(2) != T || k.size(0) != q.size(0) || v.size(0) != q.size(0)) return false;
  if (k.size(1) != v.size(1) || q.size(1) % k.size(1) != 0 || k.size(3) != q.size(3)) return false;
  // The BLAS's 32-bit sizes: every row stride and product dimension fits.
  constexpr auto kMax = std::int64_t{std::numeric_limits<int>::max()};
  for (const auto* t : {&q, &k, &v})
    if (t->stride(2) > kMax || t->size(3) > kMax) return false;
  return T * q.size(1) * std::max(q.size(3), v.size(3)) <= kMax;
}

}  // namespace

torch::Tensor fusedCausalAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   double scale) {
  if (!applies(q, k, v)) return {};
  RECORD_FUNCTION("latentlab::fused_causal_attention", std::vector<c10::IValue>());
  const auto qc = blasRows(q), kc = blasRows(k), vc = blasRows(v);
  if (torch::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad()))
    return CausalAttentionFn::apply(qc, kc, vc, scale);
  torch::Tensor lse;
  return attend(qc, kc, vc, scale, lse);
}

}  // namespace latentlab
