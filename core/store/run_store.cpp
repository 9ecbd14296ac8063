// RunStore: opening and migrating the file; experiments, runs and status
// transitions, events, artifacts and tags. Metrics live in metric_store.cpp.
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <fstream>
#include <mutex>
#include <sstream>

#include "latentlab/error.h"
#include "store/run_store_impl.h"
#include "store/schema.h"

namespace latentlab {

namespace {

constexpr const char* kRunColumns =
    "id, experiment_id, name, kind, status, spec_json, device, created_at, started_at, finished_at, "
    "error, summary_json, pid, heartbeat_at, owner_host, owner_start, uid, color";

void requireJson(std::string_view json, const char* field) {
  if (!nlohmann::json::accept(json)) {
    throw Error(ErrorCode::BadInput, std::string(field) + ": not valid JSON",
                "Pass a JSON document (an object such as {} at least).");
  }
}

void requireText(std::string_view text, const char* field) {
  if (text.empty()) throw Error(ErrorCode::BadInput, std::string(field) + ": must not be empty");
}

RunRecord readRun(const Statement& st, const std::filesystem::path& dbPath) {
  RunRecord r;
  r.id = st.columnInt(0);
  r.experimentId = st.columnOptInt(1);
  r.name = st.columnText(2);
  r.kind = st.columnText(3);
  try {
    r.status = parseRunStatus(st.columnText(4));
  } catch (const Error& e) {
    throw Error(ErrorCode::Store, dbPath.string() + ": run " + std::to_string(r.id) + ": " + e.message());
  }
  r.specJson = st.columnText(5);
  r.device = st.columnText(6);
  r.createdAt = st.columnDouble(7);
  r.startedAt = st.columnOptDouble(8);
  r.finishedAt = st.columnOptDouble(9);
  r.error = st.columnText(10);
  r.summaryJson = st.columnText(11);
  r.pid = st.columnOptInt(12);
  r.heartbeatAt = st.columnOptDouble(13);
  r.ownerHost = st.columnText(14);
  r.ownerStart = st.columnText(15);
  r.uid = st.columnText(16);
  r.color = st.columnText(17);
  return r;
}

std::string readSmallFile(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Field 22 of /proc/<pid>/stat: the start time in clock ticks after boot
// (the command name in field 2 may hold spaces: count from its ')').
std::string processStartTicks(std::int64_t pid) {
  const std::string stat = readSmallFile(("/proc/" + std::to_string(pid) + "/stat").c_str());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && (in >> field); ++i) {
    if (i == 22) return field;
  }
  return {};
}

std::string bootId() {
  std::string id = readSmallFile("/proc/sys/kernel/random/boot_id");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

bool transitionAllowed(RunStatus from, RunStatus to) {
  if (from == to) return true;
  if (isTerminal(from) && isTerminal(to)) return false;  // e.g. completed must not become crashed
  if (from == RunStatus::Queued && to == RunStatus::Completed) return false;
  return true;
}

}  // namespace

const char* runStatusName(RunStatus status) {
  switch (status) {
    case RunStatus::Queued:
      return "queued";
    case RunStatus::Running:
      return "running";
    case RunStatus::Completed:
      return "completed";
    case RunStatus::Failed:
      return "failed";
    case RunStatus::Cancelled:
      return "cancelled";
    case RunStatus::Crashed:
      return "crashed";
  }
  return "unknown";
}

RunStatus parseRunStatus(std::string_view name) {
  for (RunStatus s : {RunStatus::Queued, RunStatus::Running, RunStatus::Completed, RunStatus::Failed,
                      RunStatus::Cancelled, RunStatus::Crashed}) {
    if (name == runStatusName(s)) return s;
  }
  throw Error(ErrorCode::BadInput, "status: unknown run status '" + std::string(name) + "'",
              "Use one of queued, running, completed, failed, cancelled, crashed.");
}

bool isTerminal(RunStatus status) {
  return status != RunStatus::Queued && status != RunStatus::Running;
}

const ProcessIdentity& ProcessIdentity::current() {
  // Computed once per process; a forked child (pid changed) computes its own.
  static std::mutex mutex;
  static ProcessIdentity self;
  std::lock_guard<std::mutex> lock(mutex);
  if (self.pid != static_cast<std::int64_t>(::getpid())) {
    ProcessIdentity p;
    p.pid = static_cast<std::int64_t>(::getpid());
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) p.host = host;
    const std::string ticks = processStartTicks(p.pid);
    if (!ticks.empty()) p.startToken = bootId() + ":" + ticks;
    self = p;
  }
  return self;
}

bool processAlive(std::int64_t pid, const std::string& startToken) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  if (startToken.empty()) return true;  // recorded without a token: the pid is all we know
  const std::string ticks = processStartTicks(pid);
  return ticks.empty() || startToken == bootId() + ":" + ticks;
}

