// runJob: the one entry point of every run kind (pretrain, finetune,
// convert-finetune, eval). It leases the run, dispatches to the trainer or the
// evaluation job, and records the outcome in the store and as a status event.
#include <algorithm>
#include <chrono>
#include <thread>

#include "jobs/eval_job.h"
#include "latentlab/error.h"
#include "latentlab/events.h"
#include "latentlab/train.h"
#include "model/torch_util.h"
#include "store/lease_keeper.h"
#include "train/trainer.h"

namespace latentlab {

namespace {

void emit(const JobEnvironment& env, const EngineEvent& e) {
  if (env.lines) env.lines(eventLine(e));
}

}  // namespace

std::string RunResult::errorText() const {
  if (!error) return {};
  return error->message() + (error->hint().empty() ? "" : " (" + error->hint() + ")");
}

RunResult runJob(RunStore& store, std::int64_t runId, const JobEnvironment& env, ProgressSink& progress,
                 const CancelToken& cancel) {
  RunResult result(RunStatus::Queued);
  const bool writer = env.dist.writesMetrics();
  const bool launchedFromSpec = !writer && runId == 0;
  RunRecord record;
  if (!launchedFromSpec) record = store.run(runId);
  const std::string specJson = launchedFromSpec ? env.specJson : record.specJson;
  std::unique_ptr<LeaseKeeper> keeper;
  if (writer) {
    // The engine rides out another process holding the database lock for
    // minutes (a long reader or a backup) instead of failing the run.
    store.setBusyTimeout(std::chrono::minutes(10));
    if (record.status == RunStatus::Completed) {
      // A finished run keeps its outcome and its files: nothing to do.
      progress.log(LogLevel::Info, "run " + std::to_string(runId) + " is already completed; nothing to do");
      emit(env, EngineEvent::statusOf(runId, "completed"));
      result.status = RunStatus::Completed;
      return result;
    }
    try {
      const std::string takenFrom = store.acquireRun(runId);
      if (!takenFrom.empty()) progress.log(LogLevel::Warning, "took over the stale lease of " + takenFrom);
    } catch (const LeaseHeld& e) {
      // Another live engine owns the run: leave its status and files alone.
      result.status = RunStatus::Failed;
      result.notStarted = true;
      result.error = e;
      emit(env, EngineEvent::logOf("error", result.errorText()));
      return result;
    }
    keeper = std::make_unique<LeaseKeeper>(store.path(), runId);
    store.setStatus(runId, RunStatus::Running);
    emit(env, EngineEvent::statusOf(runId, "running"));
  }
  try {
    RunSpec spec = parseRunSpec(specJson, launchedFromSpec ? "spec" : "run " + std::to_string(runId) + " spec");
    const std::string what = "run " + std::to_string(runId);
    if (spec.kind == RunKind::Eval) {
      if (env.dist.distributed()) throw Error(ErrorCode::BadSpec, what + ": an eval job runs on one device");
      result = withTorchErrors(what, [&] { return runEvaluationJob(store, runId, env, spec, progress, cancel); });
    } else {
      result = withTorchErrors(what, [&] { return trainRun(store, runId, env, spec, progress, cancel); });
    }
  } catch (const Error& e) {
    result.status = e.code() == ErrorCode::Cancelled ? RunStatus::Cancelled : RunStatus::Failed;
    result.error = e;
  } catch (const std::exception& e) {
    result.status = RunStatus::Failed;
    result.error = Error(ErrorCode::Internal, std::string("run ") + std::to_string(runId) + ": " + e.what());
  }
  if (!writer) return result;  // rank 0 records the outcome of the job
  keeper.reset();
  // The outcome is recorded even when the store cannot be written for a while
  // (a full disk): retried until it can, for up to two minutes.
  const auto recordOutcome = [&] {
    const std::string error = result.errorText();
    store.setStatus(runId, result.status, error.empty() ? std::nullopt : std::optional<std::string>(error));
    if (!error.empty()) store.addEvent(runId, "error", error);
    store.releaseRun(runId);
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  for (int attempt = 0;; ++attempt) {
    try {
      recordOutcome();
      break;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Store || std::chrono::steady_clock::now() > deadline) throw;
      if (attempt == 0) {
        emit(env, EngineEvent::logOf("warning", "run " + std::to_string(runId) + " ended " +
                                                    runStatusName(result.status) + "; the store cannot be written (" +
                                                    e.message() + "), retrying until it can"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(4000, 250 << std::min(attempt, 4))));
    }
  }
  emit(env, EngineEvent::statusOf(runId, runStatusName(result.status), result.errorText()));
  return result;
}

}  // namespace latentlab
