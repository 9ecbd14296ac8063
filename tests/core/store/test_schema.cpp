// Opening a store: migrations from an empty file, reopening, a later
// migration, refusal of a newer schema, files that are not databases, paths
// that cannot be opened, and the connection settings.
#include <fstream>

#include "store/run_store_impl.h"
#include "store/schema.h"
#include "store_test_util.h"

namespace latentlab {
namespace {
namespace fs = std::filesystem;
using namespace latentlab::test;

std::string readBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(StoreSchema, EmptyFileIsMigratedToTheLatestVersion) {
  fs::path db = scratchDir("schema-empty") / "nested" / "deeper" / "ws.db";  // parents are created
  {
    RunStore store(db);
    EXPECT_EQ(store.schemaVersion(), RunStore::latestSchemaVersion());
    EXPECT_GE(RunStore::latestSchemaVersion(), 1);
    EXPECT_EQ(store.integrityCheck(), "ok");
    EXPECT_TRUE(store.listExperiments().empty());
    EXPECT_TRUE(store.listRuns().empty());
  }
  // A zero-byte file (touched by another tool) is an empty database too.
  fs::path touched = scratchDir("schema-touched") / "ws.db";
  std::ofstream(touched).close();
  RunStore store(touched);
  EXPECT_EQ(store.schemaVersion(), RunStore::latestSchemaVersion());
}

TEST(StoreSchema, ReopeningIsANoOpAndKeepsData) {
  fs::path db = freshDbPath("schema-reopen");
  std::int64_t runId = 0;
  {
    RunStore store(db);
    runId = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  }
  RunStore store(db);
  EXPECT_EQ(store.schemaVersion(), RunStore::latestSchemaVersion());
  EXPECT_EQ(store.run(runId).name, "r");
  EXPECT_EQ(store.listRuns().size(), 1u);
}

TEST(StoreSchema, ConnectionUsesWalForeignKeysAndBusyTimeout) {
  RunStore store(freshDbPath("schema-pragmas"));
  SqliteDb& db = RunStoreAccess::db(store);
  Statement mode(db, "PRAGMA journal_mode", "test");
  ASSERT_TRUE(mode.step());
  EXPECT_EQ(mode.columnText(0), "wal");
  EXPECT_EQ(db.queryInt("PRAGMA foreign_keys", "test"), 1);
  EXPECT_EQ(db.queryInt("PRAGMA synchronous", "test"), 1);  // NORMAL
  EXPECT_EQ(db.queryInt("PRAGMA busy_timeout", "test"), SqliteDb::kBusyTimeoutMs);
}

TEST(StoreSchema, ALaterMigrationUpgradesAnOlderFileOnce) {
  fs::path path = freshDbPath("schema-upgrade");
  { RunStore store(path); }
  std::vector<Migration> withTwo = storeMigrations();
  const int next = withTwo.back().version + 1;
  withTwo.push_back({next, "CREATE TABLE notes(run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE, text TEXT);"});
  {
    SqliteDb db(path);
    migrateStore(db, withTwo);
    EXPECT_EQ(db.queryInt("PRAGMA user_version", "test"), next);
    EXPECT_EQ(db.queryInt("SELECT count(*) FROM sqlite_master WHERE name = 'notes'", "test"), 1);
    migrateStore(db, withTwo);  // idempotent: the table is not created twice
    EXPECT_EQ(db.queryInt("PRAGMA user_version", "test"), next);
  }
  // This code knows only up to `next - 1`: the upgraded file is refused.
  Error e = storeErrorOf([&] { RunStore store(path); });
  EXPECT_EQ(e.code(), ErrorCode::Store);
}

TEST(StoreSchema, AFailingMigrationLeavesThePreviousVersion) {
  fs::path path = freshDbPath("schema-failing");
  { RunStore store(path); }
  std::vector<Migration> broken = storeMigrations();
  const int before = broken.back().version;
  broken.push_back({before + 1, "CREATE TABLE extra(x); THIS IS NOT SQL;"});
  SqliteDb db(path);
  Error e = storeErrorOf([&] { migrateStore(db, broken); });
  EXPECT_TRUE(contains(e.message(), "migration " + std::to_string(before + 1))) << e.message();
  EXPECT_EQ(db.queryInt("PRAGMA user_version", "test"), before);
  EXPECT_EQ(db.queryInt("SELECT count(*) FROM sqlite_master WHERE name = 'extra'", "test"), 0);
}

TEST(StoreSchema, NewerUserVersionIsRefusedWithAClearMessage) {
  fs::path path = freshDbPath("schema-newer");
  { RunStore store(path); }
  {
    SqliteDb db(path);
    db.exec(("PRAGMA user_version = " + std::to_string(RunStore::latestSchemaVersion() + 5)).c_str(), "test");
  }
  Error e = storeErrorOf([&] { RunStore store(path); });
  EXPECT_EQ(e.code(), ErrorCode::Store);
  EXPECT_TRUE(contains(e.message(), path.string())) << e.message();
  EXPECT_TRUE(contains(e.message(), "newer")) << e.message();
  EXPECT_TRUE(contains(e.message(), std::to_string(RunStore::latestSchemaVersion() + 5))) << e.message();
  EXPECT_FALSE(e.hint().empty());
}

TEST(StoreSchema, AFileThatIsNotADatabaseIsRefusedAndLeftUntouched) {
  fs::path path = scratchDir("schema-notadb") / "notes.db";
  std::string content(8192, 'x');
  content.replace(0, 40, "This is a text file, not an SQLite db. ");
  writeFile(path, content);
  Error e = storeErrorOf([&] { RunStore store(path); });
  EXPECT_EQ(e.code(), ErrorCode::Store);
  EXPECT_TRUE(contains(e.message(), path.string())) << e.message();
  EXPECT_TRUE(contains(e.message(), "not a database")) << e.message();
  EXPECT_FALSE(e.hint().empty());
  EXPECT_EQ(readBytes(path), content);
}

TEST(StoreSchema, UnopenablePathsNameTheFile) {
  fs::path dir = scratchDir("schema-unopenable");
  // The path is a folder.
  Error asDir = storeErrorOf([&] { RunStore store(dir); });
  EXPECT_TRUE(asDir.code() == ErrorCode::Store || asDir.code() == ErrorCode::Io);
  EXPECT_TRUE(contains(asDir.message(), dir.string())) << asDir.message();
  // A parent of the path is a regular file: the folder cannot be created.
  writeFile(dir / "plain", "x");
  fs::path under = dir / "plain" / "ws.db";
  Error underFile = storeErrorOf([&] { RunStore store(under); });
  EXPECT_EQ(underFile.code(), ErrorCode::Io);
  EXPECT_TRUE(contains(underFile.message(), under.string())) << underFile.message();
}

TEST(StoreSchema, StatusNamesRoundTripAndUnknownNamesAreRejected) {
  for (RunStatus s : {RunStatus::Queued, RunStatus::Running, RunStatus::Completed, RunStatus::Failed,
                      RunStatus::Cancelled, RunStatus::Crashed}) {
    EXPECT_EQ(parseRunStatus(runStatusName(s)), s);
  }
  EXPECT_EQ(storeErrorOf([] { parseRunStatus("done"); }).code(), ErrorCode::BadInput);
  EXPECT_TRUE(isTerminal(RunStatus::Crashed));
  EXPECT_FALSE(isTerminal(RunStatus::Running));
}

TEST(StoreSchema, TheDatabaseRejectsAnUnknownStatusValue) {
  RunStore store(freshDbPath("schema-check"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  SqliteDb& db = RunStoreAccess::db(store);
  Error e = storeErrorOf(
      [&] { db.exec(("UPDATE runs SET status = 'done' WHERE id = " + std::to_string(id)).c_str(), "test"); });
  EXPECT_TRUE(contains(e.message(), "CHECK")) << e.message();
  EXPECT_EQ(store.run(id).status, RunStatus::Queued);
}

}  // namespace
}  // namespace latentlab
