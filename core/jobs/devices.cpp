// Devices LibTorch can use, and the LibTorch version in use. CUDA names and
// memory come from the CUDA runtime LibTorch already loaded (looked up with
// dlopen, so this builds without CUDA headers).
#include <torch/torch.h>

#include <dlfcn.h>

#include <fstream>
#include <string>
#include <utility>

#include "latentlab/engine.h"

namespace latentlab {

namespace {

struct CudaRuntime {
  using SetDevice = int (*)(int);
  using MemGetInfo = int (*)(std::size_t*, std::size_t*);
  using GetProperties = int (*)(void*, int);
  SetDevice setDevice = nullptr;
  MemGetInfo memGetInfo = nullptr;
  GetProperties getProperties = nullptr;

  CudaRuntime() {
    void* h = nullptr;
    for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
      h = ::dlopen(name, RTLD_NOW | RTLD_NOLOAD);
      if (h != nullptr) break;
    }
    if (h == nullptr) return;
    setDevice = reinterpret_cast<SetDevice>(::dlsym(h, "cudaSetDevice"));
    memGetInfo = reinterpret_cast<MemGetInfo>(::dlsym(h, "cudaMemGetInfo"));
    getProperties = reinterpret_cast<GetProperties>(::dlsym(h, "cudaGetDeviceProperties_v2"));
    if (getProperties == nullptr)
      getProperties = reinterpret_cast<GetProperties>(::dlsym(h, "cudaGetDeviceProperties"));
  }
};

// MemTotal and MemAvailable of /proc/meminfo in bytes (0 where absent).
std::pair<std::uint64_t, std::uint64_t> hostMemory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0, total = 0, available = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") total = kib * 1024;
    if (key == "MemAvailable:") available = kib * 1024;
  }
  return {total, available};
}

}  // namespace

std::vector<DeviceInfo> listDevices() {
  std::vector<DeviceInfo> out;
  const auto [total, available] = hostMemory();
  out.push_back({"cpu", "CPU (" + std::to_string(at::get_num_threads()) + " threads)", total, available});
  if (!torch::cuda::is_available()) return out;
  static const CudaRuntime rt;
  const int n = static_cast<int>(torch::cuda::device_count());
  for (int i = 0; i < n; ++i) {
    DeviceInfo d;
    d.id = "cuda:" + std::to_string(i);
    d.name = "CUDA device " + std::to_string(i);
    if (rt.setDevice != nullptr && rt.setDevice(i) == 0) {
      // cudaDeviceProp starts with char name[256]; the rest is not read.
      std::vector<char> props(8192, 0);
      if (rt.getProperties != nullptr && rt.getProperties(props.data(), i) == 0 && props[0] != 0) {
        d.name.assign(props.data(), strnlen(props.data(), 256));
      }
      std::size_t freeBytes = 0, totalBytes = 0;
      if (rt.memGetInfo != nullptr && rt.memGetInfo(&freeBytes, &totalBytes) == 0) {
        d.memoryBytes = totalBytes;
        d.freeBytes = freeBytes;
      }
    }
    out.push_back(d);
  }
  return out;
}

std::string libtorchVersion() {
  return TORCH_VERSION;
}

}  // namespace latentlab
