// JSON line -> EngineEvent (QJsonDocument; no engine headers needed).
#include "jobs/line_protocol_parser.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>

namespace latentlab::ui {

EngineEvent parseEngineLine(const QByteArray& raw) {
  EngineEvent ev;
  const QByteArray line = raw.trimmed();
  QJsonParseError err{};
  const QJsonDocument doc = QJsonDocument::fromJson(line, &err);
  if (err.error != QJsonParseError::NoError || !doc.isObject()) {
    ev.kind = EngineEvent::Kind::Malformed;
    ev.message = QString::fromUtf8(line);
    return ev;
  }
  const QJsonObject o = doc.object();
  auto i64 = [&](const char* key) { return static_cast<std::int64_t>(o.value(QLatin1String(key)).toDouble()); };
  auto dbl = [&](const char* key) { return o.value(QLatin1String(key)).toDouble(); };
  auto str = [&](const char* key) { return o.value(QLatin1String(key)).toString(); };
  const QString event = str("event");
  ev.run = i64("run");
  if (event == QLatin1String("hello")) {
    ev.kind = EngineEvent::Kind::Hello;
    ev.protocol = static_cast<int>(i64("protocol"));
    ev.pid = i64("pid");
  } else if (event == QLatin1String("status")) {
    ev.kind = EngineEvent::Kind::Status;
    ev.status = str("status");
    ev.error = str("error");
  } else if (event == QLatin1String("progress")) {
    ev.kind = EngineEvent::Kind::Progress;
    ev.step = i64("step");
    ev.steps = i64("steps");
    ev.tokens = i64("tokens");
    ev.loss = dbl("loss");
    ev.hasLoss = o.contains(QLatin1String("loss"));
    ev.lr = dbl("lr");
    ev.gradNorm = dbl("grad_norm");
    ev.tokensPerSec = dbl("tokens_per_s");
  } else if (event == QLatin1String("eval")) {
    ev.kind = EngineEvent::Kind::Eval;
    ev.step = i64("step");
    ev.valLoss = dbl("val_loss");
  } else if (event == QLatin1String("checkpoint")) {
    ev.kind = EngineEvent::Kind::Checkpoint;
    ev.step = i64("step");
    ev.path = str("path");
  } else if (event == QLatin1String("log")) {
    ev.kind = EngineEvent::Kind::Log;
    ev.level = str("level");
    ev.message = str("message");
  } else {
    ev.kind = EngineEvent::Kind::Unknown;
    ev.message = QString::fromUtf8(line);
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

} // namespace latentlab::ui
