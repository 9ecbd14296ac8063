// The demo workspace's base models, pre-trained once and cached.
#include "latentlab/demo.h"

#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

RunSpec demoPretrainSpec(const std::string& arch) {
  RunSpec s;
  s.name = "pretrain " + arch;
  s.kind = "pretrain";
  s.architecture = arch;
  s.data.corpus = "demo";
  s.data.tokenizerVocab = 4096;
  s.data.seqLen = 128;
  s.data.validationShare = 0.02;
  s.steps = 300;
  s.microBatch = 16;
  s.optimizer.lr = 2e-3;
  s.optimizer.weightDecay = 0.01;
  s.schedule.kind = "cosine";
  s.schedule.warmupSteps = 20;
  s.schedule.minLrRatio = 0.1;
  s.evalEvery = 50;
  s.evalBatches = 4;
  s.checkpointEvery = 100;
  s.seed = 1;
  return s;
}

RunSpec demoConvertSpec(const fs::path& baseDir, const std::string& ropeStrategy, int dKv) {
  RunSpec s;
  s.name = ropeStrategy + " d_kv " + std::to_string(dKv);
  s.kind = "convert-finetune";
  s.modelDir = baseDir.string();
  s.conversion.enabled = true;
  s.conversion.ropeStrategy = ropeStrategy;
  s.conversion.dKv = dKv;
  s.conversion.calibSequences = 32;
  s.conversion.calibSeqLen = 128;
  s.data.corpus = "demo";
  s.data.seqLen = 128;
  s.data.validationShare = 0.02;
  s.steps = 60;
  s.microBatch = 8;
  s.optimizer.lr = 1e-3;
  s.schedule.kind = "wsd";
  s.schedule.warmupSteps = 5;
  s.schedule.decaySteps = 15;
  s.evalEvery = 20;
  s.evalBatches = 4;
  s.checkpointEvery = 0;
  s.seed = 2;
  return s;
}

std::int64_t findOrCreateExperiment(RunStore& store, const std::string& name, const std::string& preset,
                                    const std::string& description) {
  for (const auto& e : store.listExperiments()) {
    if (e.name == name) return e.id;
  }
  return store.createExperiment(name, preset, description);
}

fs::path ensureDemoBase(RunStore& store, const std::string& arch, const JobEnvironment& env, ProgressSink& progress,
                        const CancelToken& cancel) {
  const fs::path target = env.workspace / "models" / arch;
  std::error_code ec;
  if (fs::exists(target / "config.json", ec) && fs::exists(target / "tokenizer.json", ec)) return target;
  const std::int64_t exp = findOrCreateExperiment(store, "demo bases", "", "Base models pre-trained by LatentLab");
  // Reuse an unfinished pre-training run of this base (resumes from its checkpoint).
  std::int64_t runId = 0;
  for (const auto& r : store.listRuns(RunFilter{exp, std::nullopt, std::nullopt})) {
    if (r.name == "pretrain " + arch && r.status != RunStatus::Completed) runId = r.id;
  }
  const RunSpec spec = demoPretrainSpec(arch);
  if (runId == 0) runId = store.createRun(exp, spec.name, spec.kind, runSpecToJson(spec), env.device.empty() ? spec.device : env.device);
  else if (store.run(runId).status != RunStatus::Queued && store.run(runId).status != RunStatus::Running) {
    store.setStatus(runId, RunStatus::Queued);
  }
  RunResult r = runJob(store, runId, env, progress, cancel);
  if (r.status == RunStatus::Cancelled) throw Error(ErrorCode::Cancelled, "demo pre-training cancelled");
  if (r.status != RunStatus::Completed) {
    throw Error(ErrorCode::Internal, "pre-training the demo base " + arch + " failed: " + r.error);
  }
  // Publish: copy the final model and its tokenizer under models/<arch>.
  const fs::path tmp = target.string() + ".partial";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp.parent_path(), ec);
  fs::copy(r.finalModel, tmp, fs::copy_options::recursive, ec);
  if (ec) throw Error(ErrorCode::Io, tmp.string() + ": cannot copy the trained model: " + ec.message());
  RunRecord rec = store.run(runId);
  RunSpec ran = parseRunSpec(rec.specJson, "run spec");
  fs::path tok;
  for (const auto& e : fs::directory_iterator(env.workspace / "cache", ec)) {
    const auto n = e.path().filename().string();
    if (n.rfind("tokenizer-", 0) == 0 && n.find("-" + std::to_string(ran.data.tokenizerVocab) + ".json") != std::string::npos) tok = e.path();
  }
  if (tok.empty()) throw Error(ErrorCode::Internal, "the demo tokenizer is missing from " + (env.workspace / "cache").string());
  fs::copy_file(tok, tmp / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
  fs::remove_all(target, ec);
  fs::rename(tmp, target, ec);
  if (ec) throw Error(ErrorCode::Io, target.string() + ": cannot publish the demo base: " + ec.message());
  return target;
}

} // namespace latentlab
