// Safetensors files: a validated, memory-mapped reader and an atomic writer.
// Format: u64 little-endian header length N, N bytes of JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the raw little-endian tensor bytes (offsets relative to the data start).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "latentlab/model_config.h"

namespace latentlab {

struct TensorInfo {
  std::string name;
  std::string dtypeName;       // as written: "F32", "BF16", "I64", ...
  std::optional<DType> dtype;  // set for the float types LatentLab loads
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets relative to the data section
  std::uint64_t end = 0;
  std::int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps the file and validates the header: length, JSON, dtypes, shapes
  // against byte sizes, offsets in range and not overlapping. Throws
  // Error(BadCheckpoint) naming the file and the tensor.
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return m_file.path(); }
  const std::vector<TensorInfo>& tensors() const { return m_tensors; }
  const TensorInfo* find(const std::string& name) const;
  const std::byte* data(const TensorInfo& t) const { return m_file.data() + m_dataStart + t.begin; }
  const std::map<std::string, std::string>& metadata() const { return m_metadata; }
  std::uintmax_t fileSize() const { return m_file.size(); }

 private:
  MappedFile m_file;
  std::size_t m_dataStart = 0;
  std::vector<TensorInfo> m_tensors;
  std::map<std::string, std::size_t> m_index;
  std::map<std::string, std::string> m_metadata;
};

struct TensorWrite {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  const void* data;  // numel * dtypeSize contiguous bytes
};

// Writes a safetensors file atomically (temporary name, fsync, rename).
void writeSafetensors(const std::filesystem::path& path, const std::vector<TensorWrite>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace latentlab
