// Training checkpoints: a folder per step holding the model (HF layout, with
// the run's tokenizer.json), the optimiser state, the trainer state (step,
// tokens, data position, the owning run) and the spec, written under a
// temporary name and renamed into place. A run folder belongs to one run:
// owner.json names it, and nothing reads or writes checkpoints of another.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/batch_loader.h"
#include "model/llama.h"

namespace latentlab {

// Who a run folder and its checkpoints belong to: a run of one database.
struct RunIdentity {
  std::string storeId;   // the database's random id (store_info.store_id)
  std::string database;  // its path when the folder was claimed (for messages)
  std::int64_t runId = 0;
  std::string runUid;    // the run's random id: ids may be reused after a delete
  std::string specHash;  // hash of the spec JSON as stored with the run

  nlohmann::json toJson() const;
  static RunIdentity fromJson(const nlohmann::json& j, const std::string& source);
  // Empty when `other` is the same run; else what differs, for a message.
  std::string mismatch(const RunIdentity& other) const;
  std::string describe() const;  // "run 3 of /w/runs.db"
};

// FNV-1a 64 of the text, as 16 hex digits.
std::string specHash(const std::string& specJson);

struct TrainerState {
  std::int64_t step = 0;    // steps completed
  std::int64_t tokens = 0;  // training tokens seen
  double wallSeconds = 0;   // training time so far
  LoaderPosition data;
  std::optional<double> bestValLoss;
  std::optional<RunIdentity> owner;  // set on load; written from saveCheckpoint's identity
};

// The run folder of run `runId` for a spec's out_dir: empty gives
// WORKSPACE/runs/ID; a relative path is taken inside the workspace. Refused
// (Error BadSpec naming out_dir): the workspace itself or any folder that
// holds it ("/" included), and outside the workspace's runs/ area anything
// but an existing empty folder or one holding this run's owner.json.
std::filesystem::path resolveRunDir(const std::string& outDir, const std::filesystem::path& workspace,
                                    std::int64_t runId);

// Makes `runDir` the folder of run `id`: a folder with owner.json of another
// run, or with checkpoints but no owner.json, is refused (Error(BadCheckpoint)
// naming both runs); an empty or missing folder is claimed (owner.json
// written). Removes partial checkpoint folders left by killed writers.
void claimRunDir(const std::filesystem::path& runDir, const RunIdentity& id);
// For a run not registered yet: throws when `runDir` already holds a run.
void requireFreeRunDir(const std::filesystem::path& runDir);

struct SavedCheckpoint {
  std::filesystem::path dir;
  std::vector<std::filesystem::path> pruned;  // older checkpoints removed
};

// Writes <runDir>/checkpoints/step-XXXXXXXX and points <runDir>/checkpoints/latest
// at it; keeps the newest `keep` checkpoints. `tokenizerJson` (may be empty)
// is written as model/tokenizer.json. Every write goes through the file layer:
// a full disk throws Error(Io) naming the file, and the partial folder is removed.
// What a checkpoint holds besides the usual: the weights to save in place of
// the model's parameters (a bf16 run's fp32 masters), and files to move into
// the folder before it is put in place (the ranks' ZeRO optimizer shards,
// which then stand for optimizer.pt).
struct CheckpointExtras {
  const std::vector<torch::Tensor>* weights = nullptr;
  std::vector<std::filesystem::path> moveIn;
  bool optimizerShards = false;
};

SavedCheckpoint saveCheckpoint(const std::filesystem::path& runDir, CausalLm& model, torch::optim::Optimizer& optimizer,
                               const TrainerState& state, const std::string& specJson, const RunIdentity& owner,
                               const std::string& tokenizerJson, int keep = 2, const CheckpointExtras& extras = {});

// The ZeRO optimizer shards of a checkpoint (optimizer-rank*.pt), any world size.
std::vector<std::filesystem::path> optimizerShards(const std::filesystem::path& checkpointDir);

// The folder `latest` points at, if any.
std::optional<std::filesystem::path> latestCheckpoint(const std::filesystem::path& runDir);

// Loads the optimiser (unless the caller loads ZeRO shards) and trainer state of a checkpoint folder written by
// saveCheckpoint (the model is built from <dir>/model by the caller). Throws
// Error(BadCheckpoint) naming the file, and when the checkpoint belongs to
// another run than `expected`.
TrainerState loadCheckpoint(const std::filesystem::path& dir, torch::optim::Optimizer& optimizer,
                            const RunIdentity& expected, bool loadOptimizer = true);

}  // namespace latentlab
