// Typed access to JSON fields with errors that name the file and the field.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "latentlab/error.h"
#include "latentlab/vocabulary.h"

namespace latentlab {

// Calls fn(object, "file:line") for each non-blank line of a JSONL file; a
// line that is not valid JSON throws Error(code) naming the file and line.
void forEachJsonLine(const std::filesystem::path& path, ErrorCode code, const std::string& hint,
                     const std::function<void(const nlohmann::json& line, const std::string& where)>& fn);

// Parses `text`; on a syntax error throws Error(code) naming `source` and the
// byte offset.
nlohmann::json parseJson(const std::string& text, const std::string& source, ErrorCode code);

class JsonReader {
 public:
  JsonReader(const nlohmann::json& obj, std::string source, ErrorCode code)
      : m_obj(obj), m_source(std::move(source)), m_code(code) {}

  bool has(const std::string& key) const;
  // Required fields: missing or of the wrong type is an error naming the field.
  int requireInt(const std::string& key) const;
  double requireDouble(const std::string& key) const;
  std::string requireString(const std::string& key) const;
  // Optional fields: absent or null gives the fallback; the wrong type is an error.
  int optInt(const std::string& key, int fallback) const;
  std::optional<int> optIntOrNull(const std::string& key) const;
  double optDouble(const std::string& key, double fallback) const;
  bool optBool(const std::string& key, bool fallback) const;
  std::string optString(const std::string& key, const std::string& fallback) const;

  // A vocabulary choice: one of E's names (or aliases); another name is an
  // error naming the field, the name and the names E takes.
  template <typename E>
  E requireChoice(const std::string& key) const {
    return choiceOf<E>(key, requireString(key));
  }
  // The same for an optional field: nullopt when absent, null or empty.
  template <typename E>
  std::optional<E> optChoice(const std::string& key) const {
    const std::string name = optString(key, "");
    if (name.empty()) return std::nullopt;
    return choiceOf<E>(key, name);
  }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;
  const std::string& source() const { return m_source; }

 private:
  template <typename E>
  E choiceOf(const std::string& key, const std::string& name) const {
    if (const auto v = findChoice<E>(name)) return *v;
    std::string names;
    for (const auto& n : choiceNames<E>()) names += (names.empty() ? "" : ", ") + n;
    fail(key, "is '" + name + "', not one of " + names);
  }

  const nlohmann::json& m_obj;
  std::string m_source;
  ErrorCode m_code;
};

}  // namespace latentlab
