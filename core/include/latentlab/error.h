// The single error type the engine throws: a code, a message that names the
// file or field at fault, and a hint for the user.
#pragma once

#include <stdexcept>
#include <string>

namespace latentlab {

enum class ErrorCode {
  BadInput,       // malformed user input (CLI arguments, values out of range)
  BadModel,       // model folder / config.json problems
  BadCheckpoint,  // safetensors / weight problems
  BadData,        // corpus, tokenizer, token shards
  BadSpec,        // run spec validation
  Unsupported,    // valid input LatentLab does not handle (yet)
  Io,             // filesystem errors (missing file, full disk, permissions)
  Store,          // SQLite run store
  Device,         // CUDA / device problems
  Numeric,        // NaN / inf loss and similar
  Cancelled,      // the user asked to stop
  Internal,       // a bug: an invariant did not hold
};

const char* errorCodeName(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, std::string hint = {});

  ErrorCode code() const noexcept { return m_code; }
  const std::string& message() const noexcept { return m_message; }
  const std::string& hint() const noexcept { return m_hint; }

  // A copy whose message is prefixed with `context: ` (a file, a stage).
  Error withContext(const std::string& context) const;

 private:
  ErrorCode m_code;
  std::string m_message;
  std::string m_hint;
};

}  // namespace latentlab
