// RunStore's private state, shared by the store's .cpp files (and reachable
// from the store's own tests through RunStoreAccess).
#pragma once

#include <chrono>
#include <string>

#include "latentlab/run_store.h"
#include "store/sqlite_db.h"

namespace latentlab {

struct RunStore::Impl {
  Impl(const std::filesystem::path& path, bool create, bool readOnly = false) : db(path, create, readOnly) {}
  SqliteDb db;

  // Error(Store) "<db>: run <id> not found".
  [[noreturn]] void runNotFound(std::int64_t runId) const;
  void requireRun(std::int64_t runId);
};

struct RunStoreAccess {
  static SqliteDb& db(RunStore& store) { return store.m_impl->db; }
};

}  // namespace latentlab