LeaseCheck checkLease(const RunRecord& run, double now) {
  LeaseCheck c;
  if (!run.pid) return c;
  const ProcessIdentity& self = ProcessIdentity::current();
  const bool here = run.ownerHost.empty() || run.ownerHost == self.host;
  c.owner =
      "engine pid " + std::to_string(*run.pid) + " on host " + (run.ownerHost.empty() ? self.host : run.ownerHost);
  if (here) {
    if (processAlive(*run.pid, run.ownerStart)) {
      c.state = LeaseState::Live;
    } else {
      c.state = LeaseState::Stale;
      c.reason = "process " + std::to_string(*run.pid) + " is not running";
    }
    return c;
  }
  const double age = run.heartbeatAt ? now - *run.heartbeatAt : 1e300;
  if (age <= kLeaseTimeoutSeconds) {
    c.state = LeaseState::Live;
  } else {
    c.state = LeaseState::Stale;
    c.reason = run.heartbeatAt ? "no heartbeat for " + std::to_string(static_cast<long long>(age)) + " s"
                               : "no heartbeat recorded";
  }
  return c;
}

RunStatus observedStatus(const RunRecord& run, double now) {
  if (run.status == RunStatus::Running && checkLease(run, now).state != LeaseState::Live) return RunStatus::Crashed;
  return run.status;
}

double storeNow() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

void RunStore::Impl::runNotFound(std::int64_t runId) const {
  throw Error(ErrorCode::Store, db.path().string() + ": run " + std::to_string(runId) + " not found",
              "The run may have been deleted; refresh the run list.");
}

void RunStore::Impl::requireRun(std::int64_t runId) {
  Statement st(db, "SELECT 1 FROM runs WHERE id = ?", "look up run");
  if (!st.bind(1, runId).step()) runNotFound(runId);
}

RunStore::RunStore(const std::filesystem::path& path, StoreOpen mode)
    : m_impl(std::make_shared<Impl>(path, mode == StoreOpen::CreateIfMissing, mode == StoreOpen::ReadOnly)) {
  if (mode != StoreOpen::ReadOnly) {
    migrateStore(m_impl->db, storeMigrations());
  } else if (schemaVersion() != latestStoreVersion()) {
    throw Error(ErrorCode::Store,
                path.string() + ": schema version " + std::to_string(schemaVersion()) + ", this engine reads " +
                    std::to_string(latestStoreVersion()),
                "Open it writable once (any run command or the workbench) to upgrade it.");
  }
}

std::string RunStore::quickCheck() const {
  Statement st(m_impl->db, "PRAGMA quick_check(1)", "quick check");
  return st.step() ? st.columnText(0) : std::string("no answer");
}

std::string RunStore::filesystem() const {
  return m_impl->db.filesystem().name;
}

std::string RunStore::journal() const {
  return journalModeName(m_impl->db.journalMode());
}

RunStore::~RunStore() = default;
RunStore::RunStore(RunStore&&) noexcept = default;
RunStore& RunStore::operator=(RunStore&&) noexcept = default;

const std::filesystem::path& RunStore::path() const {
  return m_impl->db.path();
}

int RunStore::schemaVersion() const {
  return static_cast<int>(m_impl->db.queryInt("PRAGMA user_version", "read schema version"));
}

int RunStore::latestSchemaVersion() {
  return latestStoreVersion();
}

std::string RunStore::integrityCheck() const {
  Statement st(m_impl->db, "PRAGMA integrity_check", "integrity check");
  std::string report;
  while (st.step()) {
    if (!report.empty()) report += "\n";
    report += st.columnText(0);
  }
  return report;
}

