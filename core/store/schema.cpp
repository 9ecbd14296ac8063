// Migration 1 creates every table; later migrations append to the list and
// never edit an earlier one (a shipped version is fixed forever).
#include "store/schema.h"

#include <string>

#include "latentlab/error.h"
#include "store/sqlite_db.h"

namespace latentlab {

namespace {

// Times are REAL seconds since the Unix epoch. metrics is keyed (and
// clustered) by (run_id, name, step): range scans for charts read contiguous
// pages and INSERT OR REPLACE makes rewritten steps idempotent.
constexpr const char* kMigration1 = R"sql(
CREATE TABLE experiments(
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL,
  preset      TEXT NOT NULL DEFAULT '',
  description TEXT NOT NULL DEFAULT '',
  created_at  REAL NOT NULL
);
CREATE TABLE runs(
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER REFERENCES experiments(id) ON DELETE CASCADE,
  name          TEXT NOT NULL,
  kind          TEXT NOT NULL,
  status        TEXT NOT NULL DEFAULT 'queued'
                CHECK (status IN ('queued','running','completed','failed','cancelled','crashed')),
  spec_json     TEXT NOT NULL DEFAULT '{}',
  device        TEXT NOT NULL DEFAULT '',
  created_at    REAL NOT NULL,
  started_at    REAL,
  finished_at   REAL,
  error         TEXT,
  summary_json  TEXT,
  pid           INTEGER,
  heartbeat_at  REAL
);
CREATE INDEX runs_by_experiment ON runs(experiment_id);
CREATE INDEX runs_by_status ON runs(status);
CREATE TABLE metrics(
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name      TEXT NOT NULL,
  step      INTEGER NOT NULL,
  tokens    INTEGER NOT NULL DEFAULT 0,
  wall_time REAL NOT NULL DEFAULT 0,
  value     REAL,
  PRIMARY KEY (run_id, name, step)
) WITHOUT ROWID;
CREATE TABLE events(
  id        INTEGER PRIMARY KEY,
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time      REAL NOT NULL,
  kind      TEXT NOT NULL,
  message   TEXT NOT NULL DEFAULT '',
  data_json TEXT
);
CREATE INDEX events_by_run ON events(run_id, id);
CREATE TABLE artifacts(
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind       TEXT NOT NULL,
  path       TEXT NOT NULL,
  step       INTEGER,
  created_at REAL NOT NULL,
  bytes      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX artifacts_by_run ON artifacts(run_id, id);
CREATE TABLE tags(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  tag    TEXT NOT NULL,
  PRIMARY KEY (run_id, tag)
) WITHOUT ROWID;
CREATE INDEX tags_by_tag ON tags(tag);
)sql";

// Run ownership: a random id per database and per run (checkpoint folders
// carry both, so a folder is never adopted by another database's or a deleted
// run's namesake), and the lease's owner host and process start token.
constexpr const char* kMigration2 = R"sql(
CREATE TABLE store_info(
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO store_info(key, value) VALUES ('store_id', lower(hex(randomblob(16))));
ALTER TABLE runs ADD COLUMN uid TEXT;
ALTER TABLE runs ADD COLUMN owner_host TEXT;
ALTER TABLE runs ADD COLUMN owner_start TEXT;
UPDATE runs SET uid = lower(hex(randomblob(16))) WHERE uid IS NULL;
)sql";

// Evaluations of a run's model at a step: one row per task and metric.
constexpr const char* kMigration3 = R"sql(
CREATE TABLE evaluations(
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step       INTEGER NOT NULL,
  task       TEXT NOT NULL,
  metric     TEXT NOT NULL,
  value      REAL,
  stderr     REAL,
  items      INTEGER NOT NULL DEFAULT 0,
  partial    INTEGER NOT NULL DEFAULT 0,
  created_at REAL NOT NULL,
  UNIQUE (run_id, step, task, metric)
);
CREATE INDEX evaluations_by_run ON evaluations(run_id, task, step);
)sql";

// The colour the workbench drew a run in ("#rrggbb"; empty until chosen), so
// that a run keeps its colour in every experiment, view and session.
constexpr const char* kMigration4 = R"sql(
ALTER TABLE runs ADD COLUMN color TEXT NOT NULL DEFAULT '';
)sql";

}  // namespace

const std::vector<Migration>& storeMigrations() {
  static const std::vector<Migration> migrations = {
      {1, kMigration1},
      {2, kMigration2},
      {3, kMigration3},
      {4, kMigration4},
  };
  return migrations;
}

int latestStoreVersion() {
  return storeMigrations().back().version;
}

void migrateStore(SqliteDb& db, const std::vector<Migration>& migrations) {
  const int latest = migrations.empty() ? 0 : migrations.back().version;
  auto tooNew = [&](std::int64_t version) {
    return Error(ErrorCode::Store,
                 db.path().string() + ": schema version " + std::to_string(version) +
                     " is newer than this LatentLab knows (" + std::to_string(latest) + ")",
                 "The workspace was written by a newer LatentLab; open it with that version.");
  };
  std::int64_t current = db.queryInt("PRAGMA user_version", "read schema version");
  if (current > latest) throw tooNew(current);
  for (const Migration& m : migrations) {
    if (m.version <= current) continue;
    // Another process may migrate at the same time: re-read under the write lock.
    Transaction tx(db, Transaction::Kind::Immediate);
    current = db.queryInt("PRAGMA user_version", "read schema version");
    if (current > latest) throw tooNew(current);
    if (m.version <= current) continue;
    if (m.version != current + 1) {
      throw Error(ErrorCode::Store,
                  db.path().string() + ": schema version " + std::to_string(current) + " has no migration to " +
                      std::to_string(m.version),
                  "Internal: migrations must be numbered without gaps.");
    }
    db.exec(m.sql, "migration " + std::to_string(m.version));
    db.exec(("PRAGMA user_version = " + std::to_string(m.version)).c_str(), "set schema version");
    tx.commit();
    current = m.version;
  }
}

}  // namespace latentlab
