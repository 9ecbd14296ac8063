// JSON line -> EngineEvent: the engine's own event definitions
// (latentlab/events.h), turned into Qt types for the workbench.
#include "jobs/line_protocol_parser.h"

#include "latentlab/events.h"

namespace latentlab::ui {

EngineEvent parseEngineLine(const QByteArray& raw) {
  const QByteArray line = raw.trimmed();
  const latentlab::EngineEvent e =
      latentlab::parseEventLine(std::string_view(line.constData(), static_cast<std::size_t>(line.size())));
  auto text = [](const std::string& s) { return QString::fromStdString(s); };
  EngineEvent ev;
  ev.run = e.run;
  switch (e.kind) {
    case latentlab::EventKind::Hello:
      ev.kind = EngineEvent::Kind::Hello;
      ev.protocol = e.protocol;
      ev.pid = e.pid;
      break;
    case latentlab::EventKind::Status:
      ev.kind = EngineEvent::Kind::Status;
      ev.status = text(e.status);
      ev.error = text(e.error);
      break;
    case latentlab::EventKind::Progress:
      ev.kind = EngineEvent::Kind::Progress;
      ev.step = e.step;
      ev.steps = e.steps;
      ev.tokens = e.tokens;
      ev.hasLoss = e.loss.has_value();
      ev.loss = e.loss.value_or(0.0);
      ev.lr = e.lr.value_or(0.0);
      ev.gradNorm = e.gradNorm.value_or(0.0);
      ev.tokensPerSec = e.tokensPerSecond.value_or(0.0);
      break;
    case latentlab::EventKind::Eval:
      ev.kind = EngineEvent::Kind::Eval;
      ev.step = e.step;
      ev.valLoss = e.valLoss;
      break;
    case latentlab::EventKind::EvalTask:
      ev.kind = EngineEvent::Kind::EvalTask;
      ev.step = e.step;
      ev.task = text(e.task);
      ev.acc = e.acc;
      ev.accNorm = e.accNorm;
      ev.items = e.items;
      break;
    case latentlab::EventKind::Checkpoint:
      ev.kind = EngineEvent::Kind::Checkpoint;
      ev.step = e.step;
      ev.path = text(e.path);
      break;
    case latentlab::EventKind::Log:
      ev.kind = EngineEvent::Kind::Log;
      ev.level = text(e.level);
      ev.message = text(e.message);
      break;
    case latentlab::EventKind::Unknown:
    case latentlab::EventKind::Malformed:  // the line itself, for the log
      ev.kind = e.kind == latentlab::EventKind::Unknown ? EngineEvent::Kind::Unknown : EngineEvent::Kind::Malformed;
      ev.message = QString::fromUtf8(line);
      break;
  }
  return ev;
}

QVector<EngineEvent> LineProtocolParser::feed(const QByteArray& bytes) {
  QVector<EngineEvent> out;
  m_pending.append(bytes);
  qsizetype nl = 0;
  while ((nl = m_pending.indexOf('\n')) >= 0) {
    const QByteArray line = m_pending.left(nl);
    m_pending.remove(0, nl + 1);
    if (!line.trimmed().isEmpty()) out.push_back(parseEngineLine(line));
  }
  return out;
}

QVector<EngineEvent> LineProtocolParser::finish() {
  QVector<EngineEvent> out;
  if (!m_pending.trimmed().isEmpty()) out.push_back(parseEngineLine(m_pending));
  m_pending.clear();
  return out;
}

}  // namespace latentlab::ui