std::string RunStore::storeId() const {
  Statement st(m_impl->db, "SELECT value FROM store_info WHERE key = 'store_id'", "read store id");
  if (!st.step()) throw Error(ErrorCode::Store, path().string() + ": the database has no store id");
  return st.columnText(0);
}

void RunStore::setBusyTimeout(std::chrono::milliseconds timeout) {
  m_impl->db.setBusyTimeout(static_cast<int>(std::min<long long>(timeout.count(), INT32_MAX)));
}

std::int64_t RunStore::createExperiment(std::string_view name, std::string_view preset, std::string_view description) {
  requireText(name, "experiment name");
  Statement st(m_impl->db, "INSERT INTO experiments(name, preset, description, created_at) VALUES (?, ?, ?, ?)",
               "create experiment");
  st.bind(1, name).bind(2, preset).bind(3, description).bind(4, storeNow()).run();
  return m_impl->db.lastInsertId();
}

ExperimentRecord RunStore::experiment(std::int64_t id) const {
  Statement st(m_impl->db, "SELECT id, name, preset, description, created_at FROM experiments WHERE id = ?",
               "read experiment");
  if (!st.bind(1, id).step()) {
    throw Error(ErrorCode::Store, path().string() + ": experiment " + std::to_string(id) + " not found");
  }
  return {st.columnInt(0), st.columnText(1), st.columnText(2), st.columnText(3), st.columnDouble(4)};
}

std::vector<ExperimentRecord> RunStore::listExperiments() const {
  Statement st(m_impl->db, "SELECT id, name, preset, description, created_at FROM experiments ORDER BY id",
               "list experiments");
  std::vector<ExperimentRecord> out;
  while (st.step()) {
    out.push_back({st.columnInt(0), st.columnText(1), st.columnText(2), st.columnText(3), st.columnDouble(4)});
  }
  return out;
}

bool RunStore::deleteExperiment(std::int64_t id) {
  Statement st(m_impl->db, "DELETE FROM experiments WHERE id = ?", "delete experiment");
  st.bind(1, id).run();
  return m_impl->db.changes() > 0;
}

std::int64_t RunStore::createRun(std::optional<std::int64_t> experimentId, std::string_view name, std::string_view kind,
                                 std::string_view specJson, std::string_view device) {
  requireText(name, "run name");
  requireText(kind, "run kind");
  if (specJson.empty()) specJson = "{}";
  requireJson(specJson, "run spec_json");
  if (experimentId) {
    Statement check(m_impl->db, "SELECT 1 FROM experiments WHERE id = ?", "look up experiment");
    if (!check.bind(1, *experimentId).step()) {
      throw Error(ErrorCode::Store, path().string() + ": experiment " + std::to_string(*experimentId) + " not found");
    }
  }
  Statement st(m_impl->db,
               "INSERT INTO runs(experiment_id, name, kind, status, spec_json, device, created_at, uid) "
               "VALUES (?, ?, ?, 'queued', ?, ?, ?, lower(hex(randomblob(16))))",
               "create run");
  st.bind(1, experimentId).bind(2, name).bind(3, kind).bind(4, specJson).bind(5, device).bind(6, storeNow()).run();
  return m_impl->db.lastInsertId();
}

RunRecord RunStore::run(std::int64_t id) const {
  std::string sql = std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?";
  Statement st(m_impl->db, sql.c_str(), "read run");
  if (!st.bind(1, id).step()) m_impl->runNotFound(id);
  return readRun(st, path());
}

std::vector<RunRecord> RunStore::listRuns(const RunFilter& filter) const {
  std::string sql = std::string("SELECT ") + kRunColumns +
                    " FROM runs WHERE (?1 IS NULL OR experiment_id = ?1) AND (?2 IS NULL OR status = ?2)"
                    " AND (?3 IS NULL OR id IN (SELECT run_id FROM tags WHERE tag = ?3)) ORDER BY id";
  Statement st(m_impl->db, sql.c_str(), "list runs");
  st.bind(1, filter.experimentId);
  if (filter.status) st.bind(2, std::string_view(runStatusName(*filter.status)));
  if (filter.tag) st.bind(3, std::string_view(*filter.tag));
  std::vector<RunRecord> out;
  while (st.step()) out.push_back(readRun(st, path()));
  return out;
}

