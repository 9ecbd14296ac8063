// SQLite connection, statements and transactions; every error becomes
// latentlab::Error naming the database file, the operation and SQLite's words.
#include "store/sqlite_db.h"

#include <sqlite3.h>
#include <sys/vfs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <system_error>
#include <thread>

#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {

std::string hintFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return "The disk (or the database size limit) is full. Free space and retry; "
             "the last transaction was rolled back and stored runs are intact.";
    case SQLITE_NOTADB:
      return "The file exists but is not an SQLite database. Choose another workspace file.";
    case SQLITE_CORRUPT:
      return "The database is damaged. Restore it from a backup or copy out what "
             "`sqlite3 FILE .recover` can read.";
    case SQLITE_CANTOPEN:
      return "Check that the folder exists, is writable, and that the path is not a folder.";
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return "The file or its folder is read-only; check permissions.";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "Another process held the database lock longer than the busy timeout; retry.";
    case SQLITE_IOERR:
      return "The operating system reported an I/O error; check the disk.";
    default:
      return {};
  }
}

// Switches the file's journal with `pragma` ("PRAGMA journal_mode=WAL"),
// returning the mode SQLite answers. Switching takes an exclusive lock. When
// two processes open the file at once, SQLite answers one of them "locked" at
// once, without the busy handler (waiting could deadlock), so that one
// retries until the busy timeout has passed; by then the other has switched it.
std::string switchJournal(SqliteDb& db, const char* pragma) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(SqliteDb::kBusyTimeoutMs);
  for (int attempt = 0;; ++attempt) {
    try {
      Statement st(db, pragma, "set the journal mode");
      return st.step() ? st.columnText(0) : std::string();
    } catch (const StoreBusy&) {
      if (std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 + attempt, 20)));
    }
  }
}

}  // namespace

StoreFilesystem filesystemOfMagic(std::uint64_t magic) {
  struct Known {
    std::uint64_t magic;
    const char* name;
    bool network;
  };
  // linux/magic.h and the file systems' own sources.
  static constexpr Known kKnown[] = {
      {0x6969, "nfs", true},        {0xFF534D42, "cifs", true},       {0xFE534D42, "smb2", true},
      {0x517B, "smb", true},        {0x0BD00BD0, "lustre", true},     {0x47504653, "gpfs", true},
      {0x00C36400, "ceph", true},   {0x19830326, "beegfs", true},     {0x01021997, "9p", true},
      {0x5346414F, "afs", true},    {0x6B414653, "kafs", true},       {0xAAD7AAEA, "panfs", true},
      {0x01161970, "gfs2", true},   {0x7461636F, "ocfs2", true},      {0x65735546, "fuse", false},
      {0xEF53, "ext4", false},      {0x58465342, "xfs", false},       {0x9123683E, "btrfs", false},
      {0x01021994, "tmpfs", false}, {0x794C7630, "overlayfs", false}, {0x2FC12FC1, "zfs", false},
      {0xF2F52010, "f2fs", false}};
  for (const Known& k : kKnown) {
    if (k.magic == magic) return {k.name, k.network};
  }
  return {"local", false};
}

StoreFilesystem detectFilesystem(const fs::path& folder) {
  struct statfs st {};
  if (::statfs(folder.empty() ? "." : folder.c_str(), &st) != 0) return {"unknown", false};
  return filesystemOfMagic(static_cast<std::uint64_t>(static_cast<std::uint32_t>(st.f_type)));
}

const char* journalModeName(JournalMode m) {
  return m == JournalMode::Rollback ? "rollback" : "wal";
}

JournalMode chooseJournalMode(const StoreFilesystem& fs) {
  if (const char* forced = std::getenv("LATENTLAB_STORE_JOURNAL")) {
    const std::string v = forced;
    if (v == "wal") return JournalMode::Wal;
    if (v == "rollback") return JournalMode::Rollback;
    if (!v.empty()) {
      throw Error(ErrorCode::BadInput, "LATENTLAB_STORE_JOURNAL='" + v + "': not a journal mode",
                  "Set it to wal or rollback, or unset it to choose by the file system.");
    }
  }
  return fs.network ? JournalMode::Rollback : JournalMode::Wal;
}

