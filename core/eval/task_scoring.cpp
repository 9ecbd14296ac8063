// A multiple-choice task scored into the run store (eval/task_scoring.h).
#include "eval/task_scoring.h"

#include <tuple>

#include "latentlab/error.h"
#include "latentlab/events.h"

namespace latentlab {
using nlohmann::json;
using Clock = std::chrono::steady_clock;

void storeChoiceScores(RunStore& store, std::int64_t run, std::int64_t step, const std::string& task,
                       const ChoiceEvalResult& r, bool partial) {
  std::vector<EvaluationRecord> rows;
  for (const auto& [metric, value, err] :
       {std::tuple{"acc", r.acc, r.accStderr}, {"acc_norm", r.accNorm, r.accNormStderr}}) {
    EvaluationRecord e;
    e.runId = run;
    e.step = step;
    e.task = task;
    e.metric = metric;
    e.value = value;
    e.stderrValue = err;
    e.items = r.items;
    e.partial = partial;
    rows.push_back(e);
  }
  store.addEvaluations(rows);  // acc and acc_norm together or not at all
}

json choiceScoresJson(const ChoiceEvalResult& r, std::int64_t taskItems) {
  return {{"acc", r.acc},          {"acc_stderr", r.accStderr},
          {"acc_norm", r.accNorm}, {"acc_norm_stderr", r.accNormStderr},
          {"items", r.items},      {"partial", r.cancelled || r.items < taskItems},
          {"seconds", r.seconds}};
}

ChoiceEvalResult scoreTaskIntoStore(ChoiceScorer& scorer, const EvalTaskSpec& task,
                                    const std::vector<ChoiceItem>& items, const TaskScoreTarget& target,
                                    ProgressSink& itemProgress, ProgressSink& log, const CancelToken& cancel) {
  auto lastWrite = Clock::now();
  ChoiceResultSink sofarSink;
  if (target.partialEvery.count() > 0) {
    sofarSink = [&](const ChoiceEvalResult& sofar) {
      if (Clock::now() - lastWrite < target.partialEvery || sofar.items == 0) return;
      storeChoiceScores(target.store, target.run, target.step, task.name, sofar, /*partial=*/true);
      lastWrite = Clock::now();
    };
  }
  ChoiceEvalResult r;
  try {
    r = scorer.score(items, task.limit, itemProgress, cancel, sofarSink);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::BadData) throw;
    throw e.withContext(task.file);  // an item that cannot be scored: its file too
  }
  // Partial: scored on fewer items than the task has (cancelled, or a limit).
  const bool partial = r.cancelled || r.items < static_cast<std::int64_t>(items.size());
  storeChoiceScores(target.store, target.run, target.step, task.name, r, partial);
  if (target.lines) {
    target.lines(eventLine(EngineEvent::evalTaskOf(target.step, task.name, r.acc, r.accNorm, r.items)));
  }
  log.log(LogLevel::Info, task.name + " at step " + std::to_string(target.step) + ": acc " + std::to_string(r.acc) +
                              ", acc_norm " + std::to_string(r.accNorm) + " over " + std::to_string(r.items) +
                              " items" +
                              (r.cancelled ? " (cancelled)"
                               : partial   ? " (limited)"
                                           : ""));
  return r;
}

}  // namespace latentlab
