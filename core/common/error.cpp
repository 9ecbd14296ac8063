// Error type and cancellation helpers.
#include "latentlab/error.h"
#include "latentlab/progress.h"

namespace latentlab {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::BadInput:
      return "bad-input";
    case ErrorCode::BadModel:
      return "bad-model";
    case ErrorCode::BadCheckpoint:
      return "bad-checkpoint";
    case ErrorCode::BadData:
      return "bad-data";
    case ErrorCode::BadSpec:
      return "bad-spec";
    case ErrorCode::Unsupported:
      return "unsupported";
    case ErrorCode::Io:
      return "io";
    case ErrorCode::Store:
      return "store";
    case ErrorCode::Device:
      return "device";
    case ErrorCode::Numeric:
      return "numeric";
    case ErrorCode::Cancelled:
      return "cancelled";
    case ErrorCode::Internal:
      return "internal";
  }
  return "unknown";
}

Error::Error(ErrorCode code, std::string message, std::string hint)
    : std::runtime_error(message), m_code(code), m_message(std::move(message)), m_hint(std::move(hint)) {}

Error Error::withContext(const std::string& context) const {
  return Error(m_code, context + ": " + m_message, m_hint);
}

void throwIfCancelled(const CancelToken& cancel, std::string_view where) {
  if (cancel.requested()) {
    throw Error(ErrorCode::Cancelled, std::string(where) + ": cancelled");
  }
}

}  // namespace latentlab
