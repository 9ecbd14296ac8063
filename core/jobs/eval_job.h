// Evaluation jobs: run spec kind "eval" (docs/evaluation.md).
#pragma once

#include <cstdint>
#include <string>

#include "latentlab/multiple_choice.h"
#include "latentlab/train.h"

namespace latentlab {

// Scores spec.model_dir on the spec's eval_tasks and passkey grid, storing
// every figure under the evaluated run (evaluates.run at evaluates.step) or
// under `runId` at step 0. Cancelled: what was scored stays, the task cut
// short marked partial. Throws Error for bad task files or models.
RunResult runEvaluationJob(RunStore& store, std::int64_t runId, const JobEnvironment& env, const RunSpec& spec,
                           ProgressSink& progress, const CancelToken& cancel);

}  // namespace latentlab
