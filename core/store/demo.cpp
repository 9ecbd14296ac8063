// The demo workspace: the specs of its runs and the publishing of a pre-trained
// base (torch-free; ensureDemoBase, which trains one, is in jobs/demo_base.cpp).
#include "latentlab/demo.h"

#include <nlohmann/json.hpp>

#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

RunSpec demoPretrainSpec(const std::string& arch) {
  RunSpec s;
  s.name = "pretrain " + arch;
  s.kind = RunKind::Pretrain;
  s.architecture = arch;
  s.data.corpus = "demo";
  s.data.tokenizerVocab = 4096;
  s.data.seqLen = 128;
  s.data.validationShare = 0.02;
  s.steps = 300;
  s.microBatch = 16;
  s.optimizer.lr = 2e-3;
  s.optimizer.weightDecay = 0.01;
  s.schedule.kind = ScheduleKind::Cosine;
  s.schedule.warmupSteps = 20;
  s.schedule.minLrRatio = 0.1;
  s.evalEvery = 50;
  s.evalBatches = 4;
  s.checkpointEvery = 100;
  s.seed = 1;
  return s;
}

RunSpec demoConvertSpec(const fs::path& baseDir, RopeStrategy ropeStrategy, int dKv) {
  RunSpec s;
  s.name = std::string(choiceName(ropeStrategy)) + " d_kv " + std::to_string(dKv);
  s.kind = RunKind::ConvertFinetune;
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
  s.schedule.kind = ScheduleKind::Wsd;
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

fs::path publishDemoBase(RunStore& store, std::int64_t runId, const fs::path& workspace, const std::string& arch) {
  const RunRecord rec = store.run(runId);
  if (rec.status != RunStatus::Completed) {
    throw Error(ErrorCode::BadInput, "run " + std::to_string(runId) + " has not completed; nothing to publish");
  }
  std::string checkpoint;
  try {
    checkpoint = nlohmann::json::parse(rec.summaryJson).at("checkpoint").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    throw Error(ErrorCode::Store, "run " + std::to_string(runId) + ": its summary names no final checkpoint");
  }
  const fs::path model = fs::path(checkpoint) / "model";
  std::error_code ec;
  if (!fs::exists(model / "config.json", ec) || !fs::exists(model / "tokenizer.json", ec)) {
    throw Error(ErrorCode::BadCheckpoint, model.string() + ": the trained model or its tokenizer.json is missing");
  }
  const fs::path target = workspace / "models" / arch;
  const fs::path tmp = target.string() + ".partial";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp.parent_path(), ec);
  fs::copy(model, tmp, fs::copy_options::recursive, ec);
  if (ec) throw Error(ErrorCode::Io, tmp.string() + ": cannot copy the trained model: " + ec.message());
  fs::remove_all(target, ec);
  fs::rename(tmp, target, ec);
  if (ec) throw Error(ErrorCode::Io, target.string() + ": cannot publish the demo base: " + ec.message());
  return target;
}

}  // namespace latentlab
