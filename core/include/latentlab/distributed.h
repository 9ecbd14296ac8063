// Where this process sits in a data-parallel job, read from the launcher's
// environment: torchrun's RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE /
// MASTER_ADDR / MASTER_PORT, or Slurm's SLURM_PROCID / SLURM_NTASKS /
// SLURM_LOCALID / SLURM_NTASKS_PER_NODE mapped onto them. Plain data, no torch.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace latentlab {

struct DistEnv {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  int localWorldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  std::string launcher = "single";    // single | torchrun | slurm
  std::chrono::seconds timeout{300};  // rendezvous and collective timeout

  bool distributed() const { return worldSize > 1; }
  bool writesMetrics() const { return rank == 0; }  // rank 0 alone writes the run store
};

// Looks a variable up (nullopt when unset); the default reads the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
std::optional<std::string> processEnv(const std::string& name);

// torchrun's variables win when RANK or WORLD_SIZE is set; otherwise Slurm's
// (SLURM_PROCID and SLURM_NTASKS both set); otherwise a single process.
// LATENTLAB_DIST=off forces a single process (e.g. one engine inside a larger
// Slurm allocation); LATENTLAB_DIST_TIMEOUT sets the timeout in seconds.
// Throws Error(BadInput) naming the variable when one is malformed or the
// values are inconsistent (rank outside [0, world size), missing MASTER_ADDR).
DistEnv readDistEnv(const EnvLookup& lookup = processEnv);

}  // namespace latentlab
