// Shape checks, work split and the combination of split partial softmaxes
// around the CPU decode kernel.
#include "model/decode_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "latentlab/error.h"
#include "model/decode_threads.h"
#include "model/kernels/cpu_kernels.h"

namespace latentlab {

namespace {

std::atomic<bool> g_enabled{true};

constexpr std::int64_t kTileKeys = 64;       // the kernel's tile: splits start on tile edges
constexpr std::int64_t kMinSplitKeys = 256;  // a split shorter than this costs more to combine than it saves
// Cache bytes a thread should read for its share to outweigh handing it out:
// a worker of model/decode_threads.h that has gone to sleep takes tens of
// microseconds to start, about what one core reads of 1 MiB.
constexpr std::int64_t kMinBytesPerTask = std::int64_t{1} << 20;

[[noreturn]] void badShape(const std::string& what) {
  throw Error(ErrorCode::Internal, "fused decode attention: " + what);
}

void expectDims(const torch::Tensor& t, const char* name) {
  if (t.dim() != 4) badShape(std::string(name) + " must be 4-D, got " + std::to_string(t.dim()) + "-D");
}

// The tensor itself when its last dim is contiguous, else a contiguous copy.
torch::Tensor unitLastStride(const torch::Tensor& t) {
  return t.stride(-1) == 1 ? t : t.contiguous();
}

template <class T>
kernels::Strided4<T> strided(const torch::Tensor& t) {
  return {t.data_ptr<T>(), t.stride(0), t.stride(1), t.stride(2)};
}

template <class T>
torch::Tensor run(const DecodeAttentionInputs& in, const torch::Tensor& q, const torch::Tensor& k,
                  const torch::Tensor& v, const torch::Tensor& qr, const torch::Tensor& kr) {
  const std::int64_t B = q.size(0), H = q.size(1), R = q.size(2), Tk = k.size(2), dv = v.size(3);
  // Enough work items for every thread, as long as each reads at least
  // kMinBytesPerTask of cache; no split shorter than kMinSplitKeys.
  const std::int64_t bytesPerKey =
      static_cast<std::int64_t>(sizeof(T)) *
      (q.size(3) + (v.data_ptr() == k.data_ptr() ? 0 : dv) + (qr.defined() ? qr.size(3) : 0));
  const std::int64_t cacheBytes = B * H * Tk * bytesPerKey;
  const std::int64_t threads = at::get_num_threads();
  const std::int64_t tasks = std::clamp<std::int64_t>(cacheBytes / kMinBytesPerTask, 1, threads);
  std::int64_t splits = in.splits;
  if (splits <= 0) {
    const std::int64_t want = tasks > 1 ? 4 * tasks : 1;
    splits = std::clamp<std::int64_t>((want + B * H - 1) / (B * H), 1, std::max<std::int64_t>(1, Tk / kMinSplitKeys));
  }
  std::int64_t splitLen = (Tk + splits - 1) / splits;
  splitLen = (splitLen + kTileKeys - 1) / kTileKeys * kTileKeys;
  splits = (Tk + splitLen - 1) / splitLen;

  const auto opts = q.options();
  auto acc = torch::empty({B, H, splits, R, dv}, opts);
  auto mx = torch::empty({B, H, splits, R}, opts);
  auto sm = torch::empty({B, H, splits, R}, opts);

  kernels::DecodeKernelArgs<T> a;
  a.q = strided<T>(q);
  a.k = strided<T>(k);
  a.v = strided<T>(v);
  if (qr.defined()) {
    a.qRope = strided<T>(qr);
    a.kRope = strided<T>(kr);
    a.dRope = qr.size(3);
    a.ropeRows = qr.size(2);
  }
  a.batch = B;
  a.heads = H;
  a.rows = R;
  a.keys = Tk;
  a.queries = in.queries;
  a.dk = q.size(3);
  a.dv = dv;
  a.splits = splits;
  a.splitLen = splitLen;
  a.scale = static_cast<T>(in.scale);
  a.acc = acc.data_ptr<T>();
  a.max = mx.data_ptr<T>();
  a.sum = sm.data_ptr<T>();
  const auto& kernel = kernels::cpuKernels(in.isa);
  const auto items = B * H * splits;
  // One task when the cache is small: it then runs on this thread.
  const std::int64_t grain = tasks > 1 ? 1 : items;
  decodeParallelFor(items, grain, [&](std::int64_t begin, std::int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      kernel.decodeF32(a, begin, end);
    } else {
      kernel.decodeF64(a, begin, end);
    }
  });

