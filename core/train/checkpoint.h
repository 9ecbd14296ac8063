// Training checkpoints: a folder per step holding the model (HF layout),
// the optimiser state, the trainer state (step, tokens, data position) and the
// spec, written under a temporary name and renamed into place.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <optional>
#include <string>

#include "data/batch_loader.h"
#include "model/llama.h"

namespace latentlab {

struct TrainerState {
  std::int64_t step = 0;          // steps completed
  std::int64_t tokens = 0;        // training tokens seen
  double wallSeconds = 0;         // training time so far
  LoaderPosition data;
  std::optional<double> bestValLoss;
};

// Writes <runDir>/checkpoints/step-XXXXXXXX and points <runDir>/checkpoints/latest
// at it; keeps the newest `keep` checkpoints. Returns the folder.
std::filesystem::path saveCheckpoint(const std::filesystem::path& runDir, CausalLm& model,
                                     torch::optim::Optimizer& optimizer, const TrainerState& state,
                                     const std::string& specJson, int keep = 2);

// The folder `latest` points at, if any.
std::optional<std::filesystem::path> latestCheckpoint(const std::filesystem::path& runDir);

// Loads model weights, optimiser state and trainer state from a checkpoint
// folder written by saveCheckpoint. Throws Error(BadCheckpoint) naming it.
TrainerState loadCheckpoint(const std::filesystem::path& dir, CausalLm& model, torch::optim::Optimizer& optimizer);

} // namespace latentlab
