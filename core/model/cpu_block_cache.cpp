// The large-block cache behind LibTorch's CPU allocator.
#include "model/cpu_block_cache.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace latentlab {

namespace {

constexpr std::size_t kLargeBlock = std::size_t{1} << 20;  // 1 MiB: smaller blocks are the system's business
constexpr std::size_t kGranule = std::size_t{1} << 16;     // sizes rounded up to 64 KiB, so near sizes share blocks
constexpr std::size_t kAlignment = 64;                     // what LibTorch's own CPU allocator guarantees

class BlockCache final : public c10::Allocator {
 public:
  BlockCache(c10::Allocator* fallback, std::size_t maxCached) : m_fallback(fallback), m_maxCached(maxCached) {}

  c10::DataPtr allocate(std::size_t n) override {
    if (n < kLargeBlock || !m_enabled.load(std::memory_order_relaxed)) {
      if (!m_countSmall.load(std::memory_order_relaxed)) return m_fallback->allocate(n);
      // Counted: the fallback's block is kept here until our deleter sees
      // its pointer again (context = data, as raw_allocate requires).
      c10::DataPtr inner = m_fallback->allocate(n);
      void* data = inner.get();
      if (data == nullptr) return inner;
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_small.emplace(data, SmallBlock{std::move(inner), n});
        m_liveBytes += n;
        m_peakLive = std::max(m_peakLive, m_liveBytes);
      }
      return {data, data, &BlockCache::deleteSmall, c10::Device(c10::DeviceType::CPU)};
    }
    std::size_t size = (n + kGranule - 1) / kGranule * kGranule;
    void* p = nullptr;
    {
      // The smallest cached block that holds `size` and wastes less than half
      // of itself: shrinking requests (scoring longest-first) reuse the larger
      // blocks of earlier ones instead of adding a new size to the cache.
      std::lock_guard<std::mutex> lock(m_mutex);
      auto it = m_free.lower_bound(size);
      if (it != m_free.end() && it->first < 2 * size) {
        p = it->second->p;
        size = it->first;
        m_lru.erase(it->second);
        m_free.erase(it);
        m_cached -= size;
        ++m_stats.hits;
      } else {
        ++m_stats.misses;
      }
    }
    if (p == nullptr) {
      p = std::aligned_alloc(kAlignment, size);
      if (p == nullptr) {
        releaseAll();  // what the cache holds may be what is missing
        p = std::aligned_alloc(kAlignment, size);
      }
      if (p == nullptr) throw std::bad_alloc();
    }
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_live[p] = size;
      m_liveBytes += size;
      m_peakLive = std::max(m_peakLive, m_liveBytes);
      m_largeLive += size;
      m_largeHigh = std::max(m_largeHigh, m_largeLive);
    }
    return {p, p, &BlockCache::deleteBlock, c10::Device(c10::DeviceType::CPU)};
  }

  // oneDNN (bf16 GEMMs on the CPU) allocates through raw_allocate and frees
  // through raw_deallocate, i.e. this deleter: it takes any block this
  // allocator handed out, large, counted small, or the fallback's.
  c10::DeleterFnPtr raw_deleter() const override { return &BlockCache::deleteAny; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

  // Returns a large block to the cache; false when `p` is not one. The cache
  // then gives back its least recently freed blocks until it holds at most
  // the bound and at most the most bytes the large tensors held at once since
  // it was last emptied: it keeps what the job needs again, never a block of
  // every size a job passed through (requests that grow leave their smaller
  // blocks behind).
  bool release(void* p) {
    std::vector<void*> dropped;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      auto it = m_live.find(p);
      if (it == m_live.end()) return false;
      const std::size_t size = it->second;
      m_live.erase(it);
      m_liveBytes -= size;
      m_largeLive -= size;
      m_lru.push_back({p, size});
      m_free.emplace(size, std::prev(m_lru.end()));
      m_cached += size;
      const std::size_t limit = std::min(m_maxCached, m_largeHigh);
      while (m_cached > limit) {
        const FreeBlock oldest = m_lru.front();
        auto [first, last] = m_free.equal_range(oldest.size);
        while (first != last && first->second != m_lru.begin()) ++first;
        m_free.erase(first);
        m_lru.pop_front();
        m_cached -= oldest.size;
        dropped.push_back(oldest.p);
      }
    }
    for (void* q : dropped) std::free(q);
    return true;
  }

  void releaseAll() {
    std::list<FreeBlock> blocks;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      blocks.swap(m_lru);
      m_free.clear();
      m_cached = 0;
      m_largeHigh = m_largeLive;
    }
    for (const FreeBlock& b : blocks) std::free(b.p);
  }

  CpuBlockCacheStats stats() {
    std::lock_guard<std::mutex> lock(m_mutex);
    CpuBlockCacheStats s = m_stats;
    s.cachedBytes = static_cast<std::int64_t>(m_cached);
    s.liveBytes = static_cast<std::int64_t>(m_liveBytes);
    s.peakLiveBytes = static_cast<std::int64_t>(m_peakLive);
    return s;
  }

  void resetPeak() {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_peakLive = m_liveBytes;
  }

  static void deleteBlock(void* p);
  bool releaseSmall(void* p);
  static void deleteSmall(void* p);
  static void deleteAny(void* p);
  void setEnabled(bool on) { m_enabled.store(on); }
  std::size_t setLimit(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(m_mutex);
    const std::size_t old = m_maxCached;
    m_maxCached = bytes;
    return old;
  }
  void setCountSmall(bool on) { m_countSmall.store(on); }

 private:
  struct SmallBlock {
    c10::DataPtr inner;
    std::size_t size;
  };
  std::atomic<bool> m_enabled{true};
  std::atomic<bool> m_countSmall{false};
  c10::Allocator* m_fallback;
  std::size_t m_maxCached;
  std::mutex m_mutex;
  struct FreeBlock {
    void* p;
    std::size_t size;
  };
  std::list<FreeBlock> m_lru;                                         // freed blocks, oldest first
  std::multimap<std::size_t, std::list<FreeBlock>::iterator> m_free;  // rounded size -> freed block
  std::unordered_map<void*, std::size_t> m_live;                      // blocks handed out -> rounded size
  std::unordered_map<void*, SmallBlock> m_small;                      // counted small blocks -> the fallback's block
  std::size_t m_cached = 0;
  std::size_t m_liveBytes = 0;
  std::size_t m_peakLive = 0;
  std::size_t m_largeLive = 0;  // large blocks handed out
  std::size_t m_largeHigh = 0;  // the most m_largeLive reached since the cache was last emptied
  CpuBlockCacheStats m_stats;
};

