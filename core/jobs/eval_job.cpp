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
  void setTotal(std::int64_t units) { m_total = units; }
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

// One evaluation job: what it scores over each cache in turn, each part
// stored as it is produced under the evaluated run at its step.
class EvaluationJob {
 public:
  EvaluationJob(RunStore& store, std::int64_t runId, const JobEnvironment& env, const RunSpec& spec,
                ProgressSink& progress, const CancelToken& cancel)
      : m_store(store),
        m_env(env),
        m_spec(spec),
        m_progress(progress),
        m_cancel(cancel),
        m_model(evaluatedModel(store, runId, spec)),
        m_device(env.device.empty() ? spec.device : env.device),
        m_jobProgress(env, progress, 0) {
    if (m_model.dir != spec.modelDir)
      preflightEvalModel(m_model.dir, spec, "the model of run " + std::to_string(m_model.target));
  }

  // Reads everything that can be wrong before the model loads (a bad task
  // line fails the job before anything is stored), then scores each cache.
  json run() {
    const std::vector<KvQuantSettings> caches = evalCaches(m_spec);
    std::int64_t unitsPerCache = 0;
    for (const EvalTaskSpec& t : m_spec.evalTasks) {
      m_taskItems.push_back(readTaskFile(t));
      unitsPerCache += itemsScored(t, m_taskItems.back());
    }
    if (!m_spec.passkey.file.empty()) unitsPerCache += passkeyUnits();
    if (m_spec.heldOut.text == "validation")
      m_heldOutIds = validationTokens(m_spec, m_model.dir, m_env, m_progress, m_cancel);
    unitsPerCache += heldOutUnits();
    m_jobProgress.setTotal(unitsPerCache * static_cast<std::int64_t>(caches.size()));
    // Resuming: what is already stored complete at this step is not scored again.
    if (m_env.resume) {
      for (const auto& e : m_store.listEvaluations(m_model.target))
        if (e.step == m_model.step && !e.partial) m_done.insert(e.task + "/" + e.metric);
    }
    for (const KvQuantSettings& cache : caches) {
      if (m_cancel.requested()) break;
      m_labels.push_back(cache.on() ? kvQuantLabel(cache) : "full precision");
      if (!m_spec.evalTasks.empty()) scoreTasks(cache);
      if (!m_spec.passkey.file.empty() && !m_cancel.requested()) scorePasskey(cache);
      if (!m_spec.heldOut.text.empty() && !m_cancel.requested()) scoreHeldOut(cache);
    }
    json summary = {{"model", m_model.dir},
                    {"evaluates", {{"run", m_model.target}, {"step", m_model.step}}},
                    {"device", m_device},
                    {"kv_caches", m_labels}};
    if (!m_spec.evalTasks.empty()) summary["eval_tasks"] = m_tasks;
    if (!m_spec.passkey.file.empty()) summary["passkey"] = m_cells;
    if (!m_spec.heldOut.text.empty()) summary["held_out"] = m_heldOut;
    return summary;
  }

