// Progress reporting and cooperative cancellation for long engine calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace latentlab {

enum class LogLevel { Debug, Info, Warning, Error };

// Receives progress from long core calls. Implementations must be cheap: the
// engine calls progress() at most a few times per second per stage.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // `done` of `total` units (total <= 0 when unknown) of the named stage.
  virtual void progress(std::string_view stage, double done, double total, std::string_view detail) = 0;
  virtual void log(LogLevel level, std::string_view message) = 0;
};

// Discards everything.
class NullProgress final : public ProgressSink {
 public:
  void progress(std::string_view, double, double, std::string_view) override {}
  void log(LogLevel, std::string_view) override {}
};

// An atomic flag the engine reads between steps; set from any thread or a
// signal handler.
class CancelToken {
 public:
  void request() noexcept { m_requested.store(true, std::memory_order_relaxed); }
  bool requested() const noexcept { return m_requested.load(std::memory_order_relaxed); }
  void reset() noexcept { m_requested.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> m_requested{false};
};

// Throws Error(ErrorCode::Cancelled) when cancellation was requested.
void throwIfCancelled(const CancelToken& cancel, std::string_view where);

}  // namespace latentlab
