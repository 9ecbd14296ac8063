// Workspace paths shared by the engine's verbs.
#pragma once

#include <filesystem>

namespace latentlab::cli {

// The workspace a DB belongs to: the folder holding it.
inline std::filesystem::path workspaceOf(const std::filesystem::path& db) {
  auto abs = std::filesystem::absolute(db);
  return abs.has_parent_path() ? abs.parent_path() : std::filesystem::current_path();
}

}  // namespace latentlab::cli
