// The two c10d backends. Gloo's process group header needs Gloo's own headers
// (Debian's libgloo-dev): only declarations are used, the code is LibTorch's.
// NCCL's needs the CUDA and NCCL headers of the wheel's nvidia packages and is
// compiled in only when CMake found them (LATENTLAB_HAVE_NCCL).
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#if LATENTLAB_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "latentlab/error.h"
#include "train/data_parallel.h"

namespace latentlab {

namespace {
bool isLoopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}
}  // namespace

c10::intrusive_ptr<c10d::Backend> DataParallel::makeGloo(const c10::intrusive_ptr<c10d::Store>& store,
                                                         const DistEnv& env) {
  auto opts =
      c10d::ProcessGroupGloo::Options::create(std::chrono::duration_cast<std::chrono::milliseconds>(env.timeout));
  // Like torch.distributed: GLOO_SOCKET_IFNAME picks the interface; a loopback
  // master means a one-host job on loopback; otherwise this host's address.
  if (auto ifname = processEnv("GLOO_SOCKET_IFNAME"); ifname && !ifname->empty()) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(*ifname));
  } else if (isLoopback(env.masterAddr)) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  opts->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.worldSize, opts);
}

bool DataParallel::ncclAvailable() {
  return LATENTLAB_HAVE_NCCL != 0;
}

c10::intrusive_ptr<c10d::Backend> DataParallel::makeNccl(const c10::intrusive_ptr<c10d::Store>& store,
                                                         const DistEnv& env) {
#if LATENTLAB_HAVE_NCCL
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(env.localRank));
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = std::chrono::duration_cast<std::chrono::milliseconds>(env.timeout);
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.worldSize, opts);
#else
  (void)store;
  (void)env;
  throw Error(ErrorCode::Unsupported, "this build of LatentLab has no NCCL backend for multi-GPU training",
              "Build against the torch wheel of packaging/setup-venv.sh (its nvidia packages carry the CUDA and NCCL "
              "headers), or train on CPU ranks (Gloo).");
#endif
}

}  // namespace latentlab
