// Picks the build of the CPU kernels for the running CPU: AVX-512, AVX2 or
// the baseline (x86-64), the baseline alone elsewhere.
#include <cstring>

#include "model/kernels/cpu_kernels.h"

namespace latentlab::kernels {

#define LATENTLAB_DECLARE_KERNEL(isa)                                                                  \
  namespace isa {                                                                                      \
  void decodeItemsF32(const DecodeKernelArgs<float>& a, std::int64_t begin, std::int64_t end);         \
  void decodeItemsF64(const DecodeKernelArgs<double>& a, std::int64_t begin, std::int64_t end);        \
  void linearOutsF32(const LinearKernelArgs<float>& a, std::int64_t begin, std::int64_t end);          \
  void linearOutsBF16(const LinearKernelArgs<std::uint16_t>& a, std::int64_t begin, std::int64_t end); \
  void rmsNormF32(const RmsNormArgs<float>& a, std::int64_t begin, std::int64_t end);                  \
  void rmsNormBF16(const RmsNormArgs<std::uint16_t>& a, std::int64_t begin, std::int64_t end);         \
  void gatedF32(const GatedArgs<float>& a, std::int64_t begin, std::int64_t end);                      \
  void gatedBF16(const GatedArgs<std::uint16_t>& a, std::int64_t begin, std::int64_t end);             \
  void ropeF32(const RopeArgs<float>& a, std::int64_t begin, std::int64_t end);                        \
  void ropeBF16(const RopeArgs<std::uint16_t>& a, std::int64_t begin, std::int64_t end);               \
  void rmsNormBackwardF32(const RmsNormBackwardArgs& a, std::int64_t begin, std::int64_t end);         \
  void gatedBackwardF32(const GatedBackwardArgs& a, std::int64_t begin, std::int64_t end);             \
  void crossEntropyF32(const CrossEntropyArgs& a, std::int64_t begin, std::int64_t end);               \
  void crossEntropyBackwardF32(const CrossEntropyArgs& a, std::int64_t begin, std::int64_t end);       \
  void attentionSoftmaxF32(const AttentionRowsArgs& a, std::int64_t begin, std::int64_t end);          \
  void attentionSoftmaxBackwardF32(const AttentionRowsArgs& a, std::int64_t begin, std::int64_t end);  \
  }
LATENTLAB_DECLARE_KERNEL(isa_base)
#if LATENTLAB_KERNEL_X86
LATENTLAB_DECLARE_KERNEL(isa_avx2)
LATENTLAB_DECLARE_KERNEL(isa_avx512)
namespace isa_avx512bf16 {
void linearOutsF32(const LinearKernelArgs<float>& a, std::int64_t begin, std::int64_t end);
void linearOutsBF16(const LinearKernelArgs<std::uint16_t>& a, std::int64_t begin, std::int64_t end);
}  // namespace isa_avx512bf16
#endif
#undef LATENTLAB_DECLARE_KERNEL

const std::vector<CpuKernels>& cpuKernelBuilds() {
  static const std::vector<CpuKernels> variants = [] {
    std::vector<CpuKernels> v;
#if LATENTLAB_KERNEL_X86
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
    v.push_back({"avx512bf16", isa_avx512::decodeItemsF32, isa_avx512::decodeItemsF64, isa_avx512bf16::linearOutsF32,
                 isa_avx512bf16::linearOutsBF16, isa_avx512::rmsNormF32, isa_avx512::rmsNormBF16, isa_avx512::gatedF32,
                 isa_avx512::gatedBF16, isa_avx512::ropeF32, isa_avx512::ropeBF16, isa_avx512::rmsNormBackwardF32,
                 isa_avx512::gatedBackwardF32, isa_avx512::crossEntropyF32, isa_avx512::crossEntropyBackwardF32,
                 isa_avx512::attentionSoftmaxF32, isa_avx512::attentionSoftmaxBackwardF32, bf16});
    v.push_back({"avx512", isa_avx512::decodeItemsF32, isa_avx512::decodeItemsF64, isa_avx512::linearOutsF32,
                 isa_avx512::linearOutsBF16, isa_avx512::rmsNormF32, isa_avx512::rmsNormBF16, isa_avx512::gatedF32,
                 isa_avx512::gatedBF16, isa_avx512::ropeF32, isa_avx512::ropeBF16, isa_avx512::rmsNormBackwardF32,
                 isa_avx512::gatedBackwardF32, isa_avx512::crossEntropyF32, isa_avx512::crossEntropyBackwardF32,
                 isa_avx512::attentionSoftmaxF32, isa_avx512::attentionSoftmaxBackwardF32, avx512});
    v.push_back({"avx2", isa_avx2::decodeItemsF32, isa_avx2::decodeItemsF64, isa_avx2::linearOutsF32,
                 isa_avx2::linearOutsBF16, isa_avx2::rmsNormF32, isa_avx2::rmsNormBF16, isa_avx2::gatedF32,
                 isa_avx2::gatedBF16, isa_avx2::ropeF32, isa_avx2::ropeBF16, isa_avx2::rmsNormBackwardF32,
                 isa_avx2::gatedBackwardF32, isa_avx2::crossEntropyF32, isa_avx2::crossEntropyBackwardF32,
                 isa_avx2::attentionSoftmaxF32, isa_avx2::attentionSoftmaxBackwardF32, avx2});
#endif
    v.push_back({"baseline", isa_base::decodeItemsF32, isa_base::decodeItemsF64, isa_base::linearOutsF32,
                 isa_base::linearOutsBF16, isa_base::rmsNormF32, isa_base::rmsNormBF16, isa_base::gatedF32,
                 isa_base::gatedBF16, isa_base::ropeF32, isa_base::ropeBF16, isa_base::rmsNormBackwardF32,
                 isa_base::gatedBackwardF32, isa_base::crossEntropyF32, isa_base::crossEntropyBackwardF32,
                 isa_base::attentionSoftmaxF32, isa_base::attentionSoftmaxBackwardF32, true});
    return v;
  }();
  return variants;
}

const CpuKernels& cpuKernels(const char* isa) {
  for (const auto& v : cpuKernelBuilds()) {
    if (isa != nullptr ? std::strcmp(v.isa, isa) == 0 && v.supported : v.supported) return v;
  }
  return cpuKernelBuilds().back();
}

}  // namespace latentlab::kernels
