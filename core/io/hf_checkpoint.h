// An HF model folder: config.json plus one safetensors file or a sharded set
// with model.safetensors.index.json. Reading maps the files; no weights are
// copied until the model loader asks for them.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "latentlab/model_config.h"

namespace latentlab {

class HfCheckpoint {
 public:
  // Throws Error naming the file at fault (config.json, index, shard).
  explicit HfCheckpoint(const std::filesystem::path& dir);

  struct Entry {
    const SafetensorsFile* file;
    const TensorInfo* info;
  };

  const std::filesystem::path& dir() const { return m_dir; }
  const ModelConfig& config() const { return m_config; }
  std::optional<Entry> find(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  std::vector<std::filesystem::path> files() const;
  std::uintmax_t sizeOnDisk() const;
  DType dominantDType() const;  // dtype holding most weight bytes

 private:
  std::filesystem::path m_dir;
  ModelConfig m_config;
  std::vector<std::unique_ptr<SafetensorsFile>> m_files;
  std::map<std::string, Entry> m_entries;
};

// Writes config.json and the weights (one file, or shards of at most
// maxShardBytes with an index) into `dir`, which must not exist yet: the
// folder is assembled under a temporary name and renamed into place.
void writeHfCheckpoint(const std::filesystem::path& dir, const ModelConfig& cfg,
                       const std::vector<TensorWrite>& tensors, const std::map<std::string, std::string>& metadata = {},
                       std::uint64_t maxShardBytes = 0);

}  // namespace latentlab
