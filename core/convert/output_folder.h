// The output folder of a conversion or an export: checked before any work,
// and written beside the old one then swapped in, so a failure leaves the
// old folder as it was and no half-written folder at its name.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace latentlab {

// Throws Error(BadInput) when `out` is empty, exists without `force`, is the
// `source` folder, or exists and is neither empty nor a model folder.
// `what` names the step in the messages ("convert", "export").
void checkOutputFolder(const std::filesystem::path& out, const std::filesystem::path& source, bool force,
                       const std::string& what);

// Calls write(dir) with a sibling folder `target.writing-PID`, syncs it and
// renames it to `target`. An existing `target` is swapped out, never deleted
// before the new folder has its name: on any failure the temporary folder is
// removed and the old `target` is whole. Returns where the old folder was left
// when it could not be removed after the swap (the new model is in place then).
std::optional<std::filesystem::path> writeReplacingFolder(
    const std::filesystem::path& target, const std::function<void(const std::filesystem::path&)>& write);

}  // namespace latentlab
