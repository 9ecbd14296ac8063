// Data parallelism over c10d: rendezvous, bucketed gradient averaging,
// parameter broadcast and small host reductions.
#include "train/data_parallel.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <map>

#include "latentlab/error.h"

namespace latentlab {

namespace {
constexpr std::int64_t kBucketElements = std::int64_t{1} << 24;   // 64 MiB of fp32 per collective

std::string endpoint(const DistEnv& env) { return env.masterAddr + ":" + std::to_string(env.masterPort); }
} // namespace

DataParallel::DataParallel(const DistEnv& env, torch::Device device) : m_env(env), m_device(device) {
  m_nccl = device.is_cuda();
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(env.timeout);
  try {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(env.masterPort);
    opts.isServer = env.rank == 0;
    opts.numWorkers = static_cast<std::size_t>(env.worldSize);
    opts.waitWorkers = true;
    opts.timeout = timeout;
    m_store = c10::make_intrusive<c10d::TCPStore>(env.masterAddr, opts);
    m_store->setTimeout(timeout);
    m_backend = m_nccl ? makeNccl(m_store, env) : makeGloo(m_store, env);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Device,
                "rank " + std::to_string(env.rank) + " of " + std::to_string(env.worldSize) + " could not join the " +
                    (m_nccl ? "NCCL" : "Gloo") + " group at " + endpoint(env) + ": " + e.what(),
                "Every rank must start within the timeout (LATENTLAB_DIST_TIMEOUT, now " +
                    std::to_string(env.timeout.count()) + " s) and reach MASTER_ADDR:MASTER_PORT.");
  }
}

DataParallel::~DataParallel() = default;

const char* DataParallel::backendName() const { return m_nccl ? "nccl" : "gloo"; }

void DataParallel::bucketed(const std::vector<torch::Tensor>& tensors, bool broadcastOp) {
  // Group by dtype, then pack consecutive tensors into flat buckets.
  std::map<int, std::vector<torch::Tensor>> byType;
  for (const auto& t : tensors) byType[static_cast<int>(t.scalar_type())].push_back(t);
  for (auto& [type, group] : byType) {
    std::size_t i = 0;
    while (i < group.size()) {
      std::vector<torch::Tensor> bucket;
      std::int64_t n = 0;
      do {
        n += group[i].numel();
        bucket.push_back(group[i++]);
      } while (i < group.size() && n + group[i].numel() <= kBucketElements);
      std::vector<torch::Tensor> flat{torch::cat(
          [&] {
            std::vector<torch::Tensor> parts;
            for (const auto& t : bucket) parts.push_back(t.reshape({-1}));
            return parts;
          }())};
      if (broadcastOp) {
        c10d::BroadcastOptions o;
        o.rootRank = 0;
        m_backend->broadcast(flat, o)->wait();
      } else {
        m_backend->allreduce(flat)->wait();
        flat[0].div_(m_env.worldSize);
      }
      std::int64_t offset = 0;
      for (auto& t : bucket) {
        t.copy_(flat[0].narrow(0, offset, t.numel()).view_as(t));
        offset += t.numel();
      }
    }
  }
}

void DataParallel::allReduceMean(torch::Tensor& t) {
  allReduceSum(t);
  t.div_(m_env.worldSize);
}

void DataParallel::allReduceSum(torch::Tensor& t) {
  std::vector<torch::Tensor> one{t};
  m_backend->allreduce(one)->wait();
}

void DataParallel::reduceScatterMean(torch::Tensor& out, torch::Tensor& in) {
  m_backend->reduce_scatter_single(out, in)->wait();
  out.div_(m_env.worldSize);
}

void DataParallel::allGather(torch::Tensor& out, torch::Tensor& in) {
  m_backend->all_gather_single(out, in)->wait();
}

void DataParallel::broadcast(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard noGrad;
  bucketed(tensors, /*broadcastOp=*/true);
}

void DataParallel::averageGradients(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard noGrad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    // A parameter without a gradient on this rank still takes part, as zeros.
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  bucketed(grads, /*broadcastOp=*/false);
}

std::vector<double> DataParallel::sum(const std::vector<double>& values) {
  std::vector<torch::Tensor> t{torch::tensor(values, torch::kFloat64).to(m_device)};
  m_backend->allreduce(t)->wait();
  auto host = t[0].cpu();
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

void DataParallel::barrier() { (void)sum({0.0}); }

} // namespace latentlab
