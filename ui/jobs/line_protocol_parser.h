// Parses the engine's stdout JSON lines (docs/line_protocol.md, version 1;
// latentlab/events.h defines them) into typed events; tolerant of partial reads (buffers until a newline).
#pragma once

#include <QByteArray>
#include <QString>
#include <QVector>
#include <cstdint>

namespace latentlab::ui {

struct EngineEvent {
  enum class Kind { Hello, Status, Progress, Eval, EvalTask, Checkpoint, Log, Unknown, Malformed };
  Kind kind = Kind::Unknown;
  std::int64_t run = 0;
  std::int64_t pid = 0;
  int protocol = 0;
  QString status;  // status: running, completed, failed, cancelled
  QString error;   // status failed
  std::int64_t step = 0;
  std::int64_t steps = 0;
  std::int64_t tokens = 0;
  double loss = 0;
  bool hasLoss = false;  // progress: false for an eval job (no loss)
  double lr = 0;
  double gradNorm = 0;
  double tokensPerSec = 0;
  double valLoss = 0;
  QString task;  // eval_task: the task's name, its scores and items
  double acc = 0;
  double accNorm = 0;
  std::int64_t items = 0;
  QString path;     // checkpoint
  QString level;    // log
  QString message;  // log; the raw line for Unknown/Malformed
};

// One complete line (without the newline).
EngineEvent parseEngineLine(const QByteArray& line);

class LineProtocolParser {
 public:
  // Appends raw bytes; returns the events of every completed line.
  QVector<EngineEvent> feed(const QByteArray& bytes);
  // The unterminated rest as an event (at process end), if any.
  QVector<EngineEvent> finish();

 private:
  QByteArray m_pending;
};

}  // namespace latentlab::ui
