// The heartbeat thread of a leased run.
#include "store/lease_keeper.h"

#include <chrono>
#include <optional>

#include "latentlab/error.h"
#include "latentlab/run_store.h"

namespace latentlab {

LeaseKeeper::LeaseKeeper(std::filesystem::path database, std::int64_t runId)
    : m_database(std::move(database)), m_runId(runId), m_thread([this] { loop(); }) {}

LeaseKeeper::~LeaseKeeper() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  m_thread.join();
}

void LeaseKeeper::loop() {
  std::optional<RunStore> store;
  const auto period = std::chrono::milliseconds(static_cast<int>(kHeartbeatSeconds * 1000));
  std::unique_lock<std::mutex> lock(m_mutex);
  while (!m_wake.wait_for(lock, period, [this] { return m_stop; })) {
    lock.unlock();
    try {
      if (!store) {
        store.emplace(m_database, StoreOpen::MustExist);
        store->setBusyTimeout(std::chrono::milliseconds(1000));
      }
      if (store->renewLease(m_runId)) ++m_beats;
    } catch (const std::exception&) {
      // Busy or unreachable for now: the lease lasts kLeaseTimeoutSeconds, and
      // on this host liveness is the process itself. Try again next period
      // (with a fresh connection).
      store.reset();
    }
    lock.lock();
  }
}

}  // namespace latentlab
