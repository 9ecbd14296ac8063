// An evaluation job (run spec kind "eval"): a model scored on multiple-choice
// tasks and the passkey grid, no training. Results go to the store as they
// are produced: a task's figures so far (marked partial) every few seconds
// and complete at its end; each passkey cell when its trials are done. A job
// killed midway leaves what it had, marked as such.
#include "jobs/eval_job.h"

#include <chrono>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "eval/task_scoring.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "latentlab/events.h"
#include "latentlab/multiple_choice.h"
#include "latentlab/passkey.h"
#include "train/data_pipeline.h"

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

// The model an evaluation scores and the step its results are stored at: the
// spec's model_dir, or the evaluated run's checkpoint at evaluates.step (its
// newest when the step is omitted), looked up now, when the job starts.
struct EvaluatedModel {
  std::string dir;
  std::int64_t target = 0;
  std::int64_t step = 0;
};

EvaluatedModel evaluatedModel(RunStore& store, std::int64_t runId, const RunSpec& spec) {
  EvaluatedModel m{spec.modelDir, runId, 0};
  if (spec.evaluatesRun <= 0) return m;
  m.target = spec.evaluatesRun;
  const RunRecord evaluated = store.run(spec.evaluatesRun);  // throws naming the run when it is gone
  m.step = spec.evaluatesStep;
  if (!m.dir.empty() && m.step >= 0) return m;
  const ArtifactRecord* chosen = nullptr;
  const auto checkpoints = store.listArtifacts(spec.evaluatesRun);
  for (const ArtifactRecord& a : checkpoints) {
    if (a.kind != "checkpoint" || !a.step) continue;
    if (m.step >= 0 ? *a.step == m.step : (chosen == nullptr || *a.step > *chosen->step)) chosen = &a;
  }
  if (chosen == nullptr) {
    if (!m.dir.empty()) {
      m.step = 0;
      return m;
    }
    throw Error(ErrorCode::BadInput,
                "run " + std::to_string(spec.evaluatesRun) + " ('" + evaluated.name + "') has no checkpoint" +
                    (m.step >= 0 ? " at step " + std::to_string(m.step) : std::string()) + " to evaluate",
                "Evaluate a run after it has saved a checkpoint (every run saves one when it completes).");
  }
  m.step = *chosen->step;
  if (m.dir.empty()) m.dir = (fs::path(chosen->path) / "model").string();  // a checkpoint keeps its model in model/
  return m;
}

// The validation tail of the spec's corpus (data.validation_share of its
// tokens, the ones a run's val/loss reads), tokenized as a run would.
std::vector<std::int64_t> validationTokens(const RunSpec& spec, const fs::path& modelDir, const JobEnvironment& env,
                                           ProgressSink& progress, const CancelToken& cancel) {
  const PreparedData data = prepareData(spec.data, modelDir, env.workspace / "cache", progress, cancel);
  const std::uint64_t n = data.shard.size();
  const auto v = static_cast<std::uint64_t>(std::floor(static_cast<double>(n) * spec.data.validationShare));
  if (v < 2) {
    throw Error(ErrorCode::BadData, "the validation tail of " + spec.data.corpus + " has " + std::to_string(v) +
                                        " tokens (" + std::to_string(n) + " at validation_share " +
                                        std::to_string(spec.data.validationShare) + "); at least 2 are needed");
  }
  std::vector<std::int64_t> ids(v);
  data.shard.copyTo(n - v, v, ids.data());
  return ids;
}

}  // namespace

