// Export of a DeepSeek-target conversion or a from-scratch MLA model as a
// DeepSeek-V3 checkpoint (docs/conversion.md, "Export").
#include <cmath>

#include "common/deepseek_layout.h"
#include "convert/output_folder.h"
#include "io/hf_checkpoint.h"
#include "latentlab/convert.h"
#include "model/torch_util.h"
#include "model/weights.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {

// transformers' DeepseekV3RMSNorm for q_a_layernorm and kv_a_layernorm has a
// fixed epsilon; the export scales the normed input to keep the model's.
constexpr double kDeepSeekLatentNormEps = 1e-6;

// The model as the export writes it: DeepSeek's layout and config.
ModelConfig exportedConfig(const ModelConfig& cfg, double theta, DType dtype) {
  ModelConfig e = cfg;
  e.modelType = "deepseek_v3";
  e.architecture = "DeepseekV3ForCausalLM";
  e.ropeTheta = theta;
  e.torchDType = dtype;
  e.numKvHeads = cfg.numHeads;
  LatentAttention& a = *e.latent;
  a.ropeInterleaved = true;
  a.latentNormEps = kDeepSeekLatentNormEps;
  a.scaled = false;
  a.conversion.reset();
  // The standard table of a d_R-wide head at theta, scaled as the config says.
  a.ropeSourcePairs.clear();
  a.ropeSourceHeadDim = 0;
  return e;
}

// rotate_half layout [x_0..x_{n-1}, y_0..y_{n-1}] -> interleaved [x_0, y_0, x_1, y_1, ...].
torch::Tensor interleaveRows(const torch::Tensor& rows) {
  const auto n = rows.size(0) / 2;
  return torch::stack({rows.narrow(0, 0, n), rows.narrow(0, n, n)}, 1).reshape(rows.sizes());
}

// q_proj / q_b_proj (n_h (d_nope + d_R), in): each head's RoPE rows interleaved.
torch::Tensor interleaveQueryRows(const torch::Tensor& w, int heads, int dNope, int dRope) {
  auto v = w.view({heads, dNope + dRope, w.size(1)});
  std::vector<torch::Tensor> out;
  for (int h = 0; h < heads; ++h) {
    out.push_back(torch::cat({v[h].narrow(0, 0, dNope), interleaveRows(v[h].narrow(0, dNope, dRope))}, 0));
  }
  return torch::cat(out, 0);
}

}  // namespace

ExportReport exportModel(const ExportSpec& spec, ProgressSink& progress, const CancelToken& cancel) {
  return withTorchErrors("export", [&]() {
    if (spec.format != "deepseek-v3") {
      throw Error(ErrorCode::BadInput, "export: unknown format '" + spec.format + "'", "Use deepseek-v3.");
    }
    ModelConfig cfg;
    try {
      cfg = readHfConfig(spec.modelDir / "config.json");
    } catch (const Error& e) {
      throw e.withContext("export");
    }
    if (auto why = deepSeekExportProblem(cfg)) {
      throw Error(ErrorCode::BadInput, spec.modelDir.string() + ": cannot export as DeepSeek-V3: " + *why + ".",
                  cfg.mla ? "latentlab-engine convert --target deepseek --model ORIGINAL ..." : "");
    }
    checkOutputFolder(spec.outDir, spec.modelDir, spec.force, "export");
    const DType saveDType = spec.dtype.empty() ? cfg.torchDType : parseDType(spec.dtype);
    const LatentAttention& a = *cfg.latent;
    double theta = 0.0;
    exportedRopeTheta(cfg, &theta);

    progress.progress("load", 0, 1, spec.modelDir.string());
    const auto compute = cfg.torchDType == DType::F64 || saveDType == DType::F64 ? torch::kFloat64 : torch::kFloat32;
    auto model = loadModel(spec.modelDir, torch::kCPU, compute);
    throwIfCancelled(cancel, "export");

    torch::NoGradGuard noGrad;
    const double d = cfg.hiddenSize;
    const double latentEps = a.latentNormEps > 0 ? a.latentNormEps : cfg.rmsNormEps;
    const double normInputScale = std::sqrt(kDeepSeekLatentNormEps / latentEps);
    // A model read from a DeepSeek-V3 folder is in that layout already.
    const bool permute = !a.ropeInterleaved;
    const double qScale = a.scaled && a.qLoraRank > 0 ? std::sqrt(d / a.qLoraRank) : 1.0;
    const double kvScale = a.scaled ? std::sqrt(d / a.latentDim()) : 1.0;
    const auto type = toTorch(saveDType);
    std::vector<torch::Tensor> keep;
    std::vector<TensorWrite> writes;
    for (const auto& item : model->named_parameters(true)) {
      const std::string& name = item.key();
      auto w = item.value().detach();
      if (name.ends_with("self_attn.q_proj.weight") || name.ends_with("self_attn.q_b_proj.weight")) {
        if (permute) w = interleaveQueryRows(w, cfg.numHeads, a.dNope, a.dRope);
      } else if (name.ends_with("self_attn.q_a_proj.weight")) {
        w = w * normInputScale;
      } else if (name.ends_with("self_attn.q_a_layernorm.weight")) {
        w = w * qScale;
      } else if (name.ends_with("self_attn.kv_a_proj_with_mqa.weight")) {
        auto kRope = w.narrow(0, a.dC, a.dRope);
        w = torch::cat({w.narrow(0, 0, a.dC) * normInputScale, permute ? interleaveRows(kRope) : kRope}, 0);
      } else if (name.ends_with("self_attn.kv_a_layernorm.weight")) {
        w = w * kvScale;
      }
      auto t = w.to(type).contiguous();
      keep.push_back(t);
      writes.push_back({name, saveDType, t.sizes().vec(), t.data_ptr()});
    }
    model.reset();

    const ModelConfig exported = exportedConfig(cfg, theta, saveDType);
    progress.progress("save", 0, 1, spec.outDir.string());
    const auto leftover = writeReplacingFolder(spec.outDir, [&](const fs::path& dir) {
      writeHfCheckpoint(dir, exported, writes, {{"producer", "latentlab export"}, {"source", spec.modelDir.string()}},
                        std::uint64_t{4} << 30);
      copyTokenizerFiles(spec.modelDir, dir);
    });
    if (leftover) {
      progress.log(LogLevel::Warning,
                   "the old folder could not be removed completely; what is left of it is at " + leftover->string());
    }
    progress.progress("save", 1, 1, "");

    ExportReport r;
    r.outDir = spec.outDir;
    r.kvLoraRank = a.dC;
    r.qkRopeHeadDim = a.dRope;
    r.qkNopeHeadDim = a.dNope;
    r.vHeadDim = a.dV;
    r.qLoraRank = a.qLoraRank;
    r.ropeTheta = theta;
    r.ropeType = cfg.ropeScaling.type;
    r.kvPerTokenPerLayer = static_cast<std::int64_t>(a.dC) + a.dRope;
    r.kvBytesPerToken = r.kvPerTokenPerLayer * cfg.numLayers * static_cast<std::int64_t>(dtypeSize(saveDType));
    r.tensors = static_cast<int>(writes.size());
    return r;
  });
}

}  // namespace latentlab
