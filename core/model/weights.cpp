// Key-table weight loading and saving.
#include "model/weights.h"

#include <cstring>
#include <set>

#include "latentlab/error.h"
#include "model/torch_util.h"
#include "model/weight_table.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {
std::string shapeText(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}
} // namespace

std::vector<std::string> checkCheckpoint(const HfCheckpoint& ckpt) {
  const auto expected = expectedTensors(ckpt.config());
  std::set<std::string> used;
  for (const auto& e : expected) {
    auto entry = ckpt.find(e.name);
    if (!entry) {
      throw Error(ErrorCode::BadCheckpoint, ckpt.dir().string() + ": tensor '" + e.name + "' is missing",
                  "The weights do not match config.json (wrong model, or an incomplete download).");
    }
    const TensorInfo& t = *entry->info;
    if (!t.dtype) {
      throw Error(ErrorCode::BadCheckpoint, entry->file->path().string() + ": tensor '" + e.name + "' has dtype " +
                  t.dtypeName + "; expected F32, F16 or BF16");
    }
    if (t.shape != e.shape) {
      throw Error(ErrorCode::BadCheckpoint, entry->file->path().string() + ": tensor '" + e.name + "' has shape " +
                  shapeText(t.shape) + " but config.json implies " + shapeText(e.shape));
    }
    used.insert(e.name);
  }
  std::vector<std::string> unused;
  for (const auto& name : ckpt.names()) {
    if (!used.count(name)) unused.push_back(name);
  }
  return unused;
}

torch::Tensor readTensor(const HfCheckpoint::Entry& entry) {
  const TensorInfo& t = *entry.info;
  const auto type = toTorch(*t.dtype);
  auto out = torch::empty(t.shape, torch::TensorOptions().dtype(type));
  // Copy instead of from_blob: the mapped bytes need not be aligned.
  std::memcpy(out.data_ptr(), entry.file->data(t), t.end - t.begin);
  return out;
}

LoadReport loadWeights(torch::nn::Module& model, const HfCheckpoint& ckpt) {
  LoadReport report;
  report.unusedKeys = checkCheckpoint(ckpt);
  torch::NoGradGuard noGrad;
  std::set<std::string> expected;
  for (const auto& e : expectedTensors(ckpt.config())) expected.insert(e.name);
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    if (!expected.count(name)) {
      throw Error(ErrorCode::Internal, "model parameter '" + name + "' is not in the key table");
    }
    auto entry = ckpt.find(name);
    auto src = readTensor(*entry);
    torch::Tensor& dst = item.value();
    if (src.sizes() != dst.sizes()) {
      throw Error(ErrorCode::Internal, "parameter '" + name + "' shape differs from the key table");
    }
    dst.copy_(src.to(dst.device(), dst.scalar_type()));
    ++report.loaded;
  }
  if (report.loaded != static_cast<int>(expected.size())) {
    throw Error(ErrorCode::Internal, "loaded " + std::to_string(report.loaded) + " of " +
                std::to_string(expected.size()) + " tensors of the key table");
  }
  return report;
}

std::shared_ptr<CausalLm> loadModel(const fs::path& dir, torch::Device device, torch::ScalarType dtype,
                                    LoadReport* report) {
  HfCheckpoint ckpt(dir);
  checkCheckpoint(ckpt);   // fail before allocating anything
  auto model = std::make_shared<CausalLm>(ckpt.config());
  model->to(device, dtype);
  LoadReport r = loadWeights(*model, ckpt);
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
  std::size_t index = 0;
  for (const auto& item : named) {
    const torch::Tensor& source = values ? (*values)[index] : item.value();
    ++index;
    auto t = source.detach().to(torch::kCPU, type).contiguous();
    keep.push_back(t);
    writes.push_back({item.key(), saveDType, t.sizes().vec(), t.data_ptr()});
  }
  ModelConfig cfg = model.config();
  cfg.torchDType = saveDType;
  writeHfCheckpoint(dir, cfg, writes, metadata, maxShardBytes);
}

void copyTokenizerFiles(const fs::path& from, const fs::path& to) {
  static const char* kFiles[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                 "generation_config.json"};
  for (const char* name : kFiles) {
    std::error_code ec;
    if (!fs::exists(from / name, ec)) continue;
    fs::copy_file(from / name, to / name, fs::copy_options::overwrite_existing, ec);
    if (ec) throw Error(ErrorCode::Io, (to / name).string() + ": cannot copy: " + ec.message());
  }
}

} // namespace latentlab
