// The SQLite run store (one file per workspace): experiments, runs and their
// status, metrics (batched writer, downsampled reads), events, artifacts, tags.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include <string_view>
#include <vector>
#include "latentlab/error.h"
#include "latentlab/vocabulary.h"

namespace latentlab {

// acquireRun's refusal: another live engine owns the run (its status and
// files are left alone; the run did not fail).
class LeaseHeld : public Error {
 public:
  using Error::Error;
};

enum class RunStatus { Queued, Running, Completed, Failed, Cancelled, Crashed };

const char* runStatusName(RunStatus status);      // "queued", "running", ...
RunStatus parseRunStatus(std::string_view name);  // throws Error(BadInput) for unknown names
bool isTerminal(RunStatus status);                // completed, failed, cancelled, crashed

// Times are seconds since the Unix epoch (UTC); a missing time is nullopt.
struct ExperimentRecord {
  std::int64_t id = 0;
  std::string name;
  std::string preset;
  std::string description;
  double createdAt = 0;
};

struct RunRecord {
  std::int64_t id = 0;
  std::optional<std::int64_t> experimentId;  // nullopt: a run outside any experiment
  std::string name;
  std::string kind;  // "train", "convert", "eval", ...
  RunStatus status = RunStatus::Queued;
  std::string specJson;  // the RunSpec as saved
  std::string device;    // "cpu", "cuda:0", ...
  double createdAt = 0;
  std::optional<double> startedAt;
  std::optional<double> finishedAt;
  std::string error;        // empty unless failed/crashed
  std::string summaryJson;  // empty until setSummary
  // The lease: the engine that owns the run (see RunStore::acquireRun).
  std::optional<std::int64_t> pid;
  std::optional<double> heartbeatAt;
  std::string ownerHost;   // empty: this host (runs leased before hosts were recorded)
  std::string ownerStart;  // the owner process's start token ("" when unknown)
  std::string uid;         // random id of the run: ids can be reused after a delete
  std::string color;       // "#rrggbb" the workbench draws it in; empty until chosen
};

// Lease liveness: an owner on this host is alive while its process (same pid
// and start token) exists; one on another host while its heartbeat is newer
// than kLeaseTimeoutSeconds. The engine beats every kHeartbeatSeconds.
constexpr double kLeaseTimeoutSeconds = 60.0;
constexpr double kHeartbeatSeconds = 2.0;
enum class LeaseState { Free, Live, Stale };
struct LeaseCheck {
  LeaseState state = LeaseState::Free;
  std::string owner;   // "engine pid 123 on host h" (empty when free)
  std::string reason;  // why stale: "process 123 is not running", "no heartbeat for 75 s"
};
LeaseCheck checkLease(const RunRecord& run, double now);
double storeNow();  // the store's clock: seconds since the Unix epoch (UTC)
// The status readers show: a run recorded as running whose lease is not live
// is crashed (its engine died without recording an outcome).
RunStatus observedStatus(const RunRecord& run, double now);

// This process as a lease owner.
struct ProcessIdentity {
  std::int64_t pid = 0;
  std::string host;
  std::string startToken;  // boot id + start time: a reused pid does not match
  static const ProcessIdentity& current();
};
bool processAlive(std::int64_t pid, const std::string& startToken);  // on this host

// One figure of an evaluation of a run's model at a step (a task's acc,
// acc_norm, ...). `partial`: the task was cut short (--limit, cancel).
struct EvaluationRecord {
  std::int64_t runId = 0;
  std::int64_t step = 0;
  std::string task;
  std::string metric;
  double value = 0;
  double stderrValue = 0;
  std::int64_t items = 0;
  bool partial = false;
  double createdAt = 0;
};

struct RunFilter {
  std::optional<std::int64_t> experimentId;
  std::optional<RunStatus> status;
  std::optional<std::string> tag;
};

struct EventRecord {
  std::int64_t id = 0;  // increasing: pass the last one seen to listEvents
  std::int64_t runId = 0;
  double time = 0;
  std::string kind;  // "log", "checkpoint", "eval", ...
  std::string message;
  std::string dataJson;  // empty when none
};

struct ArtifactRecord {
  std::int64_t id = 0;
  std::int64_t runId = 0;
  std::string kind;  // "checkpoint", "export", ...
  std::string path;
  std::optional<std::int64_t> step;
  double createdAt = 0;
  std::int64_t bytes = 0;
};

// One metric row. `wallTime` is the writer's clock (seconds); a NaN value is
// stored as NULL and read back as NaN (downsampling ignores it).
struct MetricPoint {
  std::int64_t step = 0;
  std::int64_t tokens = 0;
  double wallTime = 0;
  double value = 0;
};

struct MetricWriterOptions {
  std::size_t batchRows = 256;              // commit when this many rows are pending
  std::chrono::milliseconds maxDelay{500};  // ... or when the oldest pending row is this old
};

class RunStore;

// Buffers metric rows of one run and commits them in one BEGIN IMMEDIATE ...
// COMMIT per batch (INSERT OR REPLACE: a resumed run rewriting steps is
// idempotent). The time rule is checked in add(); call flush() at idle points.
// Uses its store's connection: same thread as the store. Flushes on
// destruction (errors there are printed to stderr, not thrown).
class MetricWriter {
 public:
  ~MetricWriter();
  MetricWriter(MetricWriter&& other) noexcept;
  MetricWriter& operator=(MetricWriter&& other) noexcept;
  MetricWriter(const MetricWriter&) = delete;
  MetricWriter& operator=(const MetricWriter&) = delete;