// Never destroyed: tensors may be freed during static destruction.
BlockCache* g_cache = nullptr;
std::once_flag g_once;

void BlockCache::deleteBlock(void* p) {
  g_cache->release(p);
}

void BlockCache::deleteAny(void* p) {
  if (p == nullptr || g_cache->release(p) || g_cache->releaseSmall(p)) return;
  // A small block the fallback handed out uncounted.
  if (c10::DeleterFnPtr d = g_cache->m_fallback->raw_deleter())
    d(p);
  else
    c10::free_cpu(p);
}

void BlockCache::deleteSmall(void* p) {
  g_cache->releaseSmall(p);
}

bool BlockCache::releaseSmall(void* p) {
  c10::DataPtr inner;
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_small.find(p);
    if (it == m_small.end()) return false;
    m_liveBytes -= it->second.size;
    inner = std::move(it->second.inner);
    m_small.erase(it);
  }
  return true;  // `inner` frees the fallback's block as it goes out of scope, outside the lock
}

}  // namespace

namespace {
// MemAvailable of /proc/meminfo in bytes, 0 when unknown.
std::size_t availableMemory() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return static_cast<std::size_t>(kib) * 1024;
}
}  // namespace

void installCpuBlockCache(std::size_t maxCachedBytes) {
  std::call_once(g_once, [&] {
    // At most an eighth of the memory available when the engine starts.
    if (const std::size_t free = availableMemory(); free > 0) maxCachedBytes = std::min(maxCachedBytes, free / 8);
    g_cache = new BlockCache(c10::GetDefaultCPUAllocator(), maxCachedBytes);
    // Priority above the default's (0) so that LibTorch's later registrations at 0 do not replace it.
    c10::SetCPUAllocator(g_cache, /*priority=*/1);
  });
}

bool cpuBlockCacheInstalled() {
  return g_cache != nullptr;
}

CpuBlockCacheStats cpuBlockCacheStats() {
  return g_cache != nullptr ? g_cache->stats() : CpuBlockCacheStats{};
}

void resetCpuBlockCachePeak() {
  if (g_cache != nullptr) g_cache->resetPeak();
}

void releaseCpuBlockCache() {
  if (g_cache != nullptr) g_cache->releaseAll();
}

void setCpuBlockCacheCountsSmallBlocks(bool on) {
  if (g_cache != nullptr) g_cache->setCountSmall(on);
}

std::size_t setCpuBlockCacheLimit(std::size_t bytes) {
  if (g_cache == nullptr) return 0;
  const std::size_t old = g_cache->setLimit(bytes);
  g_cache->releaseAll();
  return old;
}

void setCpuBlockCacheEnabled(bool enabled) {
  if (g_cache == nullptr) return;
  g_cache->setEnabled(enabled);
  if (!enabled) g_cache->releaseAll();
}

}  // namespace latentlab