RunResult runEvaluationJob(RunStore& store, std::int64_t runId, const JobEnvironment& env, const RunSpec& spec,
                           ProgressSink& progress, const CancelToken& cancel) {
  const EvaluatedModel model = evaluatedModel(store, runId, spec);
  if (model.dir != spec.modelDir)
    preflightEvalModel(model.dir, spec, "the model of run " + std::to_string(model.target));
  const std::int64_t target = model.target;
  const std::int64_t step = model.step;
  const std::string device = env.device.empty() ? spec.device : env.device;
  const std::vector<KvQuantSettings> caches = evalCaches(spec);
  // Every task file is read before the model loads: a bad line fails the job
  // before anything is stored.
  std::vector<std::vector<ChoiceItem>> taskItems;
  std::int64_t unitsPerCache = 0;
  for (const EvalTaskSpec& t : spec.evalTasks) {
    taskItems.push_back(readTaskFile(t));
    const auto n = static_cast<std::int64_t>(taskItems.back().size());
    unitsPerCache += t.limit > 0 ? std::min(t.limit, n) : n;
  }
  const std::int64_t passkeyUnits =
      static_cast<std::int64_t>(spec.passkey.lengths.size() * spec.passkey.depths.size()) * spec.passkey.trials;
  if (!spec.passkey.file.empty()) unitsPerCache += passkeyUnits;
  // Held-out loss counts as one unit per window it reads.
  std::vector<std::int64_t> heldOutIds;
  if (spec.heldOut.text == "validation") heldOutIds = validationTokens(spec, model.dir, env, progress, cancel);
  const std::int64_t heldOutUnits =
      spec.heldOut.text.empty() ? 0
      : heldOutIds.empty()
          ? 16
          : std::max<std::int64_t>(
                1, static_cast<std::int64_t>(spec.heldOut.maxTokens > 0
                                                 ? std::min<std::size_t>(heldOutIds.size(), spec.heldOut.maxTokens)
                                                 : heldOutIds.size()) /
                       spec.heldOut.seqLen);
  unitsPerCache += heldOutUnits;
  JobProgress jobProgress(env, progress, unitsPerCache * static_cast<std::int64_t>(caches.size()));
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

  json summary = {{"model", model.dir}, {"evaluates", {{"run", target}, {"step", step}}}, {"device", device}};
  json labels = json::array(), tasks = json::object(), cells = json::array(), heldOut = json::object();
  for (const KvQuantSettings& cache : caches) {
    if (cancel.requested()) break;
    labels.push_back(cache.on() ? kvQuantLabel(cache) : "full precision");
    // Results over a quantized cache are stored under their own task names.
    if (!spec.evalTasks.empty()) {
      ChoiceEvalOptions o;
      o.model = model.dir;
      o.device = device;
      o.kvQuant = cache;
      ChoiceScorer scorer(o);  // the model, loaded once for every task
      for (std::size_t k = 0; k < spec.evalTasks.size(); ++k) {
        EvalTaskSpec t = spec.evalTasks[k];
        t.name = kvQuantTaskName(t.name, cache);
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
    }
    if (!spec.passkey.file.empty() && !cancel.requested()) {
      const std::string passkeyTask = kvQuantTaskName("passkey", cache);
      PasskeyOptions p;
      p.model = model.dir;
      p.haystack = spec.passkey.file;
      p.lengths = spec.passkey.lengths;
      p.depths = spec.passkey.depths;
      p.trials = spec.passkey.trials;
      p.seed = spec.passkey.seed;
      p.device = device;
      p.kvQuant = cache;
      p.skipCell = [&](int length, double depth) { return complete(passkeyTask, passkeyMetricName(length, depth)); };
      p.onCell = [&](const PasskeyCell& c) {
        EvaluationRecord e;
        e.runId = target;
        e.step = step;
        e.task = passkeyTask;
        e.metric = passkeyMetricName(c.length, c.depth);
        e.value = static_cast<double>(c.correct()) / static_cast<double>(c.trials.size());
        e.items = static_cast<std::int64_t>(c.trials.size());
        e.partial = c.partial;
        store.addEvaluation(e);
        cells.push_back({{"cache", labels.back()},
                         {"length", c.length},
                         {"depth", c.depth},
                         {"correct", c.correct()},
                         {"trials", c.trials.size()},
                         {"partial", c.partial}});
      };
      jobProgress.beginPart(passkeyUnits);
      try {
        runPasskey(p, jobProgress, cancel);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::Cancelled) throw;
      }
    }
    if (!spec.heldOut.text.empty() && !cancel.requested()) {
      const std::string heldOutTask = kvQuantTaskName("held-out", cache);
      jobProgress.beginPart(heldOutUnits);
      if (complete(heldOutTask, "loss")) {
        progress.log(LogLevel::Info, heldOutTask + ": already scored, kept");
        heldOut[heldOutTask] = {{"resumed", true}};
      } else {
        EvalOptions o;
        o.model = model.dir;
        if (heldOutIds.empty())
          o.textFile = spec.heldOut.text;
        else
          o.tokens = heldOutIds;
        o.seqLen = spec.heldOut.seqLen;
        o.batchSize = spec.heldOut.batch;
        o.maxTokens = spec.heldOut.maxTokens;
        o.device = device;
        o.kvQuant = cache;
        o.kvChunk = spec.heldOut.chunk;
        try {
          const EvalResult r = evaluate(o, jobProgress, cancel);
          EvaluationRecord e;
          e.runId = target;
          e.step = step;
          e.task = heldOutTask;
          e.metric = "loss";
          e.value = r.meanLoss;
          e.items = r.tokens;
          store.addEvaluation(e);
          heldOut[heldOutTask] = {{"loss", r.meanLoss}, {"tokens", r.tokens}};
        } catch (const Error& e) {
          if (e.code() != ErrorCode::Cancelled) throw;
        }
      }
    }
  }
  summary["kv_caches"] = labels;
  if (!spec.evalTasks.empty()) summary["eval_tasks"] = tasks;
  if (!spec.passkey.file.empty()) summary["passkey"] = cells;
  if (!spec.heldOut.text.empty()) summary["held_out"] = heldOut;
  store.setSummary(runId, summary.dump());
  RunResult result(RunStatus::Completed);
  if (cancel.requested()) {
    result.status = RunStatus::Cancelled;
    result.error =
        Error(ErrorCode::Cancelled, "cancelled; the results so far are stored, the task cut short marked partial");
  }
  return result;
}

}  // namespace latentlab
