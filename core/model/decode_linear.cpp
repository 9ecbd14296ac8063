// Routing between the small-row CPU kernel and LibTorch's linear.
#include "model/decode_linear.h"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "model/decode_attention.h"
#include "model/decode_threads.h"
#include "model/kernels/cpu_kernels.h"

namespace latentlab {

namespace {

bool needsGrad(const torch::Tensor& t) {
  return t.defined() && t.requires_grad();
}

torch::Tensor rowsOf(const torch::Tensor& x) {
  auto x2 = x.reshape({x.numel() / x.size(-1), x.size(-1)});
  return x2.stride(1) == 1 ? x2 : x2.contiguous();
}

// The kernel's dtypes: fp32, or bf16 throughout (x, weight, bias).
bool kernelDtype(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  const auto t = x.scalar_type();
  return (t == torch::kFloat32 || t == torch::kBFloat16) && w.scalar_type() == t &&
         (!b.defined() || b.scalar_type() == t);
}

bool kernelApplies(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (!fusedDecodeEnabled() || x.dim() < 1 || w.dim() != 2 || x.numel() == 0) return false;
  if (at::autocast::is_autocast_enabled(at::kCPU)) return false;  // autocast picks the dtype: LibTorch's linear
  if (!x.device().is_cpu() || !w.device().is_cpu() || (b.defined() && !b.device().is_cpu())) return false;
  if (!kernelDtype(x, w, b)) return false;
  if (b.defined() && (b.dim() != 1 || b.size(0) != w.size(0))) return false;
  if (x.size(-1) != w.size(1) || x.numel() / x.size(-1) > kDecodeLinearMaxRows) return false;
  return !(torch::GradMode::is_enabled() && (needsGrad(x) || needsGrad(w) || needsGrad(b)));
}

// The kernel's element type for a tensor's dtype: fp32, or bf16 as its bits.
template <class T>
const T* dataOf(const torch::Tensor& t) {
  if constexpr (std::is_same_v<T, float>) {
    return t.data_ptr<float>();
  } else {
    return reinterpret_cast<const T*>(t.data_ptr<at::BFloat16>());
  }
}

// One layer's kernel arguments for rows x2 (rows, dim), writing a new (rows, outs) output.
template <class T>
struct KernelLayer {
  kernels::LinearKernelArgs<T> args;
  torch::Tensor w, b, y;  // held for the call
};

template <class T>
KernelLayer<T> kernelLayer(const torch::Tensor& x2, const torch::Tensor& weight, const torch::Tensor& bias) {
  KernelLayer<T> l;
  l.w = weight.stride(1) == 1 ? weight : weight.contiguous();
  l.b = bias.defined() ? bias.contiguous() : bias;
  const std::int64_t rows = x2.size(0), outs = weight.size(0);
  l.y = torch::empty({rows, outs}, x2.options());
  auto& a = l.args;
  a.x = dataOf<T>(x2);
  a.xs = x2.stride(0);
  a.w = dataOf<T>(l.w);
  a.ws = l.w.stride(0);
  a.bias = l.b.defined() ? dataOf<T>(l.b) : nullptr;
  a.y = const_cast<T*>(dataOf<T>(l.y));
  a.ys = outs;
  a.rows = rows;
  a.outs = outs;
  a.dim = x2.size(1);
  return l;
}

// Runs the kernel over every layer's outputs, 16 at a time, as one parallel
// range: a thread's share reads at least 512 KiB of weights (about 40
// microseconds of one core's reading; the workers of model/decode_threads.h
// are still awake between the calls of a step, so handing it out costs far
// less; at 2 MiB, the bf16 step of a SmolLM-135M shape ran most of its
// layers on one thread, 35 against 52 tokens/s).
template <class T>
void runKernel(std::vector<KernelLayer<T>>& layers) {
  const auto kernel = [] {
    if constexpr (std::is_same_v<T, float>) {
      return kernels::cpuKernels().linearF32;
    } else {
      return kernels::cpuKernels().linearBF16;
    }
  }();
  std::vector<std::int64_t> firstBlock;  // per layer, its first block in the joint range
  std::int64_t blocks = 0;
  for (const auto& l : layers) {
    firstBlock.push_back(blocks);
    blocks += (l.args.outs + 15) / 16;
  }
  const std::int64_t blockBytes = 16 * layers.front().args.dim * static_cast<std::int64_t>(sizeof(T));
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{512} << 10) / blockBytes);
  decodeParallelFor(blocks, grain, [&](std::int64_t b0, std::int64_t b1) {
    for (std::size_t i = 0; i < layers.size() && b0 < b1; ++i) {
      const std::int64_t lo = firstBlock[i], hi = lo + (layers[i].args.outs + 15) / 16;
      if (b0 >= hi) continue;
      const std::int64_t end = std::min(b1, hi);
      kernel(layers[i].args, (b0 - lo) * 16, std::min(layers[i].args.outs, (end - lo) * 16));
      b0 = end;
    }
  });
}

template <class T>
std::vector<torch::Tensor> runLayers(const torch::Tensor& x,
                                     const std::vector<std::pair<torch::Tensor, torch::Tensor>>& layers) {
  const auto x2 = rowsOf(x);
  std::vector<KernelLayer<T>> args;
  for (const auto& [w, b] : layers) args.push_back(kernelLayer<T>(x2, w, b));
  runKernel(args);
  std::vector<torch::Tensor> out;
  for (const auto& l : args) {
    auto sizes = x.sizes().vec();
    sizes.back() = l.args.outs;
    out.push_back(l.y.view(sizes));
  }
  return out;
}

}  // namespace

torch::Tensor linearForward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  return linearForwardMany(x, {{weight, bias}}).front();
}

std::vector<torch::Tensor> linearForwardMany(const torch::Tensor& x,
                                             const std::vector<std::pair<torch::Tensor, torch::Tensor>>& layers) {
  bool kernel = !layers.empty();
  for (const auto& [w, b] : layers) kernel = kernel && kernelApplies(x, w, b);
  if (!kernel) {
    std::vector<torch::Tensor> out;
    for (const auto& [w, b] : layers) out.push_back(at::linear(x, w, b));
    return out;
  }
  return x.scalar_type() == torch::kFloat32 ? runLayers<float>(x, layers) : runLayers<std::uint16_t>(x, layers);
}

std::vector<torch::Tensor> linearForwardMany(const torch::Tensor& x, const std::vector<torch::nn::Linear>& layers) {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> wb;
  for (const auto& l : layers) wb.emplace_back(l->weight, l->bias);
  return linearForwardMany(x, wb);
}

const std::vector<torch::Tensor>& DerivedWeights::get(const std::vector<torch::Tensor>& sources, const Build& build) {
  std::vector<Key> key;
  key.reserve(sources.size());
  for (const auto& t : sources) {
    key.push_back(t.defined() ? Key{t.unsafeGetTensorImpl(), t.data_ptr(), t._version()} : Key{nullptr, nullptr, 0});
  }
  if (key != m_key || m_tensors.empty()) {
    torch::NoGradGuard noGrad;
    m_tensors = build();
    m_key = std::move(key);
    m_sources = sources;
  }
  return m_tensors;
}

void DerivedWeights::clear() {
  m_key.clear();
  m_sources.clear();
  m_tensors.clear();
}

}  // namespace latentlab
