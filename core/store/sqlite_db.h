// Thin RAII layer over the sqlite3 C API for the run store: one connection,
// prepared statements, transactions, and errors that name the database file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "latentlab/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace latentlab {

// The file system a store's file lies on, by statfs's magic number: "nfs",
// "lustre", "gpfs", "cifs", ... (network: true), or the local ones by name
// ("ext4", "xfs", "tmpfs", ...; "local" where the number is not one we name).
struct StoreFilesystem {
  std::string name;
  bool network = false;
};
StoreFilesystem filesystemOfMagic(std::uint64_t magic);
// The file system of `folder` (statfs); "unknown", not network, where it fails.
StoreFilesystem detectFilesystem(const std::filesystem::path& folder);

// How a store's file is journaled. WAL keeps its index in shared memory that
// only processes of one host can share, so a store on a network file system
// (the workspace of a cluster, written by rank 0 on a compute node and read
// by the workbench on another host) uses SQLite's rollback journal with
// POSIX locks instead, synchronous=FULL and no memory map.
enum class JournalMode { Wal, Rollback };
const char* journalModeName(JournalMode m);  // "wal" | "rollback"
// WAL on a local file system, Rollback on a network one. The environment
// variable LATENTLAB_STORE_JOURNAL=wal|rollback overrides the choice (a
// network file system behind FUSE is not recognised by its magic number).
JournalMode chooseJournalMode(const StoreFilesystem& fs);

// One configured connection (the journal of chooseJournalMode, busy_timeout,
// foreign_keys=ON). Not thread-safe: used by one thread.
class SqliteDb {
 public:
  static constexpr int kBusyTimeoutMs = 5000;

  // create=false: the file must exist (Error(Store) naming it otherwise).
  // throws Error(Store / Io). readOnly: no writes, no journal switch (a
  // database on a read-only filesystem or medium can still be read).
  explicit SqliteDb(const std::filesystem::path& path, bool create = true, bool readOnly = false);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  sqlite3* handle() const { return m_db; }
  const std::filesystem::path& path() const { return m_path; }

  // Runs one or more statements without results.
  void exec(const char* sql, std::string_view what);
  std::int64_t queryInt(const char* sql, std::string_view what);
  std::string queryText(const char* sql, std::string_view what);
  std::int64_t lastInsertId() const;
  int changes() const;
  void setBusyTimeout(int ms);
  int busyTimeout() const { return m_busyTimeoutMs; }
  const StoreFilesystem& filesystem() const { return m_filesystem; }
  // The journal in effect: the one chosen when this connection opened the
  // file for writing, or the file's own for a read-only connection.
  JournalMode journalMode() const { return m_journal; }

  // Throws Error(Store) "<db>: <what>: <sqlite message> (<code name>)" + hint;
  // StoreBusy when another connection held the lock past the busy timeout.
  [[noreturn]] void fail(int rc, std::string_view what) const;

 private:
  std::filesystem::path m_path;
  sqlite3* m_db = nullptr;
  int m_busyTimeoutMs = kBusyTimeoutMs;
  StoreFilesystem m_filesystem;
  JournalMode m_journal = JournalMode::Wal;
};

// The lock was held by another connection for longer than the busy timeout:
// the operation did nothing and may be retried.
class StoreBusy : public Error {
 public:
  using Error::Error;
};

// Sets a connection's busy timeout for one scope.
class BusyTimeoutScope {
 public:
  BusyTimeoutScope(SqliteDb& db, int ms) : m_db(db), m_saved(db.busyTimeout()) { db.setBusyTimeout(ms); }
  ~BusyTimeoutScope() { m_db.setBusyTimeout(m_saved); }
  BusyTimeoutScope(const BusyTimeoutScope&) = delete;
  BusyTimeoutScope& operator=(const BusyTimeoutScope&) = delete;

 private:
  SqliteDb& m_db;
  int m_saved;
};

// A prepared statement; bind indices start at 1. step() returns true for a
// row, false when done, and throws (after resetting) on error.
class Statement {
 public:
  Statement(SqliteDb& db, const char* sql, std::string_view what);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& operator=(Statement&&) = delete;

  Statement& bind(int index, std::int64_t v);
  Statement& bind(int index, double v);  // NaN binds NULL
  Statement& bind(int index, std::string_view v);
  Statement& bind(int index, const std::optional<std::int64_t>& v);
  Statement& bind(int index, const std::optional<double>& v);
  Statement& bindNull(int index);

  bool step();
  void run() {
    step();
    reset();
  }              // a statement without rows
  void reset();  // also clears bindings

  bool isNull(int col) const;
  std::int64_t columnInt(int col) const;
  double columnDouble(int col) const;  // NULL reads as NaN
  std::string columnText(int col) const;
  std::optional<std::int64_t> columnOptInt(int col) const;
  std::optional<double> columnOptDouble(int col) const;

 private:
  SqliteDb* m_db;
  sqlite3_stmt* m_stmt = nullptr;
  std::string m_what;
};

// BEGIN [IMMEDIATE] ... COMMIT; rolls back in the destructor unless committed.
class Transaction {
 public:
  enum class Kind { Deferred, Immediate };
  explicit Transaction(SqliteDb& db, Kind kind = Kind::Immediate);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  SqliteDb& m_db;
  bool m_done = false;
};

}  // namespace latentlab
