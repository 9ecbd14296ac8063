// `latentlab-engine run` and `latentlab-engine runs`: jobs over a workspace DB.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_args.h"
#include "common_paths.h"
#include "engine_cli.h"
#include "latentlab/distributed.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "latentlab/events.h"
#include "latentlab/memory_plan.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"
#include "latentlab/train.h"

namespace latentlab::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int exitCodeFor(RunStatus s) {
  if (s == RunStatus::Completed) return 0;
  if (s == RunStatus::Cancelled) return 2;
  return 1;
}

json planJson(const MemoryPlan& p) {
  json items = json::array();
  for (const MemoryItem& i : p.items) items.push_back({{"name", i.name}, {"bytes", i.bytes}, {"detail", i.detail}});
  json j = {{"precision", p.precision},
            {"cuda", p.cuda},
            {"ranks", p.ranks},
            {"parameters", p.parameters},
            {"tokens_per_micro_batch", p.tokensPerMicroBatch},
            {"items", items},
            {"peak_bytes", p.peakBytes},
            {"peak_phase", p.peakPhase},
            {"host_bytes", p.hostBytes},
            {"available_bytes", p.availableBytes ? json(p.availableBytes) : json(nullptr)},
            {"fits", p.known() ? json(p.fits()) : json(nullptr)},
            {"largest_micro_batch", p.known() ? json(p.largestMicroBatch) : json(nullptr)}};
  if (p.peakWithRecompute > 0) j["peak_bytes_with_recompute"] = p.peakWithRecompute;
  return j;
}

// run SPEC --check: the spec's checks and the memory plan on its devices; no
// database, nothing loaded. Exit 0 when it fits, 4 when it does not.
// "80G", "80GiB", "24GB", "1e10": bytes (G/GiB binary, GB decimal).
std::int64_t parseBytes(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"B", 1},
                                                          {"K", 1024.0},
                                                          {"KiB", 1024.0},
                                                          {"KB", 1e3},
                                                          {"M", 1048576.0},
                                                          {"MiB", 1048576.0},
                                                          {"MB", 1e6},
                                                          {"G", 1073741824.0},
                                                          {"GiB", 1073741824.0},
                                                          {"GB", 1e9},
                                                          {"T", 1099511627776.0},
                                                          {"TiB", 1099511627776.0},
                                                          {"TB", 1e12}};
  for (const auto& [name, factor] : kUnits) {
    if (used > 0 && unit == name && value > 0) return static_cast<std::int64_t>(value * factor);
  }
  throw Error(ErrorCode::BadInput, "--available '" + text + "': expected a size such as 80G, 80GiB or 24GB");
}

// The run an eval job scores must be there, and the step its scores go
// under one that run has, before the job is registered.
void checkEvaluatedRun(RunStore& store, const RunSpec& spec, const fs::path& specPath, const fs::path& db) {
  RunRecord evaluated;
  try {
    evaluated = store.run(spec.evaluatesRun);
  } catch (const Error&) {
    throw Error(
        ErrorCode::BadSpec,
        specPath.string() + ": evaluates.run " + std::to_string(spec.evaluatesRun) + " is not a run of " + db.string(),
        "Name a run of this workspace (runs list).");
  }
  // Its scores go under a step the run has: 0 (before training) to its last.
  std::int64_t lastStep = INT64_MAX;  // unknown when its stored spec does not say
  const json stored = json::parse(evaluated.specJson, nullptr, /*allow_exceptions=*/false);
  if (stored.is_object() && stored.value("kind", std::string()) == "eval")
    lastStep = 0;
  else if (stored.is_object() && stored.contains("steps") && stored["steps"].is_number_integer())
    lastStep = stored["steps"].get<std::int64_t>();
  // Omitted (-1): the run's newest checkpoint when the job starts.
  if (spec.evaluatesStep < -1 || spec.evaluatesStep > lastStep) {
    throw Error(ErrorCode::BadSpec,
                specPath.string() + ": evaluates.step " + std::to_string(spec.evaluatesStep) +
                    " is not a step of run " + std::to_string(spec.evaluatesRun) + " (0 to " +
                    std::to_string(lastStep) + ")",
                "Name the step of the checkpoint the model folder holds.");
  }
}

