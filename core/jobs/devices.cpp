// Devices LibTorch can use, and the LibTorch version in use.
#include <torch/torch.h>

#include "latentlab/engine.h"


namespace latentlab {

std::vector<DeviceInfo> listDevices() {
  std::vector<DeviceInfo> out;
  out.push_back({"cpu", "CPU (" + std::to_string(at::get_num_threads()) + " threads)", 0});
  if (torch::cuda::is_available()) {
    const auto n = torch::cuda::device_count();
    for (int i = 0; i < static_cast<int>(n); ++i) {
      DeviceInfo d;
      d.id = "cuda:" + std::to_string(i);
      d.name = "CUDA device " + std::to_string(i);
      out.push_back(d);
    }
  }
  return out;
}

std::string libtorchVersion() { return TORCH_VERSION; }

} // namespace latentlab
