// The run store's schema as numbered migrations driven by PRAGMA user_version.
#pragma once

#include <vector>

namespace latentlab {

class SqliteDb;

struct Migration {
  int version;      // user_version after this migration: 1, 2, 3, ...
  const char* sql;  // statements run inside the migration's transaction
};

// The migrations this code knows, in order; the last one's version is the latest.
const std::vector<Migration>& storeMigrations();
int latestStoreVersion();

// Brings `db` to the last version of `migrations`, one transaction per step
// (a failed step leaves the previous version intact). Throws Error(Store)
// when the file's user_version is newer than the last known one.
void migrateStore(SqliteDb& db, const std::vector<Migration>& migrations);

}  // namespace latentlab
