// The pair choice of an official MHA2MLA 2-norm checkpoint, from its tensor file.
#include "model/official_mha2mla.h"

#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <numeric>

#include "common/file_util.h"
#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {

fs::path locate(const std::string& named, const fs::path& dir, const std::string& source) {
  std::error_code ec;
  const fs::path given(named);
  for (const fs::path& p : {given.is_absolute() ? given : dir / given, dir / given.filename()}) {
    if (fs::is_regular_file(p, ec)) return p;
  }
  throw Error(ErrorCode::BadModel,
              source + ": the 2-norm tensor file '" + named + "' is neither there nor in " + dir.string(),
              "The official code names a file of the machine it trained on: copy that file (" +
                  given.filename().string() + ") into the model folder.");
}

torch::Tensor readPickled(const fs::path& path) {
  const std::string text = readFileBounded(path, 64ULL << 20);
  std::vector<char> bytes(text.begin(), text.end());
  try {
    torch::IValue v = torch::pickle_load(bytes);
    if (!v.isTensor()) throw Error(ErrorCode::BadModel, path.string() + ": holds no tensor");
    return v.toTensor();
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::BadModel, path.string() + ": cannot be read as a tensor saved by torch.save",
                std::string(e.what_without_backtrace()).substr(0, 200));
  }
}

}  // namespace

ModelConfig resolveOfficialPairs(const ModelConfig& cfg, const fs::path& dir) {
  ModelConfig out = cfg;
  if (!out.mla || !out.mla->official || !out.mla->pairs.empty()) return out;
  const OfficialMha2Mla& o = *out.mla->official;
  const std::string source = (dir / "config.json").string();
  const fs::path file = locate(o.rankFile, dir, source);
  const torch::Tensor t = readPickled(file);
  const int L = cfg.numLayers, G = cfg.numKvHeads, half = cfg.headDim / 2, r = out.mla->ropePairs;
  // Format 2: ranks (0 = largest q·k score) per dim, [L, G, d_h], the two dims of a pair equal.
  // Format 1: scores (q + k pair norms) per pair, [L, G, d_h/2].
  const std::int64_t width = o.format == 2 ? cfg.headDim : half;
  if (t.dim() != 3 || t.size(0) != L || t.size(1) != G || t.size(2) != width) {
    std::string shape;
    for (auto s : t.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(s);
    throw Error(ErrorCode::BadModel, file.string() + ": a tensor of shape [" + shape + "]; this model needs [" +
                                         std::to_string(L) + ", " + std::to_string(G) + ", " + std::to_string(width) +
                                         "] (layers, KV heads, " + (o.format == 2 ? "head dims" : "pairs") + ")");
  }
  const auto values = t.to(torch::kFloat64).contiguous();
  const auto a = values.accessor<double, 3>();
  out.mla->pairs.assign(static_cast<std::size_t>(L), std::vector<std::vector<int>>(static_cast<std::size_t>(G)));
  for (int l = 0; l < L; ++l) {
    for (int g = 0; g < G; ++g) {
      std::vector<int> kept;
      if (o.format == 2) {
        for (int k = 0; k < half; ++k) {
          if (a[l][g][k] < r) kept.push_back(k);
        }
      } else {
        std::vector<int> order(static_cast<std::size_t>(half));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return a[l][g][x] > a[l][g][y]; });
        kept.assign(order.begin(), order.begin() + r);
        std::sort(kept.begin(), kept.end());
      }
      if (static_cast<int>(kept.size()) != r) {
        throw Error(ErrorCode::BadModel, file.string() + ": layer " + std::to_string(l) + ", KV head " +
                                             std::to_string(g) + " ranks " + std::to_string(kept.size()) +
                                             " pairs below " + std::to_string(r) +
                                             "; the rank of each pair must be "
                                             "distinct (0 .. d_h/2-1) and equal for its two dims");
      }
      out.mla->pairs[static_cast<std::size_t>(l)][static_cast<std::size_t>(g)] = kept;
    }
  }
  out.validate(source);
  return out;
}

}  // namespace latentlab
