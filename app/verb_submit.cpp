// `latentlab-engine submit`: a run registered in a workspace and handed to
// Slurm with a batch script written from a cluster profile.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "common_paths.h"
#include "engine_cli.h"
#include "latentlab/error.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"
#include "latentlab/slurm.h"
#include "latentlab/train.h"

namespace latentlab::cli {
namespace fs = std::filesystem;

namespace {

// This engine's own path: the default for the nodes where no prefix is named.
fs::path ownExecutable() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path("latentlab-engine") : self;
}

}  // namespace

int cmdSubmit(int argc, char** argv) {
  Args args(argc, argv, 2, {"help", "print"}, {"db", "cluster", "workspace"});
  if (args.flag("help") || !args.get("db") || !args.get("cluster") || args.positionals().size() != 1) {
    std::printf(
        "usage: latentlab-engine submit SPEC.json --db FILE --cluster PROFILE [--print]\n\n"
        "Registers the run in the workspace database and submits it to Slurm (sbatch) with a batch\n"
        "script written from the cluster profile: <workspace>/clusters/PROFILE.json, or a .json path\n"
        "(partition, account, nodes, tasks_per_node, gpus_per_node, cpus_per_task, time, device,\n"
        "prefix, port, sbatch; docs/distributed.md). Every rank runs `latentlab-engine run --db FILE\n"
        "--run ID` from the profile's install prefix; the workspace must be on a filesystem the nodes\n"
        "share. Prints {\"run\": ID, \"slurm_job\": JOB, \"script\": PATH}; the script is kept in the\n"
        "run's folder, the job's output beside it.\n"
        "  --print   write the script to stdout; register and submit nothing\n");
    return args.flag("help") ? 0 : 1;
  }
  const fs::path db = fs::absolute(*args.get("db"));
  const fs::path workspace = args.get("workspace") ? fs::absolute(*args.get("workspace")) : workspaceOf(db);
  const ClusterProfile profile = readClusterProfile(*args.get("cluster"), workspace);
  const fs::path specPath = args.positionals()[0];
  RunSpec spec = loadRunSpec(specPath);
  spec.device = profile.device;  // every rank's device comes from the profile
  validateRunSpec(spec, specPath.string());
  preflightRunSpec(spec, specPath.string(), workspace);
  const fs::path engine = engineOnNodes(profile, ownExecutable());
  if (args.flag("print")) {
    std::fputs(slurmBatchScript(profile, db, 0, engine, workspace / "runs" / "ID").c_str(), stdout);
    return 0;
  }
  RunStore store(db, StoreOpen::CreateIfMissing);
  const std::int64_t runId = store.createRun(std::nullopt, spec.name.empty() ? specPath.stem().string() : spec.name,
                                             spec.kind, runSpecToJson(spec), spec.device);
  std::int64_t job = 0;
  fs::path script;
  try {
    script = writeBatchScript(profile, db, runId, engine, workspace);
    job = submitBatchScript(script);
  } catch (const Error& e) {
    store.setStatus(runId, RunStatus::Failed, e.message());
    throw;
  }
  // A profile given by path is kept as that path: the workbench resubmits with the same file.
  const std::string given = *args.get("cluster");
  const bool byPath = given.find('/') != std::string::npos || fs::path(given).extension() == ".json";
  recordSlurmSubmission(store, runId, job, byPath ? fs::absolute(given).string() : given, script);
  std::printf("%s\n", nlohmann::json({{"run", runId}, {"slurm_job", job}, {"script", script.string()}}).dump().c_str());
  return 0;
}

}  // namespace latentlab::cli
