// Atomic training checkpoints, run-folder ownership and resume.
#include "train/checkpoint.h"

#include <unistd.h>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/json_util.h"
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

bool isPartial(const std::string& name) {
  return name.find(".partial-") != std::string::npos;
}

// Partial checkpoint folders (and atomic-write temporaries) of writers that
// no longer run: the caller owns the run folder, so any other is a leftover.
void removeStalePartials(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  const std::string mine = ".partial-" + std::to_string(::getpid());
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (isPartial(n) && n.find(mine) == std::string::npos) fs::remove_all(e.path(), ec);
  }
}

// The optimiser state through the file layer: LibTorch's zip writer gets a
// sink that never fails (an exception inside it cannot be unwound safely), and
// the first write error is raised here afterwards, naming the file.
void saveOptimizer(torch::optim::Optimizer& optimizer, const fs::path& path) {
  std::optional<Error> failure;
  atomicWrite(path, [&](int fd) {
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.save_to([&](const void* data, std::size_t size) -> std::size_t {
      if (failure) return size;
      try {
        writeAll(fd, data, size, path);
      } catch (const Error& e) {
        failure = e;
      }
      return size;
    });
    if (failure) throw *failure;
  });
}

constexpr const char* kOwnerFile = "owner.json";
const char* const kForeignHint =
    "A run folder holds one run's checkpoints. Give this run its own out_dir (or leave out_dir empty), "
    "or delete the folder if that run is gone for good.";

}  // namespace

json RunIdentity::toJson() const {
  return {
      {"store_id", storeId}, {"database", database}, {"run_id", runId}, {"run_uid", runUid}, {"spec_hash", specHash}};
}

RunIdentity RunIdentity::fromJson(const json& j, const std::string& source) {
  JsonReader r(j, source, ErrorCode::BadCheckpoint);
  RunIdentity id;
  id.storeId = r.requireString("store_id");
  id.database = r.optString("database", "");
  if (!j.contains("run_id") || !j.at("run_id").is_number_integer()) r.fail("run_id", "is missing or not an integer");
  id.runId = j.at("run_id").get<std::int64_t>();
  id.runUid = r.requireString("run_uid");
  id.specHash = r.requireString("spec_hash");
  return id;
}

std::string RunIdentity::describe() const {
  return "run " + std::to_string(runId) + " of " + (database.empty() ? "database " + storeId : database);
}

std::string RunIdentity::mismatch(const RunIdentity& other) const {
  if (storeId != other.storeId) return "another database";
  if (runId != other.runId) return "another run";
  if (runUid != other.runUid) return "an earlier run with the same id (deleted since)";
  if (specHash != other.specHash) return "the same run with a different spec";
  return {};
}

std::string specHash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

fs::path resolveRunDir(const std::string& outDir, const fs::path& workspace, std::int64_t runId) {
  if (outDir.empty()) return workspace / "runs" / std::to_string(runId);
  const auto bad = [&](const std::string& problem) {
    throw Error(ErrorCode::BadSpec, "out_dir '" + outDir + "': " + problem,
                "Leave out_dir empty (the run gets WORKSPACE/runs/ID), name a folder inside the workspace's runs/, "
                "or an empty folder made for this run.");
  };
  fs::path p(outDir);
  if (p.is_relative()) p = workspace / p;  // relative to the workspace, never to the current folder
  std::error_code ec;
  const fs::path ws = fs::weakly_canonical(fs::absolute(workspace), ec);
  const fs::path dir = fs::weakly_canonical(fs::absolute(p), ec);
  const auto within = [](const fs::path& inner, const fs::path& outer) {
    auto i = inner.begin();
    for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
      if (o->empty()) continue;  // a trailing separator
      if (i == inner.end() || *i != *o) return false;
    }
    return true;
  };
  if (within(ws, dir)) bad("is the workspace or a folder that holds it (" + dir.string() + ")");
  if (within(dir, ws / "runs") && dir != ws / "runs") return dir;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) bad(dir.string() + " is not a folder");
    if (!fs::is_empty(dir, ec) && !fs::exists(dir / kOwnerFile, ec)) {
      bad(dir.string() + " is outside the workspace's runs/ folder and not empty");
    }
    return dir;
  }
  bad(dir.string() + " is outside the workspace's runs/ folder and does not exist; make it (empty) first");
  return dir;  // not reached: bad() throws
}

void requireFreeRunDir(const fs::path& runDir) {
  std::error_code ec;
  if (fs::exists(runDir / kOwnerFile, ec)) {
    const fs::path ownerPath = runDir / kOwnerFile;
    const RunIdentity other = RunIdentity::fromJson(
        parseJson(readTextFile(ownerPath), ownerPath.string(), ErrorCode::BadCheckpoint), ownerPath.string());
    throw Error(ErrorCode::BadSpec, runDir.string() + ": out_dir belongs to " + other.describe(), kForeignHint);
  }
  if (fs::exists(runDir / "checkpoints", ec)) {
    throw Error(ErrorCode::BadSpec, runDir.string() + ": out_dir holds checkpoints of an unknown run (no owner.json)",
                kForeignHint);
  }
}