void RunStore::setStatus(std::int64_t id, RunStatus status, std::optional<std::string> error) {
  SqliteDb& db = m_impl->db;
  Transaction tx(db, Transaction::Kind::Immediate);
  RunStatus from = run(id).status;
  if (!transitionAllowed(from, status)) {
    throw Error(ErrorCode::Store,
                path().string() + ": run " + std::to_string(id) + ": cannot change status from " + runStatusName(from) +
                    " to " + runStatusName(status),
                "A finished run keeps its outcome; queue it again (status queued) to rerun it.");
  }
  if (from == status) {  // same status: keep the times, update the error if one is given
    if (error) {
      Statement st(db, "UPDATE runs SET error = ? WHERE id = ?", "set run error");
      st.bind(1, std::string_view(*error)).bind(2, id).run();
    }
    tx.commit();
    return;
  }
  const char* sql = nullptr;
  if (status == RunStatus::Queued) {
    sql =
        "UPDATE runs SET status = ?2, started_at = NULL, finished_at = NULL, error = ?3, pid = NULL, "
        "heartbeat_at = NULL, owner_host = NULL, owner_start = NULL WHERE id = ?1 AND ?4 IS NOT NULL";
  } else if (status == RunStatus::Running) {
    sql =
        "UPDATE runs SET status = ?2, started_at = coalesce(started_at, ?4), finished_at = NULL, error = ?3 "
        "WHERE id = ?1";
  } else {
    sql = "UPDATE runs SET status = ?2, finished_at = ?4, error = ?3 WHERE id = ?1";
  }
  Statement st(db, sql, "set run status");
  st.bind(1, id).bind(2, std::string_view(runStatusName(status))).bind(4, storeNow());
  if (error) st.bind(3, std::string_view(*error));
  st.run();
  tx.commit();
}

void RunStore::setSummary(std::int64_t id, std::string_view summaryJson) {
  requireJson(summaryJson, "run summary_json");
  Statement st(m_impl->db, "UPDATE runs SET summary_json = ? WHERE id = ?", "set run summary");
  st.bind(1, summaryJson).bind(2, id).run();
  if (m_impl->db.changes() == 0) m_impl->runNotFound(id);
}

void RunStore::setRunColor(std::int64_t id, std::string_view color) {
  const bool hex = color.size() == 7 && color[0] == '#' && std::all_of(color.begin() + 1, color.end(), [](char c) {
                     return std::isxdigit(static_cast<unsigned char>(c)) != 0;
                   });
  if (!hex && !color.empty()) {
    throw Error(ErrorCode::BadInput,
                "run " + std::to_string(id) + ": colour '" + std::string(color) + "' is not #rrggbb");
  }
  Statement st(m_impl->db, "UPDATE runs SET color = ? WHERE id = ?", "set run colour");
  st.bind(1, color).bind(2, id).run();
  if (m_impl->db.changes() == 0) m_impl->runNotFound(id);
}

void RunStore::setPid(std::int64_t id, std::optional<std::int64_t> pid) {
  Statement st(m_impl->db,
               "UPDATE runs SET pid = ?, heartbeat_at = ?, owner_host = NULL, owner_start = NULL WHERE id = ?",
               "set run pid");
  st.bind(1, pid).bind(2, storeNow()).bind(3, id).run();
  if (m_impl->db.changes() == 0) m_impl->runNotFound(id);
}

void RunStore::heartbeat(std::int64_t id) {
  Statement st(m_impl->db, "UPDATE runs SET heartbeat_at = ? WHERE id = ?", "heartbeat");
  st.bind(1, storeNow()).bind(2, id).run();
  if (m_impl->db.changes() == 0) m_impl->runNotFound(id);
}

