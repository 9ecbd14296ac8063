// Keeps a run's lease alive while an engine works on it: a thread with its own
// store connection renews the heartbeat every kHeartbeatSeconds, whatever the
// engine is doing (tokenizing, converting, a long step). A busy or briefly
// unreachable database is ridden out: a missed beat is retried at the next.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <thread>

namespace latentlab {

class LeaseKeeper {
 public:
  LeaseKeeper(std::filesystem::path database, std::int64_t runId);
  ~LeaseKeeper();  // stops and joins the thread
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  std::uint64_t beats() const { return m_beats.load(); }  // renewals that reached the database

 private:
  void loop();
  std::filesystem::path m_database;
  std::int64_t m_runId;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  std::atomic<std::uint64_t> m_beats{0};
  std::thread m_thread;
};

}  // namespace latentlab