void claimRunDir(const fs::path& runDir, const RunIdentity& id) {
  const fs::path ownerPath = runDir / kOwnerFile;
  std::error_code ec;
  if (fs::exists(ownerPath, ec)) {
    const RunIdentity other = RunIdentity::fromJson(
        parseJson(readTextFile(ownerPath), ownerPath.string(), ErrorCode::BadCheckpoint), ownerPath.string());
    const std::string why = id.mismatch(other);
    if (!why.empty()) {
      throw Error(ErrorCode::BadCheckpoint,
                  runDir.string() + ": the folder of " + id.describe() + " belongs to " + why + " (" +
                      other.describe() + ", run uid " + other.runUid + "); its checkpoints are not this run's",
                  kForeignHint);
    }
  } else {
    if (fs::exists(runDir / "checkpoints", ec)) {
      throw Error(ErrorCode::BadCheckpoint,
                  runDir.string() + ": holds checkpoints with no owner.json; " + id.describe() + " will not adopt them",
                  kForeignHint);
    }
    fs::create_directories(runDir, ec);
    if (ec) throw Error(ErrorCode::Io, runDir.string() + ": cannot create the run folder: " + ec.message());
    atomicWriteText(ownerPath, id.toJson().dump(2) + "\n");
  }
  removeStalePartials(runDir / "checkpoints");
}

SavedCheckpoint saveCheckpoint(const fs::path& runDir, CausalLm& model, torch::optim::Optimizer& optimizer,
                               const TrainerState& state, const std::string& specJson, const RunIdentity& owner,
                               const std::string& tokenizerJson, int keep, const CheckpointExtras& extras) {
  const std::vector<torch::Tensor>* weights = extras.weights;
  const fs::path root = runDir / "checkpoints";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw Error(ErrorCode::Io, root.string() + ": cannot create: " + ec.message());
  removeStalePartials(root);
  SavedCheckpoint saved;
  saved.dir = root / stepName(state.step);
  const fs::path tmp = root / (stepName(state.step) + ".partial-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw Error(ErrorCode::Io, tmp.string() + ": cannot create: " + ec.message());
  try {
    const torch::ScalarType saveType = (weights ? weights->front() : model.parameters().front()).scalar_type();
    saveModel(model, tmp / "model", fromTorch(saveType),
              {{"producer", "latentlab train"}, {"step", std::to_string(state.step)}}, 0, weights);
    if (!tokenizerJson.empty()) atomicWriteText(tmp / "model" / "tokenizer.json", tokenizerJson);
    if (!extras.optimizerShards) saveOptimizer(optimizer, tmp / "optimizer.pt");
    for (const fs::path& f : extras.moveIn) {
      fs::rename(f, tmp / f.filename(), ec);
      if (ec) throw Error(ErrorCode::Io, f.string() + ": cannot move into the checkpoint: " + ec.message());
    }
    json st = {{"step", state.step},
               {"tokens", state.tokens},
               {"wall_seconds", state.wallSeconds},
               {"data", state.data.toJson()},
               {"owner", owner.toJson()}};
    if (state.bestValLoss) st["best_val_loss"] = *state.bestValLoss;
    atomicWriteText(tmp / "trainer_state.json", st.dump(2) + "\n");
    atomicWriteText(tmp / "spec.json", specJson + "\n");
    fs::remove_all(saved.dir, ec);
    fs::rename(tmp, saved.dir, ec);
    if (ec) throw Error(ErrorCode::Io, saved.dir.string() + ": cannot move checkpoint into place: " + ec.message());
    atomicWriteText(root / "latest", saved.dir.filename().string() + "\n");
  } catch (const c10::Error& e) {
    fs::remove_all(tmp, ec);
    throw Error(ErrorCode::Io, tmp.string() + ": writing the checkpoint failed: " + e.what_without_backtrace());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  // Keep the newest `keep` checkpoints.
  std::vector<fs::path> all;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step-", 0) == 0 && !isPartial(n)) all.push_back(e.path());
  }
  std::sort(all.begin(), all.end());
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < all.size(); ++i) {
    fs::remove_all(all[i], ec);
    if (!ec) saved.pruned.push_back(all[i]);
  }
  return saved;
}

std::vector<fs::path> optimizerShards(const fs::path& checkpointDir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpointDir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("optimizer-rank", 0) == 0 && e.path().extension() == ".pt") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
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

TrainerState loadCheckpoint(const fs::path& dir, torch::optim::Optimizer& optimizer, const RunIdentity& expected,
                            bool loadOptimizer) {
  const fs::path statePath = dir / "trainer_state.json";
  json j = parseJson(readTextFile(statePath), statePath.string(), ErrorCode::BadCheckpoint);
  TrainerState s;
  try {
    if (!j.contains("owner")) {
      throw Error(ErrorCode::BadCheckpoint, statePath.string() + ": the checkpoint does not say which run wrote it",
                  kForeignHint);
    }
    s.owner = RunIdentity::fromJson(j.at("owner"), statePath.string() + ": owner");
    const std::string why = expected.mismatch(*s.owner);
    if (!why.empty()) {
      throw Error(
          ErrorCode::BadCheckpoint,
          statePath.string() + ": written by " + why + " (" + s.owner->describe() + "), not by " + expected.describe(),
          kForeignHint);
    }
    s.step = j.at("step").get<std::int64_t>();
    s.tokens = j.at("tokens").get<std::int64_t>();
    s.wallSeconds = j.value("wall_seconds", 0.0);
    if (j.contains("best_val_loss")) s.bestValLoss = j.at("best_val_loss").get<double>();
  } catch (const json::exception& e) {
    throw Error(ErrorCode::BadCheckpoint, statePath.string() + ": " + e.what());
  }
  s.data = LoaderPosition::fromJson(j.at("data"), statePath.string());
  if (!loadOptimizer) return s;
  try {
    torch::load(optimizer, (dir / "optimizer.pt").string());
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::BadCheckpoint,
                (dir / "optimizer.pt").string() + ": cannot read the optimiser state: " + e.what_without_backtrace());
  }
  return s;
}

}  // namespace latentlab
