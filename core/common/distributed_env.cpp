// Reads the data-parallel layout from torchrun's or Slurm's environment.
#include "latentlab/distributed.h"

#include <cerrno>
#include <cstdlib>

#include "latentlab/error.h"

namespace latentlab {

std::optional<std::string> processEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

namespace {

int parseInt(const std::string& name, const std::string& value, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || !end || *end != '\0' || v < lo || v > hi) {
    throw Error(ErrorCode::BadInput,
                "environment variable " + name + "='" + value + "' is not an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]",
                "Set by torchrun or Slurm; check the launch script.");
  }
  return static_cast<int>(v);
}

// Slurm's SLURM_NTASKS_PER_NODE can read "4" or "4(x2)"; the count before '(' is per node.
std::optional<int> tasksPerNode(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  const std::string head = v->substr(0, v->find_first_of("(,"));
  return parseInt("SLURM_NTASKS_PER_NODE", head, 1, 1 << 20);
}

}  // namespace

DistEnv readDistEnv(const EnvLookup& env) {
  DistEnv d;
  if (auto t = env("LATENTLAB_DIST_TIMEOUT"))
    d.timeout = std::chrono::seconds(parseInt("LATENTLAB_DIST_TIMEOUT", *t, 1, 86400));
  if (auto off = env("LATENTLAB_DIST"); off && (*off == "off" || *off == "0")) return d;

  const auto rank = env("RANK"), world = env("WORLD_SIZE");
  const auto slurmRank = env("SLURM_PROCID"), slurmTasks = env("SLURM_NTASKS");
  if (rank || world) {
    if (!rank || !world) {
      throw Error(ErrorCode::BadInput,
                  std::string("environment variable ") + (rank ? "WORLD_SIZE" : "RANK") + " is not set but " +
                      (rank ? "RANK" : "WORLD_SIZE") + " is",
                  "torchrun sets both; a hand-made launch must set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.");
    }
    d.launcher = "torchrun";
    d.worldSize = parseInt("WORLD_SIZE", *world, 1, 1 << 20);
    d.rank = parseInt("RANK", *rank, 0, d.worldSize - 1);
    d.localRank = env("LOCAL_RANK") ? parseInt("LOCAL_RANK", *env("LOCAL_RANK"), 0, d.worldSize - 1) : d.rank;
    d.localWorldSize =
        env("LOCAL_WORLD_SIZE") ? parseInt("LOCAL_WORLD_SIZE", *env("LOCAL_WORLD_SIZE"), 1, d.worldSize) : d.worldSize;
  } else if (slurmRank && slurmTasks) {
    d.launcher = "slurm";
    d.worldSize = parseInt("SLURM_NTASKS", *slurmTasks, 1, 1 << 20);
    d.rank = parseInt("SLURM_PROCID", *slurmRank, 0, d.worldSize - 1);
    d.localRank = env("SLURM_LOCALID") ? parseInt("SLURM_LOCALID", *env("SLURM_LOCALID"), 0, d.worldSize - 1) : 0;
    d.localWorldSize = tasksPerNode(env("SLURM_NTASKS_PER_NODE")).value_or(1);
  } else {
    return d;
  }
  if (d.localRank >= d.localWorldSize && d.launcher == "torchrun") {
    throw Error(ErrorCode::BadInput, "LOCAL_RANK " + std::to_string(d.localRank) + " is not below LOCAL_WORLD_SIZE " +
                                         std::to_string(d.localWorldSize));
  }
  if (!d.distributed()) return d;
  auto addr = env("MASTER_ADDR");
  if (!addr || addr->empty()) {
    throw Error(ErrorCode::BadInput,
                "environment variable MASTER_ADDR is not set for a " + std::to_string(d.worldSize) + "-process " +
                    d.launcher + " job",
                d.launcher == "slurm" ? "Export MASTER_ADDR (the first host of the allocation) in the batch script; "
                                        "`latentlab-engine submit --print` writes one."
                                      : "Set MASTER_ADDR to rank 0's host.");
  }
  d.masterAddr = *addr;
  if (auto port = env("MASTER_PORT")) d.masterPort = parseInt("MASTER_PORT", *port, 1, 65535);
  return d;
}

}  // namespace latentlab