std::string RunStore::acquireRun(std::int64_t id) {
  SqliteDb& db = m_impl->db;
  const ProcessIdentity& self = ProcessIdentity::current();
  Transaction tx(db, Transaction::Kind::Immediate);
  const RunRecord r = run(id);
  const LeaseCheck lease = checkLease(r, storeNow());
  const bool mine = r.pid && *r.pid == self.pid && (r.ownerHost.empty() || r.ownerHost == self.host) &&
                    r.ownerStart == self.startToken;
  if (lease.state == LeaseState::Live && !mine) {
    throw LeaseHeld(ErrorCode::Store,
                    path().string() + ": run " + std::to_string(id) + " is already being run by " + lease.owner,
                    "One engine runs a run at a time. Wait for it, or cancel it first (a dead engine's lease is "
                    "taken over automatically).");
  }
  Statement st(db, "UPDATE runs SET pid = ?, owner_host = ?, owner_start = ?, heartbeat_at = ? WHERE id = ?",
               "take the run's lease");
  st.bind(1, self.pid).bind(2, std::string_view(self.host)).bind(3, std::string_view(self.startToken));
  st.bind(4, storeNow()).bind(5, id).run();
  std::string takenFrom;
  if (lease.state == LeaseState::Stale && !mine) {
    takenFrom = lease.owner + " (" + lease.reason + ")";
    Statement ev(db, "INSERT INTO events(run_id, time, kind, message, data_json) VALUES (?, ?, 'lease', ?, ?)",
                 "record the lease takeover");
    const nlohmann::json data = {{"previous_pid", *r.pid},
                                 {"previous_host", r.ownerHost},
                                 {"reason", lease.reason},
                                 {"pid", self.pid},
                                 {"host", self.host}};
    ev.bind(1, id).bind(2, storeNow()).bind(3, std::string_view("took over the stale lease of " + takenFrom));
    ev.bind(4, std::string_view(data.dump())).run();
  }
  tx.commit();
  return takenFrom;
}

void RunStore::releaseRun(std::int64_t id) {
  const ProcessIdentity& self = ProcessIdentity::current();
  Statement st(m_impl->db,
               "UPDATE runs SET pid = NULL, owner_host = NULL, owner_start = NULL, heartbeat_at = ? "
               "WHERE id = ? AND pid = ? AND coalesce(owner_host, '') IN ('', ?)",
               "release the run's lease");
  st.bind(1, storeNow()).bind(2, id).bind(3, self.pid).bind(4, std::string_view(self.host)).run();
}

bool RunStore::renewLease(std::int64_t id) {
  const ProcessIdentity& self = ProcessIdentity::current();
  Statement st(m_impl->db,
               "UPDATE runs SET heartbeat_at = ? WHERE id = ? AND pid = ? AND coalesce(owner_host, '') IN ('', ?)",
               "renew the run's lease");
  st.bind(1, storeNow()).bind(2, id).bind(3, self.pid).bind(4, std::string_view(self.host)).run();
  return m_impl->db.changes() > 0;
}

bool RunStore::deleteRun(std::int64_t id) {
  Statement st(m_impl->db, "DELETE FROM runs WHERE id = ?", "delete run");
  st.bind(1, id).run();
  return m_impl->db.changes() > 0;
}

std::int64_t RunStore::addEvent(std::int64_t runId, std::string_view kind, std::string_view message,
                                std::string_view dataJson) {
  requireText(kind, "event kind");
  if (!dataJson.empty()) requireJson(dataJson, "event data_json");
  m_impl->requireRun(runId);
  Statement st(m_impl->db, "INSERT INTO events(run_id, time, kind, message, data_json) VALUES (?, ?, ?, ?, ?)",
               "add event");
  st.bind(1, runId).bind(2, storeNow()).bind(3, kind).bind(4, message);
  if (!dataJson.empty()) st.bind(5, dataJson);
  st.run();
  return m_impl->db.lastInsertId();
}

std::vector<EventRecord> RunStore::listEvents(std::int64_t runId, std::int64_t afterId) const {
  Statement st(m_impl->db,
               "SELECT id, run_id, time, kind, message, data_json FROM events WHERE run_id = ? AND id > ? ORDER BY id",
               "list events");
  st.bind(1, runId).bind(2, afterId);
  std::vector<EventRecord> out;
  while (st.step()) {
    out.push_back(
        {st.columnInt(0), st.columnInt(1), st.columnDouble(2), st.columnText(3), st.columnText(4), st.columnText(5)});
  }
  return out;
}

std::int64_t RunStore::addArtifact(std::int64_t runId, std::string_view kind, std::string_view artifactPath,
                                   std::optional<std::int64_t> step, std::int64_t bytes) {
  requireText(kind, "artifact kind");
  requireText(artifactPath, "artifact path");
  m_impl->requireRun(runId);
  Statement st(m_impl->db,
               "INSERT INTO artifacts(run_id, kind, path, step, created_at, bytes) VALUES (?, ?, ?, ?, ?, ?)",
               "add artifact");
  st.bind(1, runId).bind(2, kind).bind(3, artifactPath).bind(4, step).bind(5, storeNow()).bind(6, bytes).run();
  return m_impl->db.lastInsertId();
}

