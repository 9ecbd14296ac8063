// Loading a CausalLm from an HF folder by key table (every key mapped, every
// shape checked, nothing left unloaded, extras reported) and saving it back.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/hf_checkpoint.h"
#include "io/weight_table.h"
#include "model/llama.h"

namespace latentlab {

struct LoadReport {
  int loaded = 0;
  std::vector<std::string> unusedKeys;  // in the checkpoint, not in the model
};

// Copies every parameter of `model` from the checkpoint (converting dtype).
// `layout` (default: the checkpoint's config) is the config that maps
// parameters to its tensors, with an official MHA2MLA checkpoint's pairs resolved.
LoadReport loadWeights(torch::nn::Module& model, const HfCheckpoint& ckpt, const ModelConfig* layout = nullptr);

// Opens `dir`, builds the model for its config and loads it on device/dtype.
std::shared_ptr<CausalLm> loadModel(const std::filesystem::path& dir, torch::Device device, torch::ScalarType dtype,
                                    LoadReport* report = nullptr);

// Writes config.json + safetensors for the model (parameters cast to
// saveDType); `values`, when given, stand in for the parameters (same order
// as parameters(), e.g. a trainer's fp32 master copies).
void saveModel(CausalLm& model, const std::filesystem::path& dir, DType saveDType,
               const std::map<std::string, std::string>& metadata = {}, std::uint64_t maxShardBytes = 0,
               const std::vector<torch::Tensor>* values = nullptr);

// Copies tokenizer.json and the HF tokenizer/generation side files that exist
// in `from` into the model folder `to` (a converted or trained model stays
// usable by itself).
void copyTokenizerFiles(const std::filesystem::path& from, const std::filesystem::path& to);

// Tensor copy of a checkpoint entry (CPU, the file's dtype).
torch::Tensor readTensor(const HfCheckpoint::Entry& entry);

}  // namespace latentlab
