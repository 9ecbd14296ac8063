// inspectModel: what a model folder holds, without loading its weights.
#include "io/hf_checkpoint.h"
#include "io/weight_table.h"
#include "latentlab/engine.h"

namespace latentlab {

ModelSummary inspectModel(const std::filesystem::path& dir, int tpDegree) {
  HfCheckpoint ckpt(dir);
  ModelSummary s;
  s.dir = dir;
  s.config = ckpt.config();
  s.unusedKeys = checkCheckpoint(ckpt);
  s.parameters = countParameters(s.config);
  s.weightDType = ckpt.dominantDType();
  s.kv = currentKvBudget(s.config, s.weightDType, tpDegree);
  s.sizeOnDisk = ckpt.sizeOnDisk();
  for (const auto& f : ckpt.files()) s.weightFiles.push_back(f.filename().string());
  s.tensorCount = static_cast<int>(ckpt.names().size());
  return s;
}

}  // namespace latentlab
