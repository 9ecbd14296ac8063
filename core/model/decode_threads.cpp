// A small pool of workers that look for work for a while before sleeping.
#include "model/decode_threads.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace latentlab {

namespace {

class DecodeThreads {
 public:
  // Never destroyed: its workers sleep or look for work until the process exits.
  static DecodeThreads& instance() {
    static auto* pool = new DecodeThreads();
    return *pool;
  }

  // task(i) for every chunk i in [0, chunks), taken in turn by the caller and
  // any worker awake to take one; returns once all are done. A worker that is
  // late (asleep, or its core busy elsewhere) finds every chunk taken and
  // holds nobody up: only a chunk already started is waited for. False
  // (nothing run) when another call holds the pool.
  bool run(std::int64_t chunks, int workers, const std::function<void(std::int64_t)>& task) {
    std::unique_lock busy(m_busy, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    grow(workers);
    m_task = &task;
    m_chunks.store(chunks, std::memory_order_relaxed);
    m_done.store(0, std::memory_order_relaxed);
    const std::uint64_t call = m_call.load(std::memory_order_relaxed) + 1;
    m_next.store(call << 32, std::memory_order_relaxed);  // this call's tag, chunk 0 next
    m_call.store(call, std::memory_order_seq_cst);        // publishes all of the above
    if (m_sleepers.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard lock(m_sleep);  // a worker between its check and its wait holds this
      m_wake.notify_all();
    }
    take(call);
    while (m_done.load(std::memory_order_acquire) < chunks) std::this_thread::yield();
    return true;
  }

 private:
  DecodeThreads() = default;

  void grow(int workers) {
    while (static_cast<int>(m_workers.size()) < workers) {
      // A new worker has seen every call so far.
      m_workers.emplace_back([this, seen = m_call.load()] { loop(seen); }).detach();
    }
  }

  [[noreturn]] void loop(std::uint64_t seen) {
    for (;;) take(seen = next(seen));
  }

  // Runs chunks of call `call` until none is left (or that call has ended).
  void take(std::uint64_t call) {
    for (;;) {
      std::uint64_t v = m_next.load(std::memory_order_acquire);
      std::int64_t i = 0;
      do {
        i = static_cast<std::int64_t>(v & 0xffffffffU);
        if ((v >> 32) != (call & 0xffffffffU) || i >= m_chunks.load(std::memory_order_relaxed)) return;
      } while (!m_next.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel));
      (*m_task)(i);  // the call waits for this chunk, so its task is still there
      m_done.fetch_add(1, std::memory_order_release);
    }
  }

  // Waits for a call after `seen`, looking for kDecodeThreadsSpin, then sleeping.
  std::uint64_t next(std::uint64_t seen) {
    const auto until = std::chrono::steady_clock::now() + kDecodeThreadsSpin;
    for (int i = 0;; ++i) {
      const std::uint64_t now = m_call.load(std::memory_order_acquire);
      if (now != seen) return now;
      if ((i & 15) == 15 && std::chrono::steady_clock::now() > until) break;
      std::this_thread::yield();  // the core stays free for any other thread that wants it
    }
    std::unique_lock lock(m_sleep);
    m_sleepers.fetch_add(1, std::memory_order_seq_cst);
    m_wake.wait(lock, [&] { return m_call.load(std::memory_order_seq_cst) != seen; });
    m_sleepers.fetch_sub(1, std::memory_order_relaxed);
    return m_call.load(std::memory_order_acquire);
  }

  std::mutex m_busy;  // held by the call in progress
  std::vector<std::thread> m_workers;
  const std::function<void(std::int64_t)>* m_task = nullptr;
  // Atomic: a worker late for a call may read it as the next call sets it
  // (its compare-exchange on m_next then fails on the new call's tag).
  std::atomic<std::int64_t> m_chunks{0};
  std::atomic<std::uint64_t> m_call{0};  // calls so far
  std::atomic<std::uint64_t> m_next{0};  // the current call (low 32 bits) << 32 | its next chunk
  std::atomic<std::int64_t> m_done{0};   // chunks of the current call finished
  std::atomic<int> m_sleepers{0};
  std::mutex m_sleep;
  std::condition_variable m_wake;
};

}  // namespace

void decodeParallelFor(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(1, grain);
  const std::int64_t threads = std::min<std::int64_t>(at::get_num_threads(), (n + grain - 1) / grain);
  if (threads <= 1) return fn(0, n);
  // Four chunks a thread: a thread that starts late, or is slowed, leaves its share to the others.
  const std::int64_t chunks = std::min(n, 4 * threads), size = (n + chunks - 1) / chunks;
  const std::function<void(std::int64_t)> task = [&](std::int64_t i) {
    const std::int64_t begin = i * size, end = std::min(n, begin + size);
    if (begin < end) fn(begin, end);
  };
  if (DecodeThreads::instance().run(chunks, static_cast<int>(threads) - 1, task)) return;
  fn(0, n);  // the pool is busy: this thread alone
}

}  // namespace latentlab
