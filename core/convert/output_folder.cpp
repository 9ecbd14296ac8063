// Output folders of conversions and exports.
#include "convert/output_folder.h"

#include <unistd.h>

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
    throw Error(ErrorCode::BadInput, out.string() + ": exists and is not a model folder; --force only replaces model folders",
                "Choose a new folder.");
  }
}

void writeReplacingFolder(const fs::path& target, const std::function<void(const fs::path&)>& write) {
  std::error_code ec;
  const bool replacing = fs::exists(target, ec);
  fs::path writeTo = target;
  if (replacing) writeTo += ".writing-" + std::to_string(::getpid());
  fs::remove_all(writeTo, ec);
  write(writeTo);
  if (!replacing) return;
  fs::remove_all(target, ec);
  if (ec) throw Error(ErrorCode::Io, target.string() + ": cannot remove the old folder: " + ec.message());
  fs::rename(writeTo, target, ec);
  if (ec) throw Error(ErrorCode::Io, target.string() + ": cannot move the new folder into place: " + ec.message());
}

}  // namespace latentlab
