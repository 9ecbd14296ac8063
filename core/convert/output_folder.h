// The output folder of a conversion or an export: checked before any work,
// and written beside the old one then swapped in, so a failure leaves the
// old folder as it was.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace latentlab {

// Throws Error(BadInput) when `out` is empty, exists without `force`, is the
// `source` folder, or exists and is neither empty nor a model folder.
// `what` names the step in the messages ("convert", "export").
void checkOutputFolder(const std::filesystem::path& out, const std::filesystem::path& source, bool force,
                       const std::string& what);

// Calls write(dir) with `target` itself, or, when `target` exists, with a
// sibling that then replaces it.
void writeReplacingFolder(const std::filesystem::path& target,
                          const std::function<void(const std::filesystem::path&)>& write);

}  // namespace latentlab