  // Throws Error(BadInput) for an empty name or a negative step; Error(Store)
  // when a commit fails (the batch stays pending and is retried by flush()).
  // A database another connection holds locked does not throw here: add()
  // tries without waiting, keeps the rows and retries after a back-off
  // (250 ms doubling to 8 s); flush() waits the connection's busy timeout.
  void add(std::string_view name, std::int64_t step, std::int64_t tokens, double wallTime, double value);
  void flush();

  std::int64_t runId() const { return m_runId; }
  std::size_t pendingRows() const;
  std::uint64_t committedRows() const { return m_committedRows; }
  std::uint64_t committedBatches() const { return m_committedBatches; }

 private:
  friend class RunStore;
  struct State;
  MetricWriter(std::unique_ptr<State> state, std::int64_t runId);
  std::unique_ptr<State> m_state;
  std::int64_t m_runId = 0;
  std::uint64_t m_committedRows = 0;
  std::uint64_t m_committedBatches = 0;
};

enum class StoreOpen {
  CreateIfMissing,  // creates the file and its folders (the GUI, `run SPEC`)
  MustExist,        // Error(Store) naming the path when there is no such file (readers)
  ReadOnly,         // as MustExist, and never written (runs list/show/export): works on a read-only filesystem
};

// A connection to one store file, created (with its parent folders) if
// missing (StoreOpen::CreateIfMissing) and migrated to the latest schema.
// WAL and synchronous=NORMAL on a local file system; on a network file system
// (NFS, Lustre, GPFS, CIFS, ...) the rollback journal with POSIX locks and
// synchronous=FULL, since WAL does not work across hosts (journal(); docs/
// design.md, "Storage"). busy_timeout 5 s (setBusyTimeout), foreign_keys=ON.
// A RunStore is one SQLite connection: do not share it across threads; each
// thread (and process) opens its own.
// Every failure throws latentlab::Error (Store, or Io for folders/CSV files)
// naming the file; a failed write rolls back and leaves stored runs intact.
class RunStore {
 public:
  explicit RunStore(const std::filesystem::path& path, StoreOpen mode = StoreOpen::CreateIfMissing);
  ~RunStore();
  RunStore(RunStore&&) noexcept;
  RunStore& operator=(RunStore&&) noexcept;
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  const std::filesystem::path& path() const;
  int schemaVersion() const;           // PRAGMA user_version
  static int latestSchemaVersion();    // the newest migration this code knows
  std::string integrityCheck() const;  // "ok" or SQLite's report
  // SQLite's quick check ("ok", or the first problem found): a damaged page is
  // found in the time of one pass over the file.
  std::string quickCheck() const;
  std::string storeId() const;  // random id of this database, fixed at creation
  // The file system the file lies on ("ext4", "nfs", "lustre", ...) and the
  // journal in use: "wal" or "rollback".
  std::string filesystem() const;
  std::string journal() const;
  // How long a statement waits for another connection's write lock before it
  // fails with a busy error (default 5 s). The engine waits minutes.
  void setBusyTimeout(std::chrono::milliseconds timeout);

  // Experiments; deleting one deletes its runs and everything under them.
  std::int64_t createExperiment(std::string_view name, std::string_view preset = {}, std::string_view description = {});
  ExperimentRecord experiment(std::int64_t id) const;
  std::vector<ExperimentRecord> listExperiments() const;
  bool deleteExperiment(std::int64_t id);