  // Partial softmaxes over disjoint key ranges, rescaled to their common max
  // and normalised; a plain loop (a few rows), not a chain of tensor ops that
  // would each cost a dispatch per layer and step. Every row sees key 0 in
  // split 0, so the common max is finite; splits past a row's query weigh 0.
  auto out = torch::empty({B, H, R, dv}, opts);
  const T* accP = a.acc;
  const T* mxP = a.max;
  const T* smP = a.sum;
  T* outP = out.data_ptr<T>();
  for (std::int64_t bh = 0; bh < B * H; ++bh) {
    for (std::int64_t r = 0; r < R; ++r) {
      const auto state = [&](std::int64_t s) { return (bh * splits + s) * R + r; };
      T top = mxP[state(0)];
      for (std::int64_t s = 1; s < splits; ++s) top = std::max(top, mxP[state(s)]);
      T* o = outP + (bh * R + r) * dv;
      std::fill(o, o + dv, T(0));
      T den = 0;
      for (std::int64_t s = 0; s < splits; ++s) {
        const T w = splits == 1 ? T(1) : std::exp(mxP[state(s)] - top);
        if (w == T(0)) continue;
        den += smP[state(s)] * w;
        const T* part = accP + state(s) * dv;
        for (std::int64_t c = 0; c < dv; ++c) o[c] += part[c] * w;
      }
      const T inv = T(1) / den;
      for (std::int64_t c = 0; c < dv; ++c) o[c] *= inv;
    }
  }
  return out;
}

}  // namespace

void setFusedDecodeEnabled(bool enabled) {
  g_enabled.store(enabled);
}
bool fusedDecodeEnabled() {
  return g_enabled.load();
}
std::string fusedDecodeIsa() {
  return kernels::cpuKernels().isa;
}

bool fusedDecodeApplies(const torch::Tensor& q, const torch::Tensor& k, std::int64_t queries) {
  if (!g_enabled.load() || !q.device().is_cpu() || !k.device().is_cpu()) return false;
  if (queries < 1 || queries > kFusedDecodeMaxQueries || k.size(-2) < queries) return false;
  const auto type = q.scalar_type();
  if ((type != torch::kFloat32 && type != torch::kFloat64) || k.scalar_type() != type) return false;
  return !(torch::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad()));
}

torch::Tensor fusedDecodeAttention(const DecodeAttentionInputs& in) {
  expectDims(in.q, "q");
  expectDims(in.k, "k");
  expectDims(in.v, "v");
  const std::int64_t B = in.q.size(0), H = in.q.size(1), R = in.q.size(2), Tk = in.k.size(2);
  if (in.k.size(0) != B || in.v.size(0) != B || in.k.size(1) != H || in.v.size(1) != H)
    badShape("q, k and v must share batch and head dims");
  if (in.k.size(3) != in.q.size(3)) badShape("q and k differ in their last dim");
  if (in.v.size(2) != Tk) badShape("k and v differ in length");
  if (in.queries < 1 || R % in.queries != 0 || Tk < in.queries)
    badShape("rows per head must be a multiple of queries, and the cache at least that long");
  const auto type = in.q.scalar_type();
  if (type != torch::kFloat32 && type != torch::kFloat64) badShape("only fp32 and fp64 are fused");
  if (in.qRope.defined() != in.kRope.defined()) badShape("qRope and kRope come together");
  torch::Tensor qr, kr;
  if (in.qRope.defined()) {
    expectDims(in.qRope, "qRope");
    expectDims(in.kRope, "kRope");
    if (in.qRope.size(1) * in.qRope.size(2) != H * R) badShape("qRope must hold one row per query row");
    if (in.kRope.size(1) != in.qRope.size(1) || in.kRope.size(2) != Tk || in.kRope.size(3) != in.qRope.size(3) ||
        in.qRope.size(0) != B || in.kRope.size(0) != B)
      badShape("kRope must be (B, Hr, Tk, dr) for qRope (B, Hr, Rr, dr)");
    qr = in.qRope.contiguous();
    kr = unitLastStride(in.kRope);
  }
  for (const auto* t : {&in.k, &in.v, &in.qRope, &in.kRope}) {
    if (t->defined() && (t->scalar_type() != type || !t->device().is_cpu()))
      badShape("all inputs must be CPU tensors of one dtype");
  }
  const auto q = in.q.contiguous(), k = unitLastStride(in.k), v = unitLastStride(in.v);
  return type == torch::kFloat32 ? run<float>(in, q, k, v, qr, kr) : run<double>(in, q, k, v, qr, kr);
}

}  // namespace latentlab