 private:
  static std::int64_t itemsScored(const EvalTaskSpec& t, const std::vector<ChoiceItem>& items) {
    const auto n = static_cast<std::int64_t>(items.size());
    return t.limit > 0 ? std::min(t.limit, n) : n;
  }
  std::int64_t passkeyUnits() const {
    return static_cast<std::int64_t>(m_spec.passkey.lengths.size() * m_spec.passkey.depths.size()) *
           m_spec.passkey.trials;
  }
  // Held-out loss counts as one unit per window it reads (a text file's length is not known yet).
  std::int64_t heldOutUnits() const {
    if (m_spec.heldOut.text.empty()) return 0;
    if (m_heldOutIds.empty()) return 16;
    std::size_t tokens = m_heldOutIds.size();
    if (m_spec.heldOut.maxTokens > 0) tokens = std::min<std::size_t>(tokens, m_spec.heldOut.maxTokens);
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(tokens) / m_spec.heldOut.seqLen);
  }
  bool complete(const std::string& task, const std::string& metric) const {
    return m_done.count(task + "/" + metric) > 0;
  }
  void store(const std::string& task, const std::string& metric, double value, std::int64_t items, bool partial) {
    EvaluationRecord e;
    e.runId = m_model.target;
    e.step = m_model.step;
    e.task = task;
    e.metric = metric;
    e.value = value;
    e.items = items;
    e.partial = partial;
    m_store.addEvaluation(e);
  }

  // The multiple-choice tasks, the model loaded once for all of them.
  void scoreTasks(const KvQuantSettings& cache) {
    ChoiceEvalOptions o;
    o.model = m_model.dir;
    o.device = m_device;
    o.kvQuant = cache;
    ChoiceScorer scorer(o);
    for (std::size_t k = 0; k < m_spec.evalTasks.size(); ++k) {
      EvalTaskSpec t = m_spec.evalTasks[k];
      t.name = kvQuantTaskName(t.name, cache);  // results over a quantized cache under their own names
      m_jobProgress.beginPart(itemsScored(t, m_taskItems[k]));
      if (complete(t.name, "acc") && complete(t.name, "acc_norm")) {
        m_progress.log(LogLevel::Info, t.name + ": already scored, kept");
        m_tasks[t.name] = {{"resumed", true}};
        continue;
      }
      const TaskScoreTarget into{m_store, m_model.target, m_model.step, m_env.lines, std::chrono::seconds(2)};
      const ChoiceEvalResult r =
          scoreTaskIntoStore(scorer, t, m_taskItems[k], into, m_jobProgress, m_progress, m_cancel);
      m_tasks[t.name] = choiceScoresJson(r, static_cast<std::int64_t>(m_taskItems[k].size()));
      if (r.cancelled) break;
    }
  }

  // The passkey grid, each cell stored when its trials are done.
  void scorePasskey(const KvQuantSettings& cache) {
    const std::string task = kvQuantTaskName("passkey", cache);
    PasskeyOptions p;
    p.model = m_model.dir;
    p.haystack = m_spec.passkey.file;
    p.lengths = m_spec.passkey.lengths;
    p.depths = m_spec.passkey.depths;
    p.trials = m_spec.passkey.trials;
    p.seed = m_spec.passkey.seed;
    p.device = m_device;
    p.kvQuant = cache;
    p.skipCell = [&](int length, double depth) { return complete(task, passkeyMetricName(length, depth)); };
    p.onCell = [&](const PasskeyCell& c) {
      store(task, passkeyMetricName(c.length, c.depth),
            static_cast<double>(c.correct()) / static_cast<double>(c.trials.size()),
            static_cast<std::int64_t>(c.trials.size()), c.partial);
      m_cells.push_back({{"cache", m_labels.back()},
                         {"length", c.length},
                         {"depth", c.depth},
                         {"correct", c.correct()},
                         {"trials", c.trials.size()},
                         {"partial", c.partial}});
    };
    m_jobProgress.beginPart(passkeyUnits());
    try {
      runPasskey(p, m_jobProgress, m_cancel);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Cancelled) throw;
    }
  }

  // The mean loss over the held-out text, as `eval --text` computes it.
  void scoreHeldOut(const KvQuantSettings& cache) {
    const std::string task = kvQuantTaskName("held-out", cache);
    m_jobProgress.beginPart(heldOutUnits());
    if (complete(task, "loss")) {
      m_progress.log(LogLevel::Info, task + ": already scored, kept");
      m_heldOut[task] = {{"resumed", true}};
      return;
    }
    EvalOptions o;
    o.model = m_model.dir;
    if (m_heldOutIds.empty())
      o.textFile = m_spec.heldOut.text;
    else
      o.tokens = m_heldOutIds;
    o.seqLen = m_spec.heldOut.seqLen;
    o.batchSize = m_spec.heldOut.batch;
    o.maxTokens = m_spec.heldOut.maxTokens;
    o.device = m_device;
    o.kvQuant = cache;
    o.kvChunk = m_spec.heldOut.chunk;
    try {
      const EvalResult r = evaluate(o, m_jobProgress, m_cancel);
      store(task, "loss", r.meanLoss, r.tokens, false);
      m_heldOut[task] = {{"loss", r.meanLoss}, {"tokens", r.tokens}};
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Cancelled) throw;
    }
  }

  RunStore& m_store;
  const JobEnvironment& m_env;
  const RunSpec& m_spec;
  ProgressSink& m_progress;
  const CancelToken& m_cancel;
  const EvaluatedModel m_model;
  const std::string m_device;
  JobProgress m_jobProgress;
  std::vector<std::vector<ChoiceItem>> m_taskItems;
  std::vector<std::int64_t> m_heldOutIds;
  std::set<std::string> m_done;
  json m_labels = json::array(), m_tasks = json::object(), m_cells = json::array(), m_heldOut = json::object();
};

}  // namespace

RunResult runEvaluationJob(RunStore& store, std::int64_t runId, const JobEnvironment& env, const RunSpec& spec,
                           ProgressSink& progress, const CancelToken& cancel) {
  EvaluationJob job(store, runId, env, spec, progress, cancel);
  store.setSummary(runId, job.run().dump());
  RunResult result(RunStatus::Completed);
  if (cancel.requested()) {
    result.status = RunStatus::Cancelled;
    result.error =
        Error(ErrorCode::Cancelled, "cancelled; the results so far are stored, the task cut short marked partial");
  }
  return result;
}

}  // namespace latentlab
