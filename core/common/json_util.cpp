// Typed JSON field access with field-naming errors.
#include "common/json_util.h"

#include "common/file_util.h"

namespace latentlab {

nlohmann::json parseJson(const std::string& text, const std::string& source, ErrorCode code) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(code, source + ": invalid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    // e.g. a number too large for a double (1e999): named, not a raw exception.
    throw Error(code, source + ": invalid JSON: " + e.what(), "Numbers must fit a 64-bit float.");
  }
}

void forEachJsonLine(const std::filesystem::path& path, ErrorCode code, const std::string& hint,
                     const std::function<void(const nlohmann::json& line, const std::string& where)>& fn) {
  forEachLine(path, [&](std::string_view line, int number) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
    const std::string where = path.string() + ":" + std::to_string(number);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(code, where + ": not valid JSON: " + e.what(), hint);
    }
    fn(j, where);
  });
}

bool JsonReader::has(const std::string& key) const {
  return m_obj.is_object() && m_obj.contains(key) && !m_obj.at(key).is_null();
}

void JsonReader::fail(const std::string& key, const std::string& problem) const {
  throw Error(m_code, m_source + ": field '" + key + "' " + problem);
}

int JsonReader::requireInt(const std::string& key) const {
  if (!has(key)) fail(key, "is missing");
  const auto& v = m_obj.at(key);
  if (!v.is_number_integer()) fail(key, "must be an integer, got " + v.dump());
  auto x = v.get<long long>();
  if (x < INT32_MIN || x > INT32_MAX) fail(key, "is out of range: " + v.dump());
  return static_cast<int>(x);
}

double JsonReader::requireDouble(const std::string& key) const {
  if (!has(key)) fail(key, "is missing");
  const auto& v = m_obj.at(key);
  if (!v.is_number()) fail(key, "must be a number, got " + v.dump());
  return v.get<double>();
}

std::string JsonReader::requireString(const std::string& key) const {
  if (!has(key)) fail(key, "is missing");
  const auto& v = m_obj.at(key);
  if (!v.is_string()) fail(key, "must be a string, got " + v.dump());
  return v.get<std::string>();
}

int JsonReader::optInt(const std::string& key, int fallback) const {
  return has(key) ? requireInt(key) : fallback;
}

std::optional<int> JsonReader::optIntOrNull(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return requireInt(key);
}

double JsonReader::optDouble(const std::string& key, double fallback) const {
  return has(key) ? requireDouble(key) : fallback;
}

bool JsonReader::optBool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = m_obj.at(key);
  if (!v.is_boolean()) fail(key, "must be true or false, got " + v.dump());
  return v.get<bool>();
}

std::string JsonReader::optString(const std::string& key, const std::string& fallback) const {
  return has(key) ? requireString(key) : fallback;
}

}  // namespace latentlab
