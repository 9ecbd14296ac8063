// dtype/device conversion helpers.
#include "model/torch_util.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace latentlab {

torch::ScalarType toTorch(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return torch::kFloat32;
    case DType::F16:
      return torch::kFloat16;
    case DType::BF16:
      return torch::kBFloat16;
    case DType::F64:
      return torch::kFloat64;
  }
  return torch::kFloat32;
}

DType fromTorch(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32:
      return DType::F32;
    case torch::kFloat16:
      return DType::F16;
    case torch::kBFloat16:
      return DType::BF16;
    case torch::kFloat64:
      return DType::F64;
    default:
      break;
  }
  throw Error(ErrorCode::Internal, std::string("tensor dtype ") + c10::toString(type) + " is not a float type");
}

torch::Device parseDevice(const std::string& spec) {
  if (spec.empty() || spec == "cpu") return torch::Device(torch::kCPU);
  if (spec.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available()) {
      throw Error(ErrorCode::Device, "device '" + spec + "' requested but LibTorch sees no CUDA device",
                  "Use --device cpu, or check the NVIDIA driver.");
    }
    int index = 0;
    if (spec.size() > 4) {
      if (spec[4] != ':') throw Error(ErrorCode::BadInput, "device '" + spec + "' is not cpu, cuda or cuda:N");
      try {
        index = std::stoi(spec.substr(5));
      } catch (const std::exception&) {
        throw Error(ErrorCode::BadInput, "device '" + spec + "' is not cpu, cuda or cuda:N");
      }
    }
    const int count = static_cast<int>(torch::cuda::device_count());
    if (index < 0 || index >= count) {
      throw Error(ErrorCode::Device,
                  "device '" + spec + "' does not exist (" + std::to_string(count) + " CUDA devices)");
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw Error(ErrorCode::BadInput, "device '" + spec + "' is not cpu, cuda or cuda:N");
}

void reexecWithPassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);  // the real path keeps the process name
  if (ec) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  ::execv(self.c_str(), argv);  // returns only on failure: carry on with the active policy
}

}  // namespace latentlab
