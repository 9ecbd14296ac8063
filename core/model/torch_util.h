// Bridges between LatentLab's plain types and LibTorch: dtypes, devices, and
// the conversion of c10::Error into latentlab::Error at API boundaries.
#pragma once

#include <torch/torch.h>

#include <string>

#include "latentlab/error.h"
#include "latentlab/model_config.h"

namespace latentlab {

torch::ScalarType toTorch(DType dtype);
DType fromTorch(torch::ScalarType type);   // throws for non-float types

// "cpu", "cuda", "cuda:N"; throws Error(Device) when CUDA is requested but absent.
torch::Device parseDevice(const std::string& spec);

// OpenMP threads that spin while waiting for work steal the cores the
// working threads need whenever the machine is shared (measured by the train
// benchmark: 5x slower steps on 2 busy cores). libgomp reads its wait policy
// once, when it loads, so this re-executes the program (/proc/self/exe with
// the same argv) with OMP_WAIT_POLICY=PASSIVE unless the variable is already
// set. Call it first in main(); returns only when no re-exec was needed or
// the exec failed.
void reexecWithPassiveOpenMpWait(char** argv);

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

} // namespace latentlab