SqliteDb::SqliteDb(const fs::path& path, bool create, bool readOnly) : m_path(path) {
  if (readOnly) create = false;
  if (!create) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      throw Error(ErrorCode::Store,
                  path.string() + (fs::exists(path, ec) ? ": not a database file" : ": no such workspace database"),
                  "Check the --db path; readers never create a database.");
    }
  } else if (path.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) {
      throw Error(ErrorCode::Io,
                  path.string() + ": cannot create folder " + path.parent_path().string() + ": " + ec.message(),
                  "Choose a writable location for the workspace database.");
    }
  }
  int flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | (create ? SQLITE_OPEN_CREATE : 0) |
              SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &m_db, flags, nullptr);
  if (rc == SQLITE_OK && readOnly) {
    // A WAL database on a read-only filesystem cannot get its -shm file: read
    // it as immutable then (no other writer can be at work there anyway).
    rc = sqlite3_exec(m_db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_close_v2(m_db);
      m_db = nullptr;
      const std::string uri = "file:" + path.string() + "?immutable=1";
      rc = sqlite3_open_v2(uri.c_str(), &m_db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
    }
  }
  if (rc != SQLITE_OK) {
    std::string msg = m_db != nullptr ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
    sqlite3_close_v2(m_db);
    m_db = nullptr;
    throw Error(ErrorCode::Store, path.string() + ": cannot open database: " + msg, hintFor(rc));
  }
  sqlite3_extended_result_codes(m_db, 1);
  sqlite3_busy_timeout(m_db, kBusyTimeoutMs);
  m_filesystem = detectFilesystem(path.has_parent_path() ? path.parent_path() : fs::path("."));
  if (readOnly) {
    try {
      exec("PRAGMA foreign_keys=ON; PRAGMA cache_size=-32768;", "configure connection");
      m_journal =
          queryText("PRAGMA journal_mode", "read the journal mode") == "wal" ? JournalMode::Wal : JournalMode::Rollback;
    } catch (...) {
      sqlite3_close_v2(m_db);
      m_db = nullptr;
      throw;
    }
    return;
  }
  try {
    m_journal = chooseJournalMode(m_filesystem);
    // journal_mode answers with the mode in effect; another answer means the
    // file system refused it (or the file is not a database: that throws).
    if (m_journal == JournalMode::Wal) {
      const std::string mode = switchJournal(*this, "PRAGMA journal_mode=WAL");
      if (mode != "wal") {
        throw Error(ErrorCode::Store, path.string() + ": cannot enable WAL journaling (mode is '" + mode + "')",
                    "Put the workspace on a local file system that supports shared memory, or set "
                    "LATENTLAB_STORE_JOURNAL=rollback.");
      }
      // mmap and a 32 MB page cache: chart reads of long series scan tens of MB.
      exec(
          "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-32768; "
          "PRAGMA mmap_size=268435456;",
          "configure connection");
    } else {
      // A file written in WAL mode elsewhere is switched back (its WAL checkpointed into it).
      const std::string mode = switchJournal(*this, "PRAGMA journal_mode=DELETE");
      if (mode != "delete") {
        throw Error(
            ErrorCode::Store,
            path.string() + ": cannot use the rollback journal on " + m_filesystem.name + " (mode is '" + mode + "')",
            "Another process may hold the file in WAL mode; close it and retry.");
      }
      // Every commit synced, and no memory map: pages another host changed must be read again.
      exec("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-32768; PRAGMA mmap_size=0;",
           "configure connection");
    }
  } catch (...) {
    sqlite3_close_v2(m_db);
    m_db = nullptr;
    throw;
  }
}

SqliteDb::~SqliteDb() {
  if (m_db != nullptr) sqlite3_close_v2(m_db);
}

void SqliteDb::exec(const char* sql, std::string_view what) {
  char* err = nullptr;
  int rc = sqlite3_exec(m_db, sql, nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) fail(rc, what);
}

std::int64_t SqliteDb::queryInt(const char* sql, std::string_view what) {
  Statement st(*this, sql, what);
  return st.step() ? st.columnInt(0) : 0;
}

std::string SqliteDb::queryText(const char* sql, std::string_view what) {
  Statement st(*this, sql, what);
  return st.step() ? st.columnText(0) : std::string();
}

std::int64_t SqliteDb::lastInsertId() const {
  return sqlite3_last_insert_rowid(m_db);
}