int checkSpec(const fs::path& specPath, const std::string& deviceOverride, bool asJson,
              const std::optional<std::string>& available, const fs::path& workspace) {
  RunSpec spec = loadRunSpec(specPath);
  if (!deviceOverride.empty()) spec.device = deviceOverride;
  validateRunSpec(spec, specPath.string());
  // The checks a registration makes, out_dir's place included (nothing is claimed).
  preflightRunSpec(spec, specPath.string(), workspace);
  std::int64_t sourceParameters = 0;
  const ModelConfig cfg = plannedModelConfig(spec, &sourceParameters);
  const std::int64_t free = available ? parseBytes(*available) : availableBytesOn(spec.device, listDevices());
  const MemoryPlan plan =
      spec.kind == RunKind::Eval ? planInferenceMemory(cfg, spec, free) : planMemory(cfg, spec, free, sourceParameters);
  if (asJson) {
    json j = planJson(plan);
    j["spec"] = specPath.string();
    j["device"] = spec.device;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s: %s on %s\n%s", specPath.string().c_str(), std::string(choiceName(spec.kind)).c_str(),
                spec.device.c_str(), describeMemoryPlan(plan).c_str());
  }
  return plan.fits() ? 0 : 4;
}

}  // namespace

int cmdRun(int argc, char** argv) {
  Args args(argc, argv, 2, {"help", "quiet", "no-resume", "check", "json", "ignore-memory-plan", "kv-allocation"},
            {"db", "run", "workspace", "device", "available"});
  if (args.flag("check") && args.flag("kv-allocation") && !args.flag("help") && !args.positionals().empty()) {
    const fs::path specPath = args.positionals()[0];
    RunSpec spec = loadRunSpec(specPath);
    validateRunSpec(spec, specPath.string());
    StderrProgress progress(args.flag("quiet"));
    printAllocation(planRunKvBudget(spec,
                                    args.get("workspace") ? fs::path(*args.get("workspace"))
                                    : args.get("db")      ? workspaceOf(*args.get("db"))
                                                          : fs::current_path(),
                                    progress, cancelToken()),
                    args.flag("json"));
    return 0;
  }
  if (args.flag("check") && !args.flag("help") && !args.positionals().empty())
    return checkSpec(args.positionals()[0], args.get("device", ""), args.flag("json"), args.get("available"),
                     args.get("workspace") ? fs::path(*args.get("workspace"))
                     : args.get("db")      ? workspaceOf(*args.get("db"))
                                           : fs::current_path());
  if (args.flag("help") || !args.get("db") || (args.positionals().empty() && !args.get("run"))) {
    std::printf(
        "usage: latentlab-engine run SPEC.json --db FILE [options]\n"
        "       latentlab-engine run --db FILE --run ID [options]\n"
        "       latentlab-engine run SPEC.json --check [--json] [--device D] [--available SIZE]\n\n"
        "Runs a training job. With SPEC.json a new run is registered in the DB first; with --run\n"
        "an existing run (as the GUI launches them) is started or resumed from its last checkpoint.\n"
        "Metrics go to the DB; stdout carries one JSON object per line (docs/line_protocol.md).\n"
        "A 'cancel' line on stdin or SIGTERM stops after the current step, checkpoints, exits 2.\n"
        "Data parallel: started by torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or\n"
        "srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; MASTER_ADDR exported), every rank runs the same\n"
        "command; gradients are averaged over c10d (NCCL on CUDA, Gloo on CPU), micro_batch is per rank,\n"
        "rank 0 writes the DB and checkpoints. LATENTLAB_DIST=off ignores those variables.\n"
        "  --db FILE         the workspace database (created if missing)\n"
        "  --run ID          the run to start or resume\n"
        "  --workspace DIR   caches and checkpoints (default: the DB's folder)\n"
        "  --device D        cpu, cuda, cuda:N (default: the spec's)\n"
        "  --no-resume       start from step 0 even when a checkpoint exists\n"
        "  --quiet           no progress bar on stderr\n"
        "  --check           check the spec and print the memory plan per device (weights, optimizer\n"
        "                    state, activations, ...) against the free memory; runs nothing (exit 4: does not fit)\n"
        "  --json            with --check: the plan as JSON\n"
        "  --available SIZE  with --check: plan for devices of SIZE free each (80G, 24GB) instead of this machine's\n"
        "  --kv-allocation   with --check: the per-layer d_kv the spec's conversion.kv_budget gives (tokenizes the\n"
        "                    run's data into the workspace cache, loads the base, calibrates as the run would)\n"
        "  --ignore-memory-plan  start even when the plan says the run does not fit\n"
        "exit codes: 0 completed, 1 failed, 2 cancelled\n");
    return args.flag("help") ? 0 : 1;
  }
  const fs::path db = *args.get("db");
  const DistEnv dist = readDistEnv();
  std::int64_t runId = 0;
  std::string specJson;
  std::optional<RunSpec> newSpec;
  if (!args.positionals().empty()) {
    // Everything that can be checked is checked before the database is
    // touched: a spec that cannot run registers no run.
    const fs::path specPath = args.positionals()[0];
    newSpec = loadRunSpec(specPath);
    preflightRunSpec(*newSpec, specPath.string(),
                     args.get("workspace") ? fs::path(*args.get("workspace")) : workspaceOf(db));
    if (!args.flag("ignore-memory-plan") && dist.worldSize == 1) {
      const std::string why = memoryPlanVerdict(*newSpec, args.get("device", newSpec->device));
      if (!why.empty()) throw Error(ErrorCode::BadSpec, specPath.string() + ": " + why, kMemoryHint);
    }
  }
  if (newSpec && newSpec->evaluatesRun > 0 && !fs::exists(db)) {
    // No database yet, so no run to evaluate: refused before one is created.
    throw Error(ErrorCode::BadSpec,
                args.positionals()[0] + ": evaluates.run " + std::to_string(newSpec->evaluatesRun) +
                    " is not a run of " + db.string() + " (the database does not exist)",
                "Name a run of this workspace (runs list).");
  }
  RunStore store(db, newSpec ? StoreOpen::CreateIfMissing : StoreOpen::MustExist);
  if (newSpec) {
    const fs::path specPath = args.positionals()[0];
    const RunSpec& spec = *newSpec;
    if (spec.evaluatesRun > 0) checkEvaluatedRun(store, spec, specPath, db);
    specJson = runSpecToJson(spec);
    // Rank 0 registers the run; the other ranks learn its ID when they join it.
    if (dist.writesMetrics()) {
      runId = store.createRun(std::nullopt, spec.name.empty() ? specPath.stem().string() : spec.name, spec.kind,
                              specJson, args.get("device", spec.device));
    }
  } else {
    runId = args.getInt64("run", 0, 1, INT64_MAX);
    store.run(runId);  // throws when absent
  }
  JobEnvironment env;
  env.workspace = args.get("workspace") ? fs::path(*args.get("workspace")) : workspaceOf(db);
  env.device = args.get("device", "");
  env.resume = !args.flag("no-resume");
  env.checkMemory = !args.flag("ignore-memory-plan");
  env.dist = dist;
  env.specJson = specJson;
  std::mutex outMutex;
  env.lines = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(outMutex);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  };
  if (dist.writesMetrics()) {
    env.lines(eventLine(EngineEvent::hello(runId, static_cast<std::int64_t>(::getpid()))));
  } else {
    env.lines = nullptr;  // one event stream per job: rank 0's
  }
  watchStdinForCancel();
  StderrProgress progress(args.flag("quiet") || !dist.writesMetrics());
  RunResult r = runJob(store, runId, env, progress, cancelToken());
  if (r.status == RunStatus::Failed) {
    std::fprintf(stderr, "error: run %lld %s: %s\n", static_cast<long long>(runId),
                 r.notStarted ? "not started" : "failed", r.errorText().c_str());
  }
  return exitCodeFor(r.status);
}

