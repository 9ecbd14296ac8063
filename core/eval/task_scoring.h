// A multiple-choice task scored into the run store: the one routine that a
// training run's checkpoints and an evaluation job both use (docs/evaluation.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "latentlab/multiple_choice.h"
#include "latentlab/run_store.h"
#include "latentlab/train.h"

namespace latentlab {

// A task's acc and acc_norm (value, standard error, items) as two rows of the
// store's evaluations under `run` at `step`, in one transaction; a repeat
// replaces them (a partial result never replaces a larger one).
void storeChoiceScores(RunStore& store, std::int64_t run, std::int64_t step, const std::string& task,
                       const ChoiceEvalResult& r, bool partial);

// A scored task's figures: the one JSON shape of run and eval-job summaries
// (partial: fewer items scored than the task's `taskItems`).
nlohmann::json choiceScoresJson(const ChoiceEvalResult& r, std::int64_t taskItems);

// Where a task's scores go: the store (under `run` at `step`), the engine's
// event lines, and how often the figures so far are stored while it is scored
// (marked partial; zero: only at the end).
struct TaskScoreTarget {
  RunStore& store;
  std::int64_t run = 0;
  std::int64_t step = 0;
  const EventLineSink& lines;
  std::chrono::milliseconds partialEvery{0};
};

// Scores the task's first `task.limit` items, stores the result (partial when
// fewer than all items were scored: cancelled, or a limit), writes an `eval_task` event and logs one line to `log`.
// `itemProgress` sees the items as they are scored.
ChoiceEvalResult scoreTaskIntoStore(ChoiceScorer& scorer, const EvalTaskSpec& task,
                                    const std::vector<ChoiceItem>& items, const TaskScoreTarget& target,
                                    ProgressSink& itemProgress, ProgressSink& log, const CancelToken& cancel);

}  // namespace latentlab