int SqliteDb::changes() const {
  return sqlite3_changes(m_db);
}

void SqliteDb::setBusyTimeout(int ms) {
  m_busyTimeoutMs = ms;
  sqlite3_busy_timeout(m_db, ms);
}

void SqliteDb::fail(int rc, std::string_view what) const {
  std::string msg = m_path.string() + ": " + std::string(what) + ": ";
  // A full disk shows up as an I/O error of the journal or WAL file: say what it is.
  const int sysErr = m_db != nullptr ? sqlite3_system_errno(m_db) : 0;
  if (((rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_FULL) && (sysErr == ENOSPC || sysErr == EDQUOT)) {
    throw Error(ErrorCode::Store, msg + "disk full (no space left on device)", hintFor(SQLITE_FULL));
  }
  msg += m_db != nullptr ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
  msg += " (";
  msg += sqlite3_errstr(rc);
  msg += ")";
  if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) throw StoreBusy(ErrorCode::Store, msg, hintFor(rc));
  throw Error(ErrorCode::Store, msg, hintFor(rc));
}

Statement::Statement(SqliteDb& db, const char* sql, std::string_view what) : m_db(&db), m_what(what) {
  int rc = sqlite3_prepare_v2(db.handle(), sql, -1, &m_stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(m_stmt);
    m_stmt = nullptr;
    db.fail(rc, m_what);
  }
}

Statement::~Statement() {
  if (m_stmt != nullptr) sqlite3_finalize(m_stmt);
}

Statement::Statement(Statement&& other) noexcept
    : m_db(other.m_db), m_stmt(other.m_stmt), m_what(std::move(other.m_what)) {
  other.m_stmt = nullptr;
}

Statement& Statement::bind(int index, std::int64_t v) {
  sqlite3_bind_int64(m_stmt, index, v);
  return *this;
}

Statement& Statement::bind(int index, double v) {
  if (std::isnan(v))
    sqlite3_bind_null(m_stmt, index);
  else
    sqlite3_bind_double(m_stmt, index, v);
  return *this;
}

Statement& Statement::bind(int index, std::string_view v) {
  // A default string_view has data() == nullptr, which SQLite would bind as NULL.
  sqlite3_bind_text(m_stmt, index, v.data() != nullptr ? v.data() : "", static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::int64_t>& v) {
  return v ? bind(index, *v) : bindNull(index);
}

Statement& Statement::bind(int index, const std::optional<double>& v) {
  return v ? bind(index, *v) : bindNull(index);
}

Statement& Statement::bindNull(int index) {
  sqlite3_bind_null(m_stmt, index);
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(m_stmt);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3_reset(m_stmt);
  m_db->fail(rc, m_what);
}

void Statement::reset() {
  sqlite3_reset(m_stmt);
  sqlite3_clear_bindings(m_stmt);
}

bool Statement::isNull(int col) const {
  return sqlite3_column_type(m_stmt, col) == SQLITE_NULL;
}

std::int64_t Statement::columnInt(int col) const {
  return sqlite3_column_int64(m_stmt, col);
}

double Statement::columnDouble(int col) const {
  return isNull(col) ? std::numeric_limits<double>::quiet_NaN() : sqlite3_column_double(m_stmt, col);
}

std::string Statement::columnText(int col) const {
  const unsigned char* text = sqlite3_column_text(m_stmt, col);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(sqlite3_column_bytes(m_stmt, col)));
}

std::optional<std::int64_t> Statement::columnOptInt(int col) const {
  if (isNull(col)) return std::nullopt;
  return columnInt(col);
}

std::optional<double> Statement::columnOptDouble(int col) const {
  if (isNull(col)) return std::nullopt;
  return sqlite3_column_double(m_stmt, col);
}

Transaction::Transaction(SqliteDb& db, Kind kind) : m_db(db) {
  m_db.exec(kind == Kind::Immediate ? "BEGIN IMMEDIATE" : "BEGIN", "begin transaction");
}

Transaction::~Transaction() {
  // SQLite may already have rolled back (e.g. after SQLITE_FULL): check first.
  if (!m_done && sqlite3_get_autocommit(m_db.handle()) == 0) {
    sqlite3_exec(m_db.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void Transaction::commit() {
  m_db.exec("COMMIT", "commit");
  m_done = true;
}

}  // namespace latentlab
