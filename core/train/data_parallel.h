// Data parallelism over PyTorch's c10d: a TCPStore rendezvous at
// MASTER_ADDR:MASTER_PORT (rank 0 serves it) and one process group backend,
// NCCL when the model lives on CUDA and Gloo on the CPU. Gradients are
// averaged over ranks in flat buckets; small host values (loss, stop flags) are
// summed in one collective per step.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "latentlab/distributed.h"

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace latentlab {

class DataParallel {
 public:
  // Blocks until all env.worldSize ranks have joined (or env.timeout passes:
  // Error(Device) naming MASTER_ADDR:MASTER_PORT).
  DataParallel(const DistEnv& env, torch::Device device);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return m_env.rank; }
  int worldSize() const { return m_env.worldSize; }
  const char* backendName() const;

  // Copies rank 0's values into every rank's tensors (parameters after build or resume).
  void broadcast(const std::vector<torch::Tensor>& tensors);
  // grad := mean over ranks of grad, for every parameter that has one.
  void averageGradients(const std::vector<torch::Tensor>& params);
  // t := mean over ranks of t (one collective).
  void allReduceMean(torch::Tensor& t);
  // t := sum over ranks of t.
  void allReduceSum(torch::Tensor& t);
  // out (n) := mean over ranks of this rank's chunk of in (world x n, flat).
  void reduceScatterMean(torch::Tensor& out, torch::Tensor& in);
  // out (world x n, flat) := every rank's in (n), rank order.
  void allGather(torch::Tensor& out, torch::Tensor& in);
  // Element-wise sum over ranks of a few host values.
  std::vector<double> sum(const std::vector<double>& values);
  void barrier();

  // The backend that a build without NCCL cannot provide throws Error(Unsupported).
  static c10::intrusive_ptr<c10d::Backend> makeGloo(const c10::intrusive_ptr<c10d::Store>& store, const DistEnv& env);
  static c10::intrusive_ptr<c10d::Backend> makeNccl(const c10::intrusive_ptr<c10d::Store>& store, const DistEnv& env);
  static bool ncclAvailable();

 private:
  // Applies `op` to `tensors` in flat buckets of at most kBucketElements per dtype.
  void bucketed(const std::vector<torch::Tensor>& tensors, bool broadcastOp);
  // Runs one collective; a lost peer becomes Error(Device) naming the group's endpoint.
  template <class F>
  auto guarded(const char* op, F&& fn) -> decltype(fn());

  DistEnv m_env;
  torch::Device m_device;
  bool m_nccl = false;
  c10::intrusive_ptr<c10d::Store> m_store;
  c10::intrusive_ptr<c10d::Backend> m_backend;
};

}  // namespace latentlab
