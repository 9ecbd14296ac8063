// Runs on a Slurm cluster (docs/distributed.md): a workspace's cluster
// profiles, the batch script a run is submitted with, and its submission.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace latentlab {

class RunStore;

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

// The names of a workspace's profiles (<workspace>/clusters/*.json), sorted.
std::vector<std::string> clusterProfileNames(const std::filesystem::path& workspace);

// The engine's path on the nodes: <prefix>/bin/latentlab-engine, or `local`
// (this engine's own path) where the profile names no prefix.
std::filesystem::path engineOnNodes(const ClusterProfile& profile, const std::filesystem::path& local);

// The batch script that runs run `runId` of `db` under `profile`: one srun
// task per rank, the rendezvous on the allocation's first node, every rank
// `latentlab-engine run --db DB --run ID`, which starts the run or resumes it
// from its last checkpoint (a requeued job continues). `engine` is the
// engine's path on the nodes. Output goes to `logDir`/slurm-<job id>.out.
std::string slurmBatchScript(const ClusterProfile& profile, const std::filesystem::path& db, std::int64_t runId,
                             const std::filesystem::path& engine, const std::filesystem::path& logDir);

// Writes the batch script of run `runId` to <workspace>/runs/<id>/slurm.sbatch
// (output beside it) and returns its path. Throws Error naming the file.
std::filesystem::path writeBatchScript(const ClusterProfile& profile, const std::filesystem::path& db,
                                       std::int64_t runId, const std::filesystem::path& engine,
                                       const std::filesystem::path& workspace);

// sbatch --parsable's answer ("<job id>" or "<job id>;<cluster>"): the job id.
std::optional<std::int64_t> parseSbatchAnswer(const std::string& answer);

// `sbatch --parsable SCRIPT`; returns the job id. Throws Error with sbatch's
// own message when it refuses.
std::int64_t submitBatchScript(const std::filesystem::path& script);

// A run's submission, kept in the store: the tag "cluster:<profile>" (the
// workbench follows the run through Slurm, also after it is reopened) and the
// event "slurm" with {job, cluster, script}.
void recordSlurmSubmission(RunStore& store, std::int64_t runId, std::int64_t job, const std::string& profile,
                           const std::filesystem::path& script);
// The profile a run is placed on (its "cluster:" tag), empty for this machine.
std::string runCluster(const RunStore& store, std::int64_t runId);
// The Slurm job the run was last submitted as (its newest "slurm" event).
std::optional<std::int64_t> lastSlurmJob(const RunStore& store, std::int64_t runId);

// One line of `squeue --noheader --format=<kSqueueFormat>`.
struct SlurmJobState {
  std::int64_t job = 0;
  std::string state;   // PENDING, RUNNING, COMPLETING, ...
  std::string nodes;   // the node list ("" while pending)
  std::string reason;  // why it pends ("None" while it runs)
  std::string name;    // the job's name: latentlab-<run id> for the runs of a batch script
};
inline constexpr const char* kSqueueFormat = "%i|%T|%N|%r|%j";
// The job name a run's batch script gives its Slurm job.
std::string slurmJobName(std::int64_t runId);
std::vector<SlurmJobState> parseSqueue(const std::string& out);

}  // namespace latentlab
