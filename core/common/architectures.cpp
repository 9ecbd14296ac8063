// Built-in shapes: SmolLM-135M/360M/1.7B, Llama-2-7B and the demo models.
#include "latentlab/architectures.h"

#include <map>

#include "latentlab/error.h"

namespace latentlab {

namespace {
ModelConfig shape(int vocab, int hidden, int inter, int layers, int heads, int kv, bool tied, double eps,
                  double theta, int maxPos) {
  ModelConfig c;
  c.vocabSize = vocab;
  c.hiddenSize = hidden;
  c.intermediateSize = inter;
  c.numLayers = layers;
  c.numHeads = heads;
  c.numKvHeads = kv;
  c.headDim = hidden / heads;
  c.tieWordEmbeddings = tied;
  c.rmsNormEps = eps;
  c.ropeTheta = theta;
  c.maxPositionEmbeddings = maxPos;
  return c;
}

const std::map<std::string, ModelConfig>& table() {
  static const std::map<std::string, ModelConfig> t = {
      // HF SmolLM family (GQA, tied embeddings, d_h 64).
      {"smollm-135m", shape(49152, 576, 1536, 30, 9, 3, true, 1e-5, 10000.0, 2048)},
      {"smollm-360m", shape(49152, 960, 2560, 32, 15, 5, true, 1e-5, 10000.0, 2048)},
      {"smollm-1.7b", shape(49152, 2048, 8192, 24, 32, 32, true, 1e-5, 10000.0, 2048)},
      // Llama-2-7B (MHA, d_h 128).
      {"llama-2-7b", shape(32000, 4096, 11008, 32, 32, 32, false, 1e-5, 10000.0, 4096)},
      // Demo bases pre-trained by LatentLab on CPU (d_h 32: r = 2 by default).
      {"demo-mha", shape(4096, 128, 352, 4, 4, 4, true, 1e-5, 10000.0, 1024)},
      {"demo-gqa", shape(4096, 128, 352, 4, 4, 2, true, 1e-5, 10000.0, 1024)},
  };
  return t;
}
} // namespace

std::vector<std::string> builtinArchitectureNames() {
  std::vector<std::string> out;
  for (const auto& [name, cfg] : table()) out.push_back(name);
  return out;
}

ModelConfig builtinArchitecture(const std::string& name, int vocabSize) {
  auto it = table().find(name);
  if (it == table().end()) {
    std::string known;
    for (const auto& n : builtinArchitectureNames()) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::BadInput, "unknown architecture '" + name + "'", "Known: " + known + ".");
  }
  ModelConfig c = it->second;
  if (vocabSize > 0) c.vocabSize = vocabSize;
  c.validate("architecture '" + name + "'");
  return c;
}

} // namespace latentlab
