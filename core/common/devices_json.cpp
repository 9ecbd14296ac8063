// The devices list as `latentlab-engine devices --json` writes it and the
// workbench reads it (latentlab/engine.h).
#include <nlohmann/json.hpp>

#include "latentlab/engine.h"

namespace latentlab {
using nlohmann::json;

std::string devicesJson(const std::vector<DeviceInfo>& devices) {
  json j = json::array();
  for (const auto& d : devices) {
    j.push_back({{"id", d.id}, {"name", d.name}, {"memory_bytes", d.memoryBytes}, {"free_bytes", d.freeBytes}});
  }
  return j.dump();
}

std::vector<DeviceInfo> parseDevicesJson(std::string_view text) {
  const auto start = text.find('[');  // anything a launcher printed before the array is not ours
  const json list = start == std::string_view::npos ? json() : json::parse(text.substr(start), nullptr, false);
  std::vector<DeviceInfo> out;
  if (!list.is_array()) return out;
  for (const auto& d : list) {
    if (!d.is_object() || !d.contains("id") || !d["id"].is_string()) continue;
    DeviceInfo info;
    info.id = d["id"].get<std::string>();
    info.name = d.value("name", std::string());
    info.memoryBytes = d.value("memory_bytes", std::uint64_t{0});
    info.freeBytes = d.value("free_bytes", std::uint64_t{0});
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace latentlab