std::vector<ArtifactRecord> RunStore::listArtifacts(std::int64_t runId) const {
  Statement st(m_impl->db,
               "SELECT id, run_id, kind, path, step, created_at, bytes FROM artifacts WHERE run_id = ? ORDER BY id",
               "list artifacts");
  st.bind(1, runId);
  std::vector<ArtifactRecord> out;
  while (st.step()) {
    out.push_back({st.columnInt(0), st.columnInt(1), st.columnText(2), st.columnText(3), st.columnOptInt(4),
                   st.columnDouble(5), st.columnInt(6)});
  }
  return out;
}

int RunStore::deleteArtifacts(std::int64_t runId, std::string_view artifactPath) {
  Statement st(m_impl->db, "DELETE FROM artifacts WHERE run_id = ? AND path = ?", "delete artifact");
  st.bind(1, runId).bind(2, artifactPath).run();
  return m_impl->db.changes();
}

void RunStore::addEvaluation(const EvaluationRecord& e) {
  addEvaluations({e});
}

void RunStore::addEvaluations(const std::vector<EvaluationRecord>& rows) {
  for (const auto& e : rows) {
    requireText(e.task, "evaluation task");
    requireText(e.metric, "evaluation metric");
    m_impl->requireRun(e.runId);
  }
  // All of one result or none; a partial result never replaces a complete
  // one or a partial one of more items.
  Transaction tx(m_impl->db);
  for (const auto& e : rows) {
    Statement st(m_impl->db,
                 "INSERT INTO evaluations(run_id, step, task, metric, value, stderr, items, partial, created_at) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                 "ON CONFLICT(run_id, step, task, metric) DO UPDATE SET value = excluded.value, "
                 "stderr = excluded.stderr, items = excluded.items, partial = excluded.partial, "
                 "created_at = excluded.created_at "
                 "WHERE excluded.partial = 0 OR (evaluations.partial = 1 AND excluded.items >= evaluations.items)",
                 "add evaluation");
    st.bind(1, e.runId).bind(2, e.step).bind(3, std::string_view(e.task)).bind(4, std::string_view(e.metric));
    st.bind(5, e.value).bind(6, e.stderrValue).bind(7, e.items).bind(8, static_cast<std::int64_t>(e.partial ? 1 : 0));
    st.bind(9, storeNow()).run();
  }
  tx.commit();
}

std::vector<EvaluationRecord> RunStore::listEvaluations(std::int64_t runId) const {
  Statement st(m_impl->db,
               "SELECT run_id, step, task, metric, value, stderr, items, partial, created_at FROM evaluations "
               "WHERE run_id = ? ORDER BY task, metric, step",
               "list evaluations");
  st.bind(1, runId);
  std::vector<EvaluationRecord> out;
  while (st.step()) {
    out.push_back({st.columnInt(0), st.columnInt(1), st.columnText(2), st.columnText(3), st.columnDouble(4),
                   st.columnDouble(5), st.columnInt(6), st.columnInt(7) != 0, st.columnDouble(8)});
  }
  return out;
}

void RunStore::addTag(std::int64_t runId, std::string_view tag) {
  requireText(tag, "tag");
  m_impl->requireRun(runId);
  Statement st(m_impl->db, "INSERT OR IGNORE INTO tags(run_id, tag) VALUES (?, ?)", "add tag");
  st.bind(1, runId).bind(2, tag).run();
}

void RunStore::removeTag(std::int64_t runId, std::string_view tag) {
  Statement st(m_impl->db, "DELETE FROM tags WHERE run_id = ? AND tag = ?", "remove tag");
  st.bind(1, runId).bind(2, tag).run();
}

std::vector<std::string> RunStore::tags(std::int64_t runId) const {
  Statement st(m_impl->db, "SELECT tag FROM tags WHERE run_id = ? ORDER BY tag", "list tags");
  st.bind(1, runId);
  std::vector<std::string> out;
  while (st.step()) out.push_back(st.columnText(0));
  return out;
}

}  // namespace latentlab
