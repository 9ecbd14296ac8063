// The demo workspace's base models, pre-trained once and cached.
#include "latentlab/demo.h"
#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

fs::path ensureDemoBase(RunStore& store, const std::string& arch, const JobEnvironment& env, ProgressSink& progress,
                        const CancelToken& cancel) {
  const fs::path target = env.workspace / "models" / arch;
  std::error_code ec;
  if (fs::exists(target / "config.json", ec) && fs::exists(target / "tokenizer.json", ec)) return target;
  const std::int64_t exp = findOrCreateExperiment(store, "demo bases", "", "Base models pre-trained by LatentLab");
  // Reuse an unfinished pre-training run of this base (resumes from its checkpoint).
  std::int64_t runId = 0;
  for (const auto& r : store.listRuns(RunFilter{exp, std::nullopt, std::nullopt})) {
    if (r.name != "pretrain " + arch) continue;
    if (r.status == RunStatus::Completed) return publishDemoBase(store, r.id, env.workspace, arch);  // publish pending
    runId = r.id;
  }
  const RunSpec spec = demoPretrainSpec(arch);
  if (runId == 0)
    runId =
        store.createRun(exp, spec.name, spec.kind, runSpecToJson(spec), env.device.empty() ? spec.device : env.device);
  else if (store.run(runId).status != RunStatus::Queued && store.run(runId).status != RunStatus::Running) {
    store.setStatus(runId, RunStatus::Queued);
  }
  RunResult r = runJob(store, runId, env, progress, cancel);
  if (r.status == RunStatus::Cancelled) throw Error(ErrorCode::Cancelled, "demo pre-training cancelled");
  if (r.status != RunStatus::Completed) {
    throw Error(ErrorCode::Internal, "pre-training the demo base " + arch + " failed: " + r.errorText());
  }
  return publishDemoBase(store, runId, env.workspace, arch);
}

}  // namespace latentlab
