// The engine's line protocol (docs/line_protocol.md): one JSON object a line on
// stdout of `latentlab-engine run`, read by the workbench. Every event kind and
// field is defined here once: the engine writes lines with eventLine(), the
// workbench reads them with parseEventLine().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace latentlab {

inline constexpr int kLineProtocolVersion = 1;

// Unknown and Malformed are what a reader makes of a line, never written.
enum class EventKind { Hello, Status, Progress, Eval, EvalTask, Checkpoint, Log, Unknown, Malformed };

// The `event` field's value of a kind ("eval_task"); "" for Unknown and Malformed.
const char* eventKindName(EventKind kind);

// One line. Only the fields of its kind are written and read (the table in
// docs/line_protocol.md); the others keep their defaults.
struct EngineEvent {
  EventKind kind = EventKind::Log;
  std::int64_t run = 0;     // hello, status
  int protocol = 0;         // hello
  std::int64_t pid = 0;     // hello
  std::string status;       // status: running | completed | failed | cancelled
  std::string error;        // status: why it failed (empty: not written)
  std::int64_t step = 0;    // progress, eval, eval_task, checkpoint
  std::int64_t steps = 0;   // progress
  std::int64_t tokens = 0;  // progress
  // progress of a training step (absent in an evaluation job's progress)
  std::optional<double> loss, lr, gradNorm, tokensPerSecond;
  double valLoss = 0;           // eval
  std::string task;             // eval_task
  double acc = 0, accNorm = 0;  // eval_task
  std::int64_t items = 0;       // eval_task
  std::string path;             // checkpoint
  std::string level;            // log: info | warning | error
  std::string message;          // log; the raw line of Unknown and Malformed

  static EngineEvent hello(std::int64_t run, std::int64_t pid);
  static EngineEvent statusOf(std::int64_t run, std::string status, std::string error = {});
  static EngineEvent progressOf(std::int64_t step, std::int64_t steps, std::int64_t tokens);
  static EngineEvent evalOf(std::int64_t step, double valLoss);
  static EngineEvent evalTaskOf(std::int64_t step, std::string task, double acc, double accNorm, std::int64_t items);
  static EngineEvent checkpointOf(std::int64_t step, std::string path);
  static EngineEvent logOf(std::string level, std::string message);
};

// The event as one JSON line (no newline). Throws Error(Internal) for Unknown
// and Malformed.
std::string eventLine(const EngineEvent& event);

// A line as an event: Malformed when it is not a JSON object, Unknown when its
// `event` names no kind above (both keep the line in `message`).
EngineEvent parseEventLine(std::string_view line);

}  // namespace latentlab
