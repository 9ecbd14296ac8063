// An evaluation job (run spec kind "eval"): a model scored on multiple-choice
// tasks and the passkey grid, no training. Results go to the store as they
// are produced: a task's figures so far (marked partial) every few seconds
// and complete at its end; each passkey cell when its trials are done. A job
// killed midway leaves what it had, marked as such.
#include "jobs/eval_job.h"

#include <chrono>
#include <set>

#include <nlohmann/json.hpp>

#include "eval/task_scoring.h"
#include "latentlab/error.h"
#include "latentlab/events.h"
#include "latentlab/multiple_choice.h"
#include "latentlab/passkey.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// The job's overall progress as `progress` lines: each unit is a task item or
// a passkey trial; at most five lines a second.
class JobProgress final : public ProgressSink {
 public:
  JobProgress(const JobEnvironment& env, ProgressSink& inner, std::int64_t total)
      : m_env(env), m_inner(inner), m_total(total) {}
  void beginPart(std::int64_t units) {
    m_base += m_part;
    m_part = units;
  }
  void progress(std::string_view stage, double done, double total, std::string_view detail) override {
    m_inner.progress(stage, done, total, detail);
    const auto now = Clock::now();
    const bool last = total > 0 && done >= total;
    if (!last && now - m_last < std::chrono::milliseconds(200)) return;
    m_last = now;
    const auto at = m_base + static_cast<std::int64_t>(total > 0 ? static_cast<double>(m_part) * done / total : 0.0);
    if (m_env.lines) m_env.lines(eventLine(EngineEvent::progressOf(at, m_total, 0)));
  }
  void log(LogLevel level, std::string_view message) override { m_inner.log(level, message); }

 private:
  const JobEnvironment& m_env;
  ProgressSink& m_inner;
  std::int64_t m_total, m_base = 0, m_part = 0;
  Clock::time_point m_last{};
};

}  // namespace

RunResult runEvaluationJob(RunStore& store, std::int64_t runId, const JobEnvironment& env, const RunSpec& spec,
                           ProgressSink& progress, const CancelToken& cancel) {
  const std::int64_t target = spec.evaluatesRun > 0 ? spec.evaluatesRun : runId;
  const std::int64_t step = spec.evaluatesRun > 0 ? spec.evaluatesStep : 0;
  if (spec.evaluatesRun > 0) store.run(spec.evaluatesRun);  // throws naming the run when it is gone
  const std::string device = env.device.empty() ? spec.device : env.device;
  // Every task file is read before the model loads: a bad line fails the job
  // before anything is stored.
  std::vector<std::vector<ChoiceItem>> taskItems;
  std::int64_t units = 0;
  for (const EvalTaskSpec& t : spec.evalTasks) {
    taskItems.push_back(readTaskFile(t));
    const auto n = static_cast<std::int64_t>(taskItems.back().size());
    units += t.limit > 0 ? std::min(t.limit, n) : n;
  }
  if (!spec.passkey.file.empty())
    units += static_cast<std::int64_t>(spec.passkey.lengths.size() * spec.passkey.depths.size()) * spec.passkey.trials;
  JobProgress jobProgress(env, progress, units);
  // Results over a quantized cache are stored under their own task names.
  const std::string passkeyTask = kvQuantTaskName("passkey", spec.kvQuant);
  auto recordCell = [&](const PasskeyCell& c) {
    EvaluationRecord e;
    e.runId = target;
    e.step = step;
    e.task = passkeyTask;
    e.metric = passkeyMetricName(c.length, c.depth);
    e.value = static_cast<double>(c.correct()) / static_cast<double>(c.trials.size());
    e.items = static_cast<std::int64_t>(c.trials.size());
    e.partial = c.partial;
    store.addEvaluation(e);
  };
  // Resuming: what is already stored complete at this step is not scored again.
  std::set<std::string> done;
  if (env.resume) {
    for (const auto& e : store.listEvaluations(target)) {
      if (e.step == step && !e.partial) done.insert(e.task + "/" + e.metric);
    }
  }
  const auto complete = [&](const std::string& task, const std::string& metric) {
    return done.count(task + "/" + metric) > 0;
  };

  json summary = {{"model", spec.modelDir}, {"evaluates", {{"run", target}, {"step", step}}}, {"device", device}};
  if (spec.kvQuant.on()) summary["kv_quant"] = kvQuantLabel(spec.kvQuant);
  json tasks = json::object();
  RunResult result(RunStatus::Completed);
  if (!spec.evalTasks.empty()) {
    ChoiceEvalOptions o;
    o.model = spec.modelDir;
    o.device = device;
    o.kvQuant = spec.kvQuant;
    ChoiceScorer scorer(o);  // the model, loaded once for every task
    for (std::size_t k = 0; k < spec.evalTasks.size(); ++k) {
      EvalTaskSpec t = spec.evalTasks[k];
      t.name = kvQuantTaskName(t.name, spec.kvQuant);
      const auto n = static_cast<std::int64_t>(taskItems[k].size());
      jobProgress.beginPart(t.limit > 0 ? std::min(t.limit, n) : n);
      if (complete(t.name, "acc") && complete(t.name, "acc_norm")) {
        progress.log(LogLevel::Info, t.name + ": already scored, kept");
        tasks[t.name] = {{"resumed", true}};
        continue;
      }
      const TaskScoreTarget into{store, target, step, env.lines, std::chrono::seconds(2)};
      const ChoiceEvalResult r = scoreTaskIntoStore(scorer, t, taskItems[k], into, jobProgress, progress, cancel);
      tasks[t.name] = choiceScoresJson(r, static_cast<std::int64_t>(taskItems[k].size()));
      if (r.cancelled) break;
    }
    summary["eval_tasks"] = tasks;
  }
  json cells = json::array();
  if (!spec.passkey.file.empty() && !cancel.requested()) {
    PasskeyOptions p;
    p.model = spec.modelDir;
    p.haystack = spec.passkey.file;
    p.lengths = spec.passkey.lengths;
    p.depths = spec.passkey.depths;
    p.trials = spec.passkey.trials;
    p.seed = spec.passkey.seed;
    p.device = device;
    p.kvQuant = spec.kvQuant;
    p.skipCell = [&](int length, double depth) { return complete(passkeyTask, passkeyMetricName(length, depth)); };
    p.onCell = [&](const PasskeyCell& c) {
      recordCell(c);
      cells.push_back({{"length", c.length},
                       {"depth", c.depth},
                       {"correct", c.correct()},
                       {"trials", c.trials.size()},
                       {"partial", c.partial}});
    };
    jobProgress.beginPart(static_cast<std::int64_t>(p.lengths.size() * p.depths.size()) * p.trials);
    try {
      runPasskey(p, jobProgress, cancel);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Cancelled) throw;
    }
    summary["passkey"] = cells;
  }
  store.setSummary(runId, summary.dump());
  if (cancel.requested()) {
    result.status = RunStatus::Cancelled;
    result.error =
        Error(ErrorCode::Cancelled, "cancelled; the results so far are stored, the task cut short marked partial");
  }
  return result;
}

}  // namespace latentlab
