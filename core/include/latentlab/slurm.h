// Runs on a Slurm cluster (docs/distributed.md): a workspace's cluster
// profiles, the batch script a run is submitted with, and its submission.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace latentlab {

// <workspace>/clusters/<name>.json: where and how a run is placed.
struct ClusterProfile {
  std::string name;
  std::string partition;  // empty: the cluster's default
  std::string account;
  int nodes = 1;
  int tasksPerNode = 1;  // engine processes (ranks) per node: one per GPU, or CPU ranks
  int gpusPerNode = 0;
  int cpusPerTask = 1;
  std::string time = "24:00:00";    // Slurm's time limit
  std::string device = "cuda";      // the ranks' device: cuda (one GPU per local rank) or cpu (Gloo)
  std::string prefix;               // the engine's install prefix on the nodes; empty: this engine's own path
  int port = 29500;                 // the c10d rendezvous port on the first node
  std::vector<std::string> sbatch;  // further #SBATCH options, e.g. "--exclusive"
};

// A profile by name (<workspace>/clusters/<name>.json) or by path (a .json
// file). Throws Error naming the file and the field.
ClusterProfile readClusterProfile(const std::string& nameOrPath, const std::filesystem::path& workspace);

// The batch script that runs run `runId` of `db` under `profile`: one srun
// task per rank, the rendezvous on the allocation's first node, every rank
// `latentlab-engine run --db DB --run ID`, which starts the run or resumes it
// from its last checkpoint (a requeued job continues). `engine` is the
// engine's path on the nodes. Output goes to `logDir`/slurm-<job id>.out.
std::string slurmBatchScript(const ClusterProfile& profile, const std::filesystem::path& db, std::int64_t runId,
                             const std::filesystem::path& engine, const std::filesystem::path& logDir);

// `sbatch --parsable SCRIPT`; returns the job id. Throws Error with sbatch's
// own message when it refuses.
std::int64_t submitBatchScript(const std::filesystem::path& script);

}  // namespace latentlab
