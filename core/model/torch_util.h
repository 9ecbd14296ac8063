// Bridges between LatentLab's plain types and LibTorch: dtypes, devices, and
// the conversion of c10::Error into latentlab::Error at API boundaries.
#pragma once

#include "latentlab/engine.h"

#include <torch/torch.h>

#include <string>

#include "latentlab/error.h"
#include "latentlab/model_config.h"

namespace latentlab {

torch::ScalarType toTorch(DType dtype);
DType fromTorch(torch::ScalarType type);  // throws for non-float types

// "cpu", "cuda", "cuda:N"; throws Error(Device) when CUDA is requested but absent.
torch::Device parseDevice(const std::string& spec);

// reexecWithPassiveOpenMpWait: declared in latentlab/engine.h (the programs' main() calls it).

// Runs fn, rethrowing c10::Error (and std::bad_alloc) as latentlab::Error.
template <typename Fn>
auto withTorchErrors(const std::string& stage, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error&) {
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    throw Error(ErrorCode::Device, stage + ": out of memory: " + e.what_without_backtrace(),
                "Reduce the micro-batch or sequence length.");
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::Internal, stage + ": " + e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::Device, stage + ": out of host memory", "Reduce the micro-batch or sequence length.");
  }
}

}  // namespace latentlab
