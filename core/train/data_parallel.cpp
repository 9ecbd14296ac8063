// Data parallelism over c10d: rendezvous, bucketed gradient averaging,
// parameter broadcast and small host reductions.
#include "train/data_parallel.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <map>

#include "latentlab/error.h"

namespace latentlab {

namespace {
constexpr std::int64_t kBucketElements = std::int64_t{1} << 24;  // 64 MiB of fp32 per collective

std::string endpoint(const DistEnv& env) {
  return env.masterAddr + ":" + std::to_string(env.masterPort);
}

// The first line of an exception's text, without c10's C++ backtrace.
std::string firstLine(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10 != nullptr ? c10->what_without_backtrace() : e.what();
  const auto nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}
}  // namespace

template <class F>
auto DataParallel::guarded(const char* op, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // A peer that died or a network that failed: named by the group's
    // rendezvous endpoint, not by the ephemeral port of the peer's socket.
    throw Error(ErrorCode::Device,
                "rank " + std::to_string(m_env.rank) + " of " + std::to_string(m_env.worldSize) +
                    " lost the group at " + endpoint(m_env) + " during " + op +
                    " (another rank stopped or the "
                    "network failed): " +
                    firstLine(e),
                "Check the other ranks' logs; a rank that stops ends the job for all (LATENTLAB_DIST_TIMEOUT, now " +
                    std::to_string(m_env.timeout.count()) + " s, bounds the wait).");
  }
}

DataParallel::DataParallel(const DistEnv& env, torch::Device device) : m_env(env), m_device(device) {
  m_nccl = device.is_cuda();
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(env.timeout);
  // One deadline for the whole rendezvous: the store and then the backend
  // share it, so a rank started alone waits the timeout once, not twice.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  try {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(env.masterPort);
    opts.isServer = env.rank == 0;
    opts.numWorkers = static_cast<std::size_t>(env.worldSize);
    opts.waitWorkers = true;
    opts.timeout = timeout;
    m_store = c10::make_intrusive<c10d::TCPStore>(env.masterAddr, opts);
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    m_store->setTimeout(std::max(left, std::chrono::milliseconds(1000)));
    m_backend = m_nccl ? makeNccl(m_store, env) : makeGloo(m_store, env);
    m_store->setTimeout(timeout);  // the collectives' own bound afterwards
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Device,
                "rank " + std::to_string(env.rank) + " of " + std::to_string(env.worldSize) + " could not join the " +
                    (m_nccl ? "NCCL" : "Gloo") + " group at " + endpoint(env) + ": " + firstLine(e),
                "Every rank must start within the timeout (LATENTLAB_DIST_TIMEOUT, now " +
                    std::to_string(env.timeout.count()) + " s) and reach MASTER_ADDR:MASTER_PORT.");
  }
}

DataParallel::~DataParallel() = default;

const char* DataParallel::backendName() const {
  return m_nccl ? "nccl" : "gloo";
}

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
      std::vector<torch::Tensor> flat{torch::cat([&] {
        std::vector<torch::Tensor> parts;
        for (const auto& t : bucket) parts.push_back(t.reshape({-1}));
        return parts;
      }())};
      if (broadcastOp) {
        c10d::BroadcastOptions o;
        o.rootRank = 0;
        guarded("broadcast", [&] { return m_backend->broadcast(flat, o)->wait(); });
      } else {
        guarded("all-reduce", [&] { return m_backend->allreduce(flat)->wait(); });
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
  guarded("all-reduce", [&] { return m_backend->allreduce(one)->wait(); });
}

void DataParallel::reduceScatterMean(torch::Tensor& out, torch::Tensor& in) {
  guarded("reduce-scatter", [&] { return m_backend->reduce_scatter_single(out, in)->wait(); });
  out.div_(m_env.worldSize);
}

void DataParallel::allGather(torch::Tensor& out, torch::Tensor& in) {
  guarded("all-gather", [&] { return m_backend->all_gather_single(out, in)->wait(); });
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
  guarded("all-reduce", [&] { return m_backend->allreduce(t)->wait(); });
  auto host = t[0].cpu();
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

void DataParallel::barrier() {
  (void)sum({0.0});
}

}  // namespace latentlab
