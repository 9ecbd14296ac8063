// Output folders of conversions and exports.
#include "convert/output_folder.h"

#include <fcntl.h>
#include <unistd.h>
#include <cstdio>

#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

void checkOutputFolder(const fs::path& out, const fs::path& source, bool force, const std::string& what) {
  if (out.empty()) throw Error(ErrorCode::BadInput, what + ": no output folder given");
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (!force) {
    throw Error(ErrorCode::BadInput, out.string() + ": output folder already exists",
                "Choose a new folder, or pass --force to replace it.");
  }
  if (fs::equivalent(out, source, ec)) {
    throw Error(ErrorCode::BadInput, out.string() + ": the output folder is the input model",
                "Write the result to a new folder.");
  }
  const bool replaceable = fs::is_directory(out, ec) && (fs::is_empty(out, ec) || fs::exists(out / "config.json", ec));
  if (!replaceable) {
    throw Error(ErrorCode::BadInput,
                out.string() + ": exists and is not a model folder; --force only replaces model folders",
                "Choose a new folder.");
  }
}

namespace {
void fsyncFolder(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}
}  // namespace

std::optional<fs::path> writeReplacingFolder(const fs::path& target,
                                             const std::function<void(const fs::path&)>& write) {
  std::error_code ec;
  const std::string pid = std::to_string(::getpid());
  fs::path tmp = target;
  tmp += ".writing-" + pid;
  fs::remove_all(tmp, ec);
  // Every file goes into the temporary folder; the folder is synced, then renamed last.
  try {
    write(tmp);
    fsyncFolder(tmp);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::exists(target, ec)) {
    fs::rename(tmp, target, ec);
    if (ec) {
      const std::string why = ec.message();
      fs::remove_all(tmp, ec);
      throw Error(ErrorCode::Io, target.string() + ": cannot move the new folder into place: " + why);
    }
    fsyncFolder(parent);
    return std::nullopt;
  }
  // Replacing: the two folders swap names in one step where the filesystem can
  // (the old one then sits at the temporary name), else the old one is moved
  // aside first and back if the new one cannot take its place. Either way the
  // old folder is whole at its name until the new one is there.
  fs::path old = tmp;
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
    old = target;
    old += ".old-" + pid;
    fs::remove_all(old, ec);
    fs::rename(target, old, ec);
    if (ec) {
      const std::string why = ec.message();
      fs::remove_all(tmp, ec);
      throw Error(ErrorCode::Io, target.string() + ": cannot move the old folder aside: " + why,
                  "The old folder is unchanged.");
    }
    fs::rename(tmp, target, ec);
    if (ec) {
      const std::string why = ec.message();
      std::error_code back;
      fs::rename(old, target, back);
      fs::remove_all(tmp, ec);
      throw Error(ErrorCode::Io, target.string() + ": cannot move the new folder into place: " + why,
                  back ? "The old folder is at " + old.string() + "." : "The old folder is unchanged.");
    }
  }
  fsyncFolder(parent);
  // The new model is in place; the old one is named as the replaced model
  // (not as an unfinished write) before it goes, so what of it cannot be
  // removed stays beside the target under a name that says what it is.
  if (old == tmp) {
    fs::path replaced = target;
    replaced += ".replaced-" + pid;
    fs::remove_all(replaced, ec);
    fs::rename(old, replaced, ec);
    if (!ec) old = replaced;
  }
  fs::remove_all(old, ec);
  if (ec || fs::exists(old, ec)) return old;
  return std::nullopt;
}

}  // namespace latentlab