int cmdRuns(int argc, char** argv) {
  Args args(argc, argv, 2, {"help", "json"}, {"db", "out", "experiment"});
  const auto& pos = args.positionals();
  if (args.flag("help") || !args.get("db") || pos.empty()) {
    std::printf(
        "usage: latentlab-engine runs list --db FILE [--experiment ID] [--json]\n"
        "       latentlab-engine runs show ID --db FILE [--json]\n"
        "       latentlab-engine runs export ID --db FILE --out FILE.csv\n\n"
        "Lists runs (id, status, name, kind, steps, last train/val loss), shows one run's spec,\n"
        "summary, events and artifacts, or exports all its metrics as CSV.\n");
    return args.flag("help") ? 0 : 1;
  }
  // Reading verbs never write: they work on a read-only filesystem too.
  RunStore store(*args.get("db"), StoreOpen::ReadOnly);
  const std::string& sub = pos[0];
  const double now = storeNow();
  if (sub == "list" || sub == "show") {  // a damaged file is said, not listed as if whole
    std::string check;
    try {
      check = store.quickCheck();
    } catch (const Error& e) {
      check = e.message();
    }
    if (check != "ok") {
      std::fprintf(stderr,
                   "warning: %s is damaged (%s); what follows may be incomplete. Restore it from a backup "
                   "or recover it with `sqlite3 FILE .recover`.\n",
                   args.get("db")->c_str(), check.c_str());
    }
  }
  if (sub == "list") {
    RunFilter filter;
    if (args.get("experiment")) filter.experimentId = args.getInt64("experiment", 0, 1, INT64_MAX);
    json out = json::array();
    if (!args.flag("json"))
      std::printf("%5s  %-10s  %-9s  %-17s  %7s  %10s  %10s\n", "id", "status", "device", "kind", "step", "train",
                  "val");
    for (const auto& r : store.listRuns(filter)) {
      auto last = [&](const char* name) -> std::optional<double> {
        auto s = store.lastStep(r.id, name);
        if (!s) return std::nullopt;
        auto pts = store.rowsSince(r.id, name, *s - 1);
        if (pts.empty()) return std::nullopt;
        return pts.back().value;
      };
      auto step = store.lastStep(r.id, "train/loss");
      auto tl = last("train/loss"), vl = last("val/loss");
      // "running" only while the engine's lease is live: a killed engine's run reads crashed.
      const RunStatus status = observedStatus(r, now);
      if (args.flag("json")) {
        out.push_back({{"id", r.id},
                       {"name", r.name},
                       {"status", runStatusName(status)},
                       {"kind", r.kind},
                       {"device", r.device},
                       {"step", step ? json(*step) : json(nullptr)},
                       {"train_loss", tl ? json(*tl) : json(nullptr)},
                       {"val_loss", vl ? json(*vl) : json(nullptr)}});
      } else {
        std::printf("%5lld  %-10s  %-9s  %-17s  %7s  %10s  %10s  %s\n", static_cast<long long>(r.id),
                    runStatusName(status), r.device.c_str(), r.kind.c_str(), step ? std::to_string(*step).c_str() : "-",
                    tl ? std::to_string(*tl).substr(0, 8).c_str() : "-",
                    vl ? std::to_string(*vl).substr(0, 8).c_str() : "-", r.name.c_str());
      }
    }
    if (args.flag("json")) std::cout << out.dump(2) << "\n";
    return 0;
  }
  if (pos.size() < 2) throw Error(ErrorCode::BadInput, "runs " + sub + " needs a run ID");
  const std::int64_t id = parseInteger(pos[1], "run ID", 1, INT64_MAX);
  if (sub == "show") {
    RunRecord r = store.run(id);
    const LeaseCheck lease = checkLease(r, now);
    json j = {{"id", r.id},
              {"name", r.name},
              {"status", runStatusName(observedStatus(r, now))},
              {"kind", r.kind},
              {"device", r.device},
              {"error", r.error},
              {"spec", r.specJson.empty() ? json(nullptr) : json::parse(r.specJson)},
              {"summary", r.summaryJson.empty() ? json(nullptr) : json::parse(r.summaryJson)},
              {"metrics", store.metricNames(id)},
              {"metric_rows", store.metricCount(id)},
              {"store", {{"filesystem", store.filesystem()}, {"journal", store.journal()}}}};
    json ev = json::array();
    for (const auto& e : store.listEvents(id)) ev.push_back({{"kind", e.kind}, {"message", e.message}});
    j["events"] = ev;
    json ar = json::array();
    for (const auto& a : store.listArtifacts(id))
      ar.push_back({{"kind", a.kind}, {"path", a.path}, {"step", a.step ? json(*a.step) : json(nullptr)}});
    j["artifacts"] = ar;
    json evals = json::array();
    for (const auto& e : store.listEvaluations(id)) {
      evals.push_back({{"step", e.step},
                       {"task", e.task},
                       {"metric", e.metric},
                       {"value", e.value},
                       {"stderr", e.stderrValue},
                       {"items", e.items},
                       {"partial", e.partial}});
    }
    j["evaluations"] = evals;
    if (lease.state != LeaseState::Free) {
      j["owner"] = {{"engine", lease.owner}, {"live", lease.state == LeaseState::Live}};
      if (!lease.reason.empty()) j["owner"]["stale_because"] = lease.reason;
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (sub == "export") {
    if (!args.get("out")) throw Error(ErrorCode::BadInput, "runs export needs --out FILE.csv");
    store.exportCsv(id, *args.get("out"));
    std::printf("wrote %s (%llu rows)\n", args.get("out")->c_str(),
                static_cast<unsigned long long>(store.metricCount(id)));
    return 0;
  }
  throw Error(ErrorCode::BadInput, "unknown runs command '" + sub + "'", "Use list, show or export.");
}

}  // namespace latentlab::cli
