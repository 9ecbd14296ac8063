// HF model folders: config.json + safetensors (single or sharded).
#include "io/hf_checkpoint.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/json_util.h"
#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;

HfCheckpoint::HfCheckpoint(const fs::path& dir) : m_dir(dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(ErrorCode::BadModel, dir.string() + ": not a folder",
                "Pass the folder that holds config.json and the .safetensors files.");
  }
  m_config = readHfConfig(dir / "config.json");

  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  auto addFile = [&](const fs::path& p) -> SafetensorsFile* {
    m_files.push_back(std::make_unique<SafetensorsFile>(p));
    return m_files.back().get();
  };
  if (fs::exists(index, ec)) {
    json j = parseJson(readTextFile(index), index.string(), ErrorCode::BadCheckpoint);
    if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object()) {
      throw Error(ErrorCode::BadCheckpoint, index.string() + ": field 'weight_map' is missing");
    }
    std::map<std::string, SafetensorsFile*> byName;
    for (auto it = j.at("weight_map").begin(); it != j.at("weight_map").end(); ++it) {
      if (!it.value().is_string()) {
        throw Error(ErrorCode::BadCheckpoint, index.string() + ": weight_map['" + it.key() + "'] is not a file name");
      }
      const std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos || shard == "..") {
        throw Error(ErrorCode::BadCheckpoint,
                    index.string() + ": shard name '" + shard + "' must be a plain file name");
      }
      SafetensorsFile*& file = byName[shard];
      if (file == nullptr) {
        const fs::path p = dir / shard;
        if (!fs::exists(p, ec)) {
          throw Error(ErrorCode::BadCheckpoint,
                      index.string() + ": shard '" + shard + "' (for '" + it.key() + "') is missing");
        }
        file = addFile(p);
      }
      const TensorInfo* info = file->find(it.key());
      if (info == nullptr) {
        throw Error(ErrorCode::BadCheckpoint,
                    (dir / shard).string() + ": tensor '" + it.key() + "' listed in the index is not in this shard");
      }
      m_entries[it.key()] = Entry{file, info};
    }
  } else if (fs::exists(single, ec)) {
    SafetensorsFile* file = addFile(single);
    for (const auto& t : file->tensors()) m_entries[t.name] = Entry{file, &t};
  } else {
    std::string hint = "Expected model.safetensors or model.safetensors.index.json.";
    if (fs::exists(dir / "pytorch_model.bin", ec)) {
      hint =
          "Only PyTorch .bin weights were found; convert them to safetensors first "
          "(for example with transformers' save_pretrained(safe_serialization=True)).";
    }
    throw Error(ErrorCode::BadCheckpoint, dir.string() + ": no safetensors weights found", hint);
  }
  // Mixture-of-experts weights in transformers' fused in-memory layout (3-D
  // experts.gate_up_proj) rather than one set per expert.
  if (m_config.moe) {
    for (const auto& [name, e] : m_entries) {
      if (name.ends_with(".mlp.experts.gate_up_proj")) m_config.moe->fusedExperts = true;
    }
  }
}

std::optional<HfCheckpoint::Entry> HfCheckpoint::find(const std::string& name) const {
  auto it = m_entries.find(name);
  if (it == m_entries.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> HfCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(m_entries.size());
  for (const auto& [name, e] : m_entries) out.push_back(name);
  return out;
}

std::vector<fs::path> HfCheckpoint::files() const {
  std::vector<fs::path> out;
  for (const auto& f : m_files) out.push_back(f->path());
  return out;
}

std::uintmax_t HfCheckpoint::sizeOnDisk() const {
  std::uintmax_t total = 0;
  for (const auto& f : m_files) total += f->fileSize();
  return total;
}

DType HfCheckpoint::dominantDType() const {
  std::map<DType, std::uint64_t> bytes;
  for (const auto& [name, e] : m_entries) {
    if (e.info->dtype) bytes[*e.info->dtype] += e.info->end - e.info->begin;
  }
  DType best = m_config.torchDType;
  std::uint64_t most = 0;
  for (const auto& [dt, n] : bytes) {
    if (n > most) {
      most = n;
      best = dt;
    }
  }
  return best;
}

void writeHfCheckpoint(const fs::path& dir, const ModelConfig& cfg, const std::vector<TensorWrite>& tensors,
                       const std::map<std::string, std::string>& metadata, std::uint64_t maxShardBytes) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    throw Error(ErrorCode::Io, dir.string() + ": output folder already exists",
                "Choose a new folder, or pass --force to replace it.");
  }
  fs::path tmp = dir;
  tmp += ".partial-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw Error(ErrorCode::Io, tmp.string() + ": cannot create folder: " + ec.message());
  try {
    std::map<std::string, std::string> meta = metadata;
    meta.emplace("format", "pt");
    writeHfConfig(cfg, tmp / "config.json");
    std::uint64_t total = 0;
    for (const auto& t : tensors) {
      std::uint64_t n = 1;
      for (auto s : t.shape) n *= static_cast<std::uint64_t>(s);
      total += n * dtypeSize(t.dtype);
    }
    if (maxShardBytes == 0 || total <= maxShardBytes) {
      writeSafetensors(tmp / "model.safetensors", tensors, meta);
    } else {
      std::vector<std::vector<TensorWrite>> shards(1);
      std::uint64_t current = 0;
      for (const auto& t : tensors) {
        std::uint64_t n = 1;
        for (auto s : t.shape) n *= static_cast<std::uint64_t>(s);
        const std::uint64_t bytes = n * dtypeSize(t.dtype);
        if (current > 0 && current + bytes > maxShardBytes) {
          shards.emplace_back();
          current = 0;
        }
        shards.back().push_back(t);
        current += bytes;
      }
      json weightMap = json::object();
      const int count = static_cast<int>(shards.size());
      for (int i = 0; i < count; ++i) {
        char name[64];
        std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", i + 1, count);
        writeSafetensors(tmp / name, shards[static_cast<std::size_t>(i)], meta);
        for (const auto& t : shards[static_cast<std::size_t>(i)]) weightMap[t.name] = name;
      }
      json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weightMap}};
      atomicWriteText(tmp / "model.safetensors.index.json", index.dump(2) + "\n");
    }
    fs::rename(tmp, dir, ec);
    if (ec) throw Error(ErrorCode::Io, dir.string() + ": cannot move the finished folder into place: " + ec.message());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace latentlab
