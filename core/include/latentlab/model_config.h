// The architecture of a Llama-family decoder as LatentLab understands it:
// read from an HF config.json or built in. Plain data, no torch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace latentlab {

enum class DType { F32, F16, BF16, F64 };
const char* dtypeName(DType dtype);          // "F32", "F16", ...
std::size_t dtypeSize(DType dtype);          // bytes per element
DType parseDType(const std::string& name);   // "F32"/"float32"/"fp32"/... ; throws

// MHA2MLA fields of a converted checkpoint (absent on an original model).
struct MlaConversion {
  std::string ropeStrategy;              // "high", "low", "uniform", "2-norm", "full"
  int ropePairs = 0;                     // r: kept RoPE frequency pairs per head
  int dKv = 0;                           // latent dims per KV head (joint), or per factor (split)
  std::string svdMethod = "joint";       // "joint" or "split"
  std::string twoNormScore;              // "product" / "sum" (2-norm only)
  // Kept RoPE pairs per layer and KV head: [layer][kvHead][i], ascending.
  std::vector<std::vector<std::vector<int>>> pairs;
};

struct ModelConfig {
  std::string modelType = "llama";       // HF model_type
  std::string architecture = "LlamaForCausalLM";
  int vocabSize = 0;
  int hiddenSize = 0;
  int intermediateSize = 0;
  int numLayers = 0;
  int numHeads = 0;
  int numKvHeads = 0;
  int headDim = 0;
  int maxPositionEmbeddings = 2048;
  double ropeTheta = 10000.0;
  double rmsNormEps = 1e-5;
  bool tieWordEmbeddings = false;
  bool attentionBias = false;            // q/k/v biases (Qwen2 has them; o has none)
  bool oProjBias = false;                // o_proj bias (Llama's attention_bias covers o too)
  bool mlpBias = false;
  std::optional<int> bosTokenId;
  std::optional<int> eosTokenId;
  DType torchDType = DType::F32;         // the checkpoint's declared torch_dtype
  std::optional<MlaConversion> mla;      // set on MHA2MLA-converted checkpoints

  int kvGroupSize() const { return numHeads / numKvHeads; }
  // Throws Error(BadModel) naming `source` and the field when inconsistent.
  void validate(const std::string& source) const;
};

// Parameter count of the decoder described by `cfg` (embedding counted once
// when tied).
std::int64_t countParameters(const ModelConfig& cfg);

// Reads and validates `dir/config.json`; throws Error naming the file.
ModelConfig readHfConfig(const std::filesystem::path& configJson);
// Writes cfg as an HF config.json (plus LatentLab's MLA fields when set).
void writeHfConfig(const ModelConfig& cfg, const std::filesystem::path& configJson);

} // namespace latentlab