  // Runs. JSON arguments are validated (Error(BadInput) when malformed).
  std::int64_t createRun(std::optional<std::int64_t> experimentId, std::string_view name, std::string_view kind,
                         std::string_view specJson, std::string_view device);
  // The same, for a run spec's kind (stored as the name the spec writes).
  std::int64_t createRun(std::optional<std::int64_t> experimentId, std::string_view name, RunKind kind,
                         std::string_view specJson, std::string_view device) {
    return createRun(experimentId, name, choiceName(kind), specJson, device);
  }
  RunRecord run(std::int64_t id) const;                                 // Error(Store) when there is no such run
  std::vector<RunRecord> listRuns(const RunFilter& filter = {}) const;  // by id
  // running sets started_at (first start only) and clears finished_at/error;
  // a terminal status sets finished_at; queued clears all three. Refused
  // (Error(Store)): terminal -> another terminal, queued -> completed.
  void setStatus(std::int64_t id, RunStatus status, std::optional<std::string> error = std::nullopt);
  void setSummary(std::int64_t id, std::string_view summaryJson);
  // The run's colour in the workbench ("#rrggbb", or empty to choose again).
  void setRunColor(std::int64_t id, std::string_view color);
  void setPid(std::int64_t id, std::optional<std::int64_t> pid);  // also a heartbeat
  void heartbeat(std::int64_t id);
  // Takes the lease of a run for this process: refused with Error(Store)
  // naming the owner while another live engine holds it; a stale lease is
  // taken over and recorded as a "lease" event. Returns the stale owner taken
  // over (empty when the run was free).
  std::string acquireRun(std::int64_t id);
  // Gives the lease back if this process holds it (no-op otherwise).
  void releaseRun(std::int64_t id);
  // Renews this process's lease; false when it no longer holds it.
  bool renewLease(std::int64_t id);
  bool deleteRun(std::int64_t id);  // false when it did not exist; cascades

  std::int64_t addEvent(std::int64_t runId, std::string_view kind, std::string_view message,
                        std::string_view dataJson = {});
  std::vector<EventRecord> listEvents(std::int64_t runId, std::int64_t afterId = 0) const;

  std::int64_t addArtifact(std::int64_t runId, std::string_view kind, std::string_view path,
                           std::optional<std::int64_t> step, std::int64_t bytes);
  std::vector<ArtifactRecord> listArtifacts(std::int64_t runId) const;
  int deleteArtifacts(std::int64_t runId, std::string_view artifactPath);  // rows removed

  // Evaluations: a repeated (run, step, task, metric) replaces the earlier row,
  // except that a partial row never replaces a complete one or a partial one
  // of more items. addEvaluations writes its rows in one transaction (the
  // metrics of one result: all or none).
  void addEvaluation(const EvaluationRecord& evaluation);
  void addEvaluations(const std::vector<EvaluationRecord>& evaluations);
  std::vector<EvaluationRecord> listEvaluations(std::int64_t runId) const;  // by task, metric, step

  void addTag(std::int64_t runId, std::string_view tag);     // idempotent
  void removeTag(std::int64_t runId, std::string_view tag);  // no-op when absent
  std::vector<std::string> tags(std::int64_t runId) const;   // sorted

  // Metrics. The writer must not be used from another thread than this store.
  MetricWriter metricWriter(std::int64_t runId, MetricWriterOptions options = {});

  // Points of `name` with stepMin <= step <= stepMax, in step order. At most
  // maxPoints (>= 2) raw points are returned as they are; beyond that the
  // steps [lo, hi] present in the range are cut into B = maxPoints / 2 buckets
  // of width W = ceil((hi - lo + 1) / B) (bucket k: lo + k*W .. lo + k*W + W - 1),
  // and each non-empty bucket yields its min-value and max-value points
  // (the first in step order on ties; one point when they are the same row).
  // Cost: one scan of the range's rows, ~0.2 s for 1M points.
  std::vector<MetricPoint> series(std::int64_t runId, std::string_view name, std::int64_t stepMin = 0,
                                  std::int64_t stepMax = std::numeric_limits<std::int64_t>::max(),
                                  std::size_t maxPoints = 2000) const;
  // Raw points with step > afterStep, in step order (live charts).
  std::vector<MetricPoint> rowsSince(std::int64_t runId, std::string_view name, std::int64_t afterStep) const;
  std::vector<std::string> metricNames(std::int64_t runId) const;  // sorted
  std::optional<std::int64_t> lastStep(std::int64_t runId) const;  // over all names
  std::optional<std::int64_t> lastStep(std::int64_t runId, std::string_view name) const;
  std::uint64_t metricCount(std::int64_t runId) const;
  // All metrics of the run by (name, step): run_id,name,step,tokens,wall_time,value.
  void exportCsv(std::int64_t runId, const std::filesystem::path& csvPath) const;

 private:
  struct Impl;
  friend class MetricWriter;
  friend struct RunStoreAccess;  // core/store internals and their tests
  std::shared_ptr<Impl> m_impl;
};

}  // namespace latentlab
