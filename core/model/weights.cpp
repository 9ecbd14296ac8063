// Key-table weight loading and saving.
#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "common/file_util.h"
#include "io/weight_table.h"
#include "latentlab/error.h"
#include "model/official_mha2mla.h"
#include "model/torch_util.h"

namespace latentlab {
namespace fs = std::filesystem;

torch::Tensor readTensor(const HfCheckpoint::Entry& entry) {
  const TensorInfo& t = *entry.info;
  const auto type = toTorch(*t.dtype);
  auto out = torch::empty(t.shape, torch::TensorOptions().dtype(type));
  // Copy instead of from_blob: the mapped bytes need not be aligned.
  std::memcpy(out.data_ptr(), entry.file->data(t), t.end - t.begin);
  return out;
}

LoadReport loadWeights(torch::nn::Module& model, const HfCheckpoint& ckpt, const ModelConfig* layout) {
  LoadReport report;
  report.unusedKeys = checkCheckpoint(ckpt);
  torch::NoGradGuard noGrad;
  const ModelConfig& cfg = layout != nullptr ? *layout : ckpt.config();
  std::set<std::string> expected, read;
  for (const auto& e : expectedTensors(ckpt.config())) expected.insert(e.name);
  std::string lastName;  // the tensor last read, for the other parameters that share it
  torch::Tensor last;
  auto tensor = [&](const std::string& name) {
    if (name != lastName) {
      last = readTensor(*ckpt.find(name));
      lastName = name;
    }
    read.insert(name);
    return last;
  };
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    const TensorSource src = checkpointSource(cfg, name);
    std::vector<torch::Tensor> rows;
    for (const TensorPart& part : src.parts) {
      if (!expected.count(part.name)) {
        throw Error(ErrorCode::Internal,
                    "model parameter '" + name + "' reads '" + part.name + "', not in the key table");
      }
      torch::Tensor t = tensor(part.name);
      if (part.select >= 0) t = t.select(0, part.select);
      if (!part.gather.empty()) {
        t = t.index_select(0, torch::tensor(part.gather, torch::kInt64));
      } else if (part.rows >= 0) {
        t = t.narrow(0, part.rowBegin, part.rows);
      }
      rows.push_back(t);
    }
    torch::Tensor value = rows.size() == 1 ? rows[0] : torch::cat(rows, 0);
    torch::Tensor& dst = item.value();
    if (value.sizes() != dst.sizes()) {
      throw Error(ErrorCode::Internal, "parameter '" + name + "' shape differs from the key table");
    }
    dst.copy_(value.to(dst.device(), dst.scalar_type()));
  }
  report.loaded = static_cast<int>(read.size());
  if (read.size() != expected.size()) {
    throw Error(ErrorCode::Internal, "loaded " + std::to_string(read.size()) + " of " +
                                         std::to_string(expected.size()) + " tensors of the key table");
  }
  return report;
}

std::shared_ptr<CausalLm> loadModel(const fs::path& dir, torch::Device device, torch::ScalarType dtype,
                                    LoadReport* report) {
  HfCheckpoint ckpt(dir);
  checkCheckpoint(ckpt);  // fail before allocating anything
  // An official MHA2MLA checkpoint: its pairs resolved, its tensors read into
  // LatentLab's layout, and the model's own config LatentLab's (what it saves).
  const ModelConfig layout = resolveOfficialPairs(ckpt.config(), dir);
  ModelConfig own = layout;
  if (own.mla) own.mla->official.reset();
  if (own.moe) own.moe->fusedExperts = false;  // saved one set per expert, as transformers saves them
  auto model = std::make_shared<CausalLm>(own);
  model->to(device, dtype);
  LoadReport r = loadWeights(*model, ckpt, &layout);
  if (report != nullptr) *report = r;
  model->eval();
  return model;
}

void saveModel(CausalLm& model, const fs::path& dir, DType saveDType,
               const std::map<std::string, std::string>& metadata, std::uint64_t maxShardBytes,
               const std::vector<torch::Tensor>* values) {
  std::vector<torch::Tensor> keep;
  std::vector<TensorWrite> writes;
  const auto type = toTorch(saveDType);
  const auto named = model.named_parameters(true);
  if (values && values->size() != named.size()) {
    throw Error(ErrorCode::Internal, dir.string() + ": " + std::to_string(values->size()) + " values for " +
                                         std::to_string(named.size()) + " parameters");
  }
  // Fused checkpoint tensors (Phi-3) are written where their first part stands.
  const ModelConfig& config = model.config();
  std::map<std::string, std::vector<std::pair<std::int64_t, torch::Tensor>>> fusedParts;
  std::vector<std::string> order;  // checkpoint names in write order
  std::map<std::string, torch::Tensor> whole;
  std::size_t index = 0;
  for (const auto& item : named) {
    const torch::Tensor& source = values ? (*values)[index] : item.value();
    ++index;
    auto t = source.detach().to(torch::kCPU, type).contiguous();
    const TensorSource src = checkpointSource(config, item.key());
    if (src.fusedBlock()) {
      const TensorPart& part = src.parts[0];
      if (!fusedParts.count(part.name)) order.push_back(part.name);
      fusedParts[part.name].emplace_back(part.rowBegin, t);
    } else if (src.whole()) {
      order.push_back(src.parts[0].name);
      whole[src.parts[0].name] = t;
    } else {
      throw Error(ErrorCode::Internal, dir.string() + ": parameter '" + item.key() + "' has no layout to save in");
    }
  }
  for (const auto& name : order) {
    torch::Tensor t;
    if (auto it = whole.find(name); it != whole.end()) {
      t = it->second;
    } else {
      auto parts = fusedParts.at(name);
      std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<torch::Tensor> rows;
      for (const auto& p : parts) rows.push_back(p.second);
      t = torch::cat(rows, 0).contiguous();
    }
    keep.push_back(t);
    writes.push_back({name, saveDType, t.sizes().vec(), t.data_ptr()});
  }
  ModelConfig cfg = model.config();
  cfg.torchDType = saveDType;
  writeHfCheckpoint(dir, cfg, writes, metadata, maxShardBytes);
}

void copyTokenizerFiles(const fs::path& from, const fs::path& to) {
  static const char* kFiles[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                 "generation_config.json"};
  for (const char* name : kFiles) {
    // Only regular files of the model folder itself (a link out of it, /proc, a
    // device or a FIFO is refused), written like every other file: in full or not at all.
    const auto bytes = readModelFile(from, name);
    if (bytes) atomicWriteText(to / name, *bytes);
  }
}

}  // namespace latentlab
