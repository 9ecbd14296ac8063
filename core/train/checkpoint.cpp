// Atomic training checkpoints and resume.
#include "train/checkpoint.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/file_util.h"
#include "common/json_util.h"
#include "io/hf_checkpoint.h"
#include "latentlab/error.h"
#include "model/torch_util.h"
#include "model/weights.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
std::string stepName(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(step));
  return buf;
}
} // namespace

fs::path saveCheckpoint(const fs::path& runDir, CausalLm& model, torch::optim::Optimizer& optimizer,
                        const TrainerState& state, const std::string& specJson, int keep) {
  const fs::path root = runDir / "checkpoints";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw Error(ErrorCode::Io, root.string() + ": cannot create: " + ec.message());
  const fs::path final = root / stepName(state.step);
  fs::path tmp = root / (stepName(state.step) + ".partial-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  try {
    saveModel(model, tmp / "model", fromTorch(model.parameters().front().scalar_type()),
              {{"producer", "latentlab train"}, {"step", std::to_string(state.step)}});
    const fs::path opt = tmp / "optimizer.pt";
    torch::save(optimizer, opt.string());
    json st = {{"step", state.step}, {"tokens", state.tokens}, {"wall_seconds", state.wallSeconds},
               {"data", state.data.toJson()}};
    if (state.bestValLoss) st["best_val_loss"] = *state.bestValLoss;
    atomicWriteText(tmp / "trainer_state.json", st.dump(2) + "\n");
    atomicWriteText(tmp / "spec.json", specJson + "\n");
    fs::remove_all(final, ec);
    fs::rename(tmp, final, ec);
    if (ec) throw Error(ErrorCode::Io, final.string() + ": cannot move checkpoint into place: " + ec.message());
  } catch (const c10::Error& e) {
    fs::remove_all(tmp, ec);
    throw Error(ErrorCode::Io, tmp.string() + ": writing the optimiser state failed: " + e.what_without_backtrace());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  atomicWriteText(root / "latest", final.filename().string() + "\n");
  // Keep the newest `keep` checkpoints.
  std::vector<fs::path> all;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step-", 0) == 0 && n.find(".partial") == std::string::npos) all.push_back(e.path());
  }
  std::sort(all.begin(), all.end());
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < all.size(); ++i) fs::remove_all(all[i], ec);
  return final;
}

std::optional<fs::path> latestCheckpoint(const fs::path& runDir) {
  const fs::path latest = runDir / "checkpoints" / "latest";
  std::error_code ec;
  if (!fs::exists(latest, ec)) return std::nullopt;
  std::string name = readTextFile(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  const fs::path dir = runDir / "checkpoints" / name;
  if (!fs::exists(dir / "trainer_state.json", ec)) return std::nullopt;
  return dir;
}

TrainerState loadCheckpoint(const fs::path& dir, CausalLm& model, torch::optim::Optimizer& optimizer) {
  HfCheckpoint ckpt(dir / "model");
  loadWeights(model, ckpt);
  try {
    torch::load(optimizer, (dir / "optimizer.pt").string());
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::BadCheckpoint, (dir / "optimizer.pt").string() + ": cannot read the optimiser state: " +
                e.what_without_backtrace());
  }
  const fs::path statePath = dir / "trainer_state.json";
  json j = parseJson(readTextFile(statePath), statePath.string(), ErrorCode::BadCheckpoint);
  TrainerState s;
  try {
    s.step = j.at("step").get<std::int64_t>();
    s.tokens = j.at("tokens").get<std::int64_t>();
    s.wallSeconds = j.value("wall_seconds", 0.0);
    if (j.contains("best_val_loss")) s.bestValLoss = j.at("best_val_loss").get<double>();
  } catch (const json::exception& e) {
    throw Error(ErrorCode::BadCheckpoint, statePath.string() + ": " + e.what());
  }
  s.data = LoaderPosition::fromJson(j.at("data"), statePath.string());
  return s;
}

} // namespace latentlab
