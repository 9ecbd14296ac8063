// Running a training job recorded in the run store: the engine side of
// `latentlab-engine run`. The store row holds the RunSpec; the engine sets the
// status, writes metrics/events/artifacts, checkpoints and resumes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "latentlab/distributed.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "latentlab/progress.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"

namespace latentlab {

// One JSON object per event (progress, log, checkpoint, eval, status), as
// printed on stdout by `latentlab-engine run` (docs/line_protocol.md).
using EventLineSink = std::function<void(const std::string& jsonLine)>;

struct JobEnvironment {
  std::filesystem::path workspace;  // caches/ and runs/ live here
  std::string device;               // overrides the spec's device when set
  EventLineSink lines;              // may be empty
  bool resume = true;               // continue from the run's last checkpoint when there is one
  // Refuse, before anything is loaded, a run the memory planner says does not
  // fit its device (latentlab/memory_plan.h).
  bool checkMemory = true;
  // Data-parallel layout (readDistEnv()). With several ranks every rank runs
  // runJob on the same run; rank 0 alone writes the store and checkpoints, the
  // others only read the spec and the checkpoint they resume from.
  DistEnv dist;
  // Ranks other than 0 of a job launched from a spec file run with run ID 0 and
  // this spec: rank 0 registers the run and tells them its ID.
  std::string specJson;
};

// A job's outcome. The status is always given: a job that ends without saying
// how it ended is a bug, not a completed run.
struct RunResult {
  explicit RunResult(RunStatus s) : status(s) {}
  RunStatus status;
  std::optional<Error> error;  // why it failed or was cancelled (code, message, hint)
  bool notStarted = false;     // another engine holds the run: nothing was done or recorded
  std::int64_t steps = 0;      // steps completed
  std::int64_t tokens = 0;
  double finalTrainLoss = 0;
  std::optional<double> finalValLoss;
  std::filesystem::path lastCheckpoint;
  std::filesystem::path finalModel;  // HF folder of the trained model

  // The error as one line for logs and the store: "message (hint)"; empty when none.
  std::string errorText() const;
};

// The checks a new run's spec must pass before it is registered: a known
// architecture, a readable model folder (config.json and weight headers), a
// possible conversion for that model, existing data and tokenizer files, an
// out_dir that belongs to no other run. Throws Error naming the field and file.
// `workspace` places a relative out_dir and bounds where out_dir may be.
void preflightRunSpec(const RunSpec& spec, const std::string& source, const std::filesystem::path& workspace);
// An eval spec's model folder against the spec: a folder with a tokenizer
// whose context holds the passkey lengths and held-out windows.
void preflightEvalModel(const std::filesystem::path& modelDir, const RunSpec& spec, const std::string& source);

// Empty when the memory plan (latentlab/memory_plan.h) fits `device` or its
// free memory is unknown; else what the plan needs against what is free and
// the settings that would fit, for an error message.
std::string memoryPlanVerdict(const RunSpec& spec, const std::string& device);
// What to do about it.
extern const char* const kMemoryHint;

// The per-layer d_kv a convert-finetune spec's conversion.kv_budget gives
// (docs/conversion.md): the run's own data (tokenized into the workspace's
// cache as a run would), its calibration windows and pair selection, the base
// model's spectra; then both conversions (allocated, and the budget's uniform
// d_kv) scored on the run's validation batches as its step-0 val/loss would
// be (on the CPU in fp32). Nothing else is written. What `run --check SPEC
// --kv-allocation` prints and the Conversion tab charts.
KvAllocation planRunKvBudget(const RunSpec& spec, const std::filesystem::path& workspace, ProgressSink& progress,
                             const CancelToken& cancel);

// Runs store.run(runId): never throws for job failures (they become a failed
// run with the message); throws only when the store itself is unusable. The
// run is leased to this process for the job (RunStore::acquireRun): a run
// another live engine owns is not touched (result Failed, store unchanged); a
// completed run is left as it is (result Completed). Resume reads the model,
// tokenizer and optimiser state from the run's own last checkpoint.
RunResult runJob(RunStore& store, std::int64_t runId, const JobEnvironment& env, ProgressSink& progress,
                 const CancelToken& cancel);

}  // namespace latentlab
