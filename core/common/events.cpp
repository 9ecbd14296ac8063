// The line protocol's events to and from JSON (latentlab/events.h).
#include "latentlab/events.h"

#include <nlohmann/json.hpp>

#include "latentlab/error.h"

namespace latentlab {
using nlohmann::json;

namespace {

struct KindName {
  EventKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {EventKind::Hello, "hello"}, {EventKind::Status, "status"},      {EventKind::Progress, "progress"},
    {EventKind::Eval, "eval"},   {EventKind::EvalTask, "eval_task"}, {EventKind::Checkpoint, "checkpoint"},
    {EventKind::Log, "log"},
};

EventKind kindFromName(std::string_view name) {
  for (const KindName& k : kKindNames) {
    if (name == k.name) return k.kind;
  }
  return EventKind::Unknown;
}

// A field of a line, or the default when absent or of another JSON type.
template <typename T>
T field(const json& o, const char* key, T fallback = T{}) {
  const auto it = o.find(key);
  if (it == o.end()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->template get<std::string>() : fallback;
  } else {
    return it->is_number() ? it->template get<T>() : fallback;
  }
}

std::optional<double> optionalNumber(const json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

const char* eventKindName(EventKind kind) {
  for (const KindName& k : kKindNames) {
    if (k.kind == kind) return k.name;
  }
  return "";
}

EngineEvent EngineEvent::hello(std::int64_t run, std::int64_t pid) {
  EngineEvent e;
  e.kind = EventKind::Hello;
  e.protocol = kLineProtocolVersion;
  e.run = run;
  e.pid = pid;
  return e;
}

EngineEvent EngineEvent::statusOf(std::int64_t run, std::string status, std::string error) {
  EngineEvent e;
  e.kind = EventKind::Status;
  e.run = run;
  e.status = std::move(status);
  e.error = std::move(error);
  return e;
}

EngineEvent EngineEvent::progressOf(std::int64_t step, std::int64_t steps, std::int64_t tokens) {
  EngineEvent e;
  e.kind = EventKind::Progress;
  e.step = step;
  e.steps = steps;
  e.tokens = tokens;
  return e;
}

EngineEvent EngineEvent::evalOf(std::int64_t step, double valLoss) {
  EngineEvent e;
  e.kind = EventKind::Eval;
  e.step = step;
  e.valLoss = valLoss;
  return e;
}

EngineEvent EngineEvent::evalTaskOf(std::int64_t step, std::string task, double acc, double accNorm,
                                    std::int64_t items) {
  EngineEvent e;
  e.kind = EventKind::EvalTask;
  e.step = step;
  e.task = std::move(task);
  e.acc = acc;
  e.accNorm = accNorm;
  e.items = items;
  return e;
}

EngineEvent EngineEvent::checkpointOf(std::int64_t step, std::string path) {
  EngineEvent e;
  e.kind = EventKind::Checkpoint;
  e.step = step;
  e.path = std::move(path);
  return e;
}

EngineEvent EngineEvent::logOf(std::string level, std::string message) {
  EngineEvent e;
  e.kind = EventKind::Log;
  e.level = std::move(level);
  e.message = std::move(message);
  return e;
}

std::string eventLine(const EngineEvent& e) {
  json j = {{"event", eventKindName(e.kind)}};
  switch (e.kind) {
    case EventKind::Hello:
      j["protocol"] = e.protocol;
      j["run"] = e.run;
      j["pid"] = e.pid;
      break;
    case EventKind::Status:
      j["run"] = e.run;
      j["status"] = e.status;
      if (!e.error.empty()) j["error"] = e.error;
      break;
    case EventKind::Progress:
      j["step"] = e.step;
      j["steps"] = e.steps;
      j["tokens"] = e.tokens;
      if (e.loss) j["loss"] = *e.loss;
      if (e.lr) j["lr"] = *e.lr;
      if (e.gradNorm) j["grad_norm"] = *e.gradNorm;
      if (e.tokensPerSecond) j["tokens_per_s"] = *e.tokensPerSecond;
      break;
    case EventKind::Eval:
      j["step"] = e.step;
      j["val_loss"] = e.valLoss;
      break;
    case EventKind::EvalTask:
      j["step"] = e.step;
      j["task"] = e.task;
      j["acc"] = e.acc;
      j["acc_norm"] = e.accNorm;
      j["items"] = e.items;
      break;
    case EventKind::Checkpoint:
      j["step"] = e.step;
      j["path"] = e.path;
      break;
    case EventKind::Log:
      j["level"] = e.level;
      j["message"] = e.message;
      break;
    case EventKind::Unknown:
    case EventKind::Malformed:
      throw Error(ErrorCode::Internal, "an unknown or malformed event cannot be written");
  }
  return j.dump();
}

EngineEvent parseEventLine(std::string_view line) {
  EngineEvent e;
  const json o = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (!o.is_object()) {
    e.kind = EventKind::Malformed;
    e.message = std::string(line);
    return e;
  }
  e.kind = kindFromName(field<std::string>(o, "event"));
  e.run = field<std::int64_t>(o, "run");
  switch (e.kind) {
    case EventKind::Hello:
      e.protocol = field<int>(o, "protocol");
      e.pid = field<std::int64_t>(o, "pid");
      break;
    case EventKind::Status:
      e.status = field<std::string>(o, "status");
      e.error = field<std::string>(o, "error");
      break;
    case EventKind::Progress:
      e.step = field<std::int64_t>(o, "step");
      e.steps = field<std::int64_t>(o, "steps");
      e.tokens = field<std::int64_t>(o, "tokens");
      e.loss = optionalNumber(o, "loss");
      e.lr = optionalNumber(o, "lr");
      e.gradNorm = optionalNumber(o, "grad_norm");
      e.tokensPerSecond = optionalNumber(o, "tokens_per_s");
      break;
    case EventKind::Eval:
      e.step = field<std::int64_t>(o, "step");
      e.valLoss = field<double>(o, "val_loss");
      break;
    case EventKind::EvalTask:
      e.step = field<std::int64_t>(o, "step");
      e.task = field<std::string>(o, "task");
      e.acc = field<double>(o, "acc");
      e.accNorm = field<double>(o, "acc_norm");
      e.items = field<std::int64_t>(o, "items");
      break;
    case EventKind::Checkpoint:
      e.step = field<std::int64_t>(o, "step");
      e.path = field<std::string>(o, "path");
      break;
    case EventKind::Log:
      e.level = field<std::string>(o, "level");
      e.message = field<std::string>(o, "message");
      break;
    case EventKind::Unknown:
    case EventKind::Malformed:
      e.message = std::string(line);
      break;
  }
  return e;
}

}  // namespace latentlab
