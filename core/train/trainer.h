// The training of one run (kinds pretrain, finetune, convert-finetune), as
// the job runner (jobs/run_job.cpp) calls it once the run is leased.
#pragma once

#include <cstdint>

#include "latentlab/train.h"

namespace latentlab {

// Trains run `runId` of `spec` to its last step, checkpointing, validating and
// scoring its eval tasks on the way. Returns how it ended (failed at a step:
// out of memory, a non-finite loss); throws Error for what stops it earlier.
RunResult trainRun(RunStore& store, std::int64_t runId, const JobEnvironment& env, const RunSpec& spec,
                   ProgressSink& progress, const CancelToken& cancel);

}  // namespace latentlab
