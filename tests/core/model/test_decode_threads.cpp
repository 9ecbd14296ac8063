// The decode kernels' workers (model/decode_threads.h): every item of a range
// runs exactly once, in a few contiguous chunks, spread over the threads; a call
// from inside a call, and calls from two threads at once, still run all of
// their items; workers that fell asleep wake for the next call.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "model/decode_threads.h"

namespace latentlab::test {
namespace {

// This suite runs on one intra-op thread (single_thread.cpp); these tests want two.
class TwoThreads {
 public:
  TwoThreads() : m_before(torch::get_num_threads()) { torch::set_num_threads(2); }
  ~TwoThreads() { torch::set_num_threads(m_before); }

 private:
  int m_before;
};

// Runs decodeParallelFor(n, grain) and checks each item was visited once.
void expectEachItemOnce(std::int64_t n, std::int64_t grain) {
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
  std::atomic<int> ranges{0};
  decodeParallelFor(n, grain, [&](std::int64_t begin, std::int64_t end) {
    EXPECT_LT(begin, end);
    ranges.fetch_add(1);
    for (std::int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)].fetch_add(1);
  });
  for (std::int64_t i = 0; i < n; ++i)
    ASSERT_EQ(seen[static_cast<std::size_t>(i)].load(), 1) << "n " << n << " item " << i;
  // One range where one thread's grain covers all; else at most four a thread.
  if (n <= grain) {
    EXPECT_LE(ranges.load(), 1) << "n " << n << " grain " << grain;
  }
  EXPECT_LE(ranges.load(), 8) << "n " << n << " grain " << grain;
}

// The thread that takes the first chunk of a call holds it until another
// thread has taken one of the others, which only a second thread can do
// (10 s at most, for a machine under load).
void expectSharedByTwoThreads() {
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<bool> other{false};
  decodeParallelFor(64, 8, [&](std::int64_t begin, std::int64_t) {
    {
      std::lock_guard lock(m);
      threads.insert(std::this_thread::get_id());
    }
    if (begin == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!other.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    } else {
      other.store(true);
    }
  });
  EXPECT_TRUE(other.load());
  EXPECT_EQ(threads.size(), 2u);
}

}  // namespace

TEST(DecodeThreads, EveryItemRunsOnceAndTheWorkIsShared) {
  TwoThreads two;
  for (std::int64_t n : {0, 1, 2, 3, 7, 64, 1000})
    for (std::int64_t grain : {1, 2, 5, 100}) expectEachItemOnce(n, grain);
  // A range of several grains is shared, also by a worker that had gone to
  // sleep (past kDecodeThreadsSpin).
  expectSharedByTwoThreads();
  std::this_thread::sleep_for(kDecodeThreadsSpin * 20);
  expectSharedByTwoThreads();
  expectEachItemOnce(1000, 10);
}

TEST(DecodeThreads, NestedAndConcurrentCallsRunAllTheirItems) {
  TwoThreads two;
  // A call from inside a call runs on the calling thread.
  std::atomic<std::int64_t> inner{0};
  decodeParallelFor(4, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      decodeParallelFor(10, 1, [&](std::int64_t b, std::int64_t e) { inner.fetch_add(e - b); });
  });
  EXPECT_EQ(inner.load(), 40);
  // Two threads calling at once, many times.
  std::atomic<std::int64_t> total{0};
  auto caller = [&] {
    for (int call = 0; call < 500; ++call)
      decodeParallelFor(37, 3, [&](std::int64_t b, std::int64_t e) { total.fetch_add(e - b); });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 500 * 37);
}

}  // namespace latentlab::test
