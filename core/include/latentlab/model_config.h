// The architecture of a Llama-family decoder as LatentLab understands it:
// read from an HF config.json or built in. Plain data, no torch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "latentlab/vocabulary.h"

namespace latentlab {

enum class DType { F32, F16, BF16, F64 };
const char* dtypeName(DType dtype);         // "F32", "F16", ...
std::size_t dtypeSize(DType dtype);         // bytes per element
DType parseDType(const std::string& name);  // "F32"/"float32"/"fp32"/... ; throws

// RoPE frequency scaling as an HF config declares it (`rope_scaling`, or
// transformers 5's `rope_parameters`); docs/rope_scaling.md gives the formulas.
struct RopeScaling {
  std::string type = "default";           // default | linear | dynamic | yarn | llama3 | longrope
  double factor = 1.0;                    // linear, dynamic, yarn, llama3; longrope: context / original context
  double lowFreqFactor = 1.0;             // llama3
  double highFreqFactor = 4.0;            // llama3
  int originalMaxPositionEmbeddings = 0;  // llama3, yarn (the pre-training context)
  std::optional<double> attentionFactor;  // yarn, as given; else derived from factor and mscale
  double betaFast = 32.0;                 // yarn
  double betaSlow = 1.0;                  // yarn
  std::optional<double> mscale;           // yarn
  std::optional<double> mscaleAllDim;     // yarn
  bool truncate = true;                   // yarn: round the correction range outwards
  // longrope (Phi-3 / Phi-4-mini): one divisor per frequency pair, the short
  // ones while a sequence fits the original context, the long ones past it.
  std::vector<double> shortFactor, longFactor;
  bool isDefault() const { return type == "default"; }
  // yarn's and longrope's factor on cos and sin (so on every query-key product, squared); 1 otherwise.
  double attentionScaling() const;
  std::string describe() const;  // "llama3 (factor 32, low 1, high 4, original 8192)"
};

// A checkpoint written by the official MHA2MLA code (docs/official_mha2mla.md):
// its config block and tensor names, read as an MHA2MLA conversion. Loading
// maps its tensors onto LatentLab's layout; what it saves is LatentLab's.
struct OfficialMha2Mla {
  int format = 2;        // 1: "RoPE"/"SVD" blocks, W_* tensors; 2: the "mha2mla" block, k_r_proj / kv_proj.*
  std::string version;   // its partial-RoPE version as written ("2-norm"; format 1: "4")
  std::string rankFile;  // 2-norm: format 2's rank tensor, format 1's score tensor (as config.json names it)
};

// MHA2MLA fields of a converted checkpoint (absent on an original model).
struct MlaConversion {
  RopeStrategy ropeStrategy = RopeStrategy::TwoNorm;
  int ropePairs = 0;  // r: kept RoPE frequency pairs per head
  int dKv = 0;        // latent dims per KV head (joint), or per factor (split)
  SvdMethod svdMethod = SvdMethod::Joint;
  std::optional<TwoNormScore> twoNormScore;  // 2-norm only (absent in older folders)
  // Kept RoPE pairs per layer and KV head: [layer][kvHead][i], ascending.
  // Empty until loading for an official 2-norm checkpoint (its rank file decides).
  std::vector<std::vector<std::vector<int>>> pairs;
  std::optional<OfficialMha2Mla> official;  // read from the official code's layout
  // The converted decoder layers, ascending; absent: every layer. The others
  // keep the original attention and its K/V cache (a hybrid model).
  std::optional<std::vector<int>> layers;
  // d_kv per decoder layer when a KV budget spread it over the layers (one
  // entry per layer, 0 for an unconverted one); empty: dKv in every converted
  // layer. dKv is then the largest entry.
  std::vector<int> layerDKv;
  bool converts(int layer) const { return !layers || std::binary_search(layers->begin(), layers->end(), layer); }
  int dKvOf(int layer) const { return layerDKv.empty() ? dKv : layerDKv[static_cast<std::size_t>(layer)]; }
};

// Where a DeepSeek-target conversion (docs/conversion.md) came from and how it
// was made; absent on models trained from scratch.
struct LatentConversion {
  int sourceKvHeads = 0;                                 // n_kv of the original model (its KV cache: 2 n_kv d_h)
  int freqFold = 1;                                      // FreqFold: adjacent frequencies sharing one RoPE component
  Factorisation factorise = Factorisation::Activations;  // how the latent was found
};

// A latent attention trained from scratch (algorithms.md §4), or converted
// from MHA/GQA to DeepSeek's layout (docs/conversion.md), stored in config.json under
// "latentlab_latent". Latent head l (of latentHeads) belongs
// to branch l / (latentHeads / branches) and serves the contiguous query heads
// [(l % P) * G, (l % P + 1) * G) with P = latentHeads / branches, G = n_h / P:
//   MLA     1 latent head, 1 branch      (DeepSeek-V2/V3)
//   GLA-k   k latent heads, 1 branch     (query-head group j reads latent j)
//   MLRA-2  4 latent heads, 2 branches   (A: latents 0,1; B: latents 2,3)
//   MLRA-4  4 latent heads, 4 branches   (every latent serves every head)
// Branch outputs are summed. Softmax scale 1/sqrt(d_nope + d_rope).
struct LatentAttention {
  LatentKind kind = LatentKind::Mla;
  int dC = 0;           // KV latent dims, all latent heads together
  int dRope = 0;        // d_R: dims of the shared single-head RoPE key
  int dNope = 0;        // NoPE query/key dims per head
  int dV = 0;           // value dims per head
  int qLoraRank = 0;    // query latent rank; 0 = one plain q_proj (DeepSeek's q_lora_rank null)
  int latentHeads = 1;  // MLA 1, GLA-k k, MLRA 4
  int branches = 1;     // MLRA-2 2, MLRA-4 4, else 1
  // MLRA paper's factors: q latent x sqrt(d/q_lora_rank), each KV latent head
  // x sqrt(d/(d_c/latent_heads)), branch outputs x 1/sqrt(branches).
  bool scaled = true;
  // RMSNorm on the latent (kv_a_layernorm). Always on, except in the
  // exactness check of a conversion before the norm is introduced.
  bool latentNorm = true;
  // DeepSeek's checkpoint layout: the RoPE dims of the query heads and the
  // shared key interleave each pair's two dims ([x0, y0, x1, y1, ...])
  // instead of keeping them half apart, and the latent norms use their own
  // epsilon (latentNormEps; 0 = rms_norm_eps). Set on DeepSeek-V3 folders.
  bool ropeInterleaved = false;
  double latentNormEps = 0.0;
  // RoPE frequencies of the shared key. Empty: theta_k = rope_theta^(-2k/d_R)
  // under the config's RoPE scaling (DeepSeek-V3's table; LatentLab's own
  // from-scratch configs carry none). Otherwise pair k of the d_R/2 pairs has the frequency of pair
  // ropeSourcePairs[k] of a ropeSourceHeadDim-wide head under the config's
  // rope_theta and RoPE scaling (a conversion keeps its original frequencies).
  int ropeSourceHeadDim = 0;
  std::vector<int> ropeSourcePairs;
  std::optional<LatentConversion> conversion;

  int latentDim() const { return dC / latentHeads; }               // dims of one latent head
  int latentsPerBranch() const { return latentHeads / branches; }  // P
  std::string name() const;                                        // "mla", "gla-2", "mlra-4"
};

// A sparse mixture-of-experts MLP (Qwen3-MoE): a router (mlp.gate) scores
// `experts` SwiGLU experts of width `intermediate` per token and the `topK`
// most probable run, their outputs weighted by the router's probabilities
// (renormalised over the chosen ones with normTopK). Layer l is sparse unless
// it is listed in denseLayers or (l + 1) is not a multiple of sparseStep;
// dense layers keep the plain MLP of intermediate_size.
struct MoeConfig {
  int experts = 0;
  int topK = 0;
  int intermediate = 0;          // moe_intermediate_size
  bool normTopK = false;         // norm_topk_prob
  int sparseStep = 1;            // decoder_sparse_step
  std::vector<int> denseLayers;  // mlp_only_layers, ascending
  // The checkpoint holds each layer's experts as two 3-D tensors
  // (experts.gate_up_proj, experts.down_proj) instead of one set per expert.
  bool fusedExperts = false;
};

struct ModelConfig {
  std::string modelType = "llama";  // HF model_type
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
  RopeScaling ropeScaling;
  // Sliding-window attention: each query of a windowed layer sees the last
  // `slidingWindow` keys, itself included (Mistral and Phi-3: every layer;
  // Gemma-3: the layers in slidingLayers).
  std::optional<int> slidingWindow;
  std::vector<int> slidingLayers;  // ascending; empty with a window: every layer is windowed
  double rmsNormEps = 1e-5;
  bool tieWordEmbeddings = false;
  bool attentionBias = false;  // q/k/v biases (Qwen2 has them; o has none)
  bool oProjBias = false;      // o_proj bias (Llama's attention_bias covers o too)
  bool mlpBias = false;
  std::optional<int> bosTokenId;
  std::optional<int> eosTokenId;
  std::optional<int> padTokenId;  // not used (batches are full windows); written back for transformers
  DType torchDType = DType::F32;  // the checkpoint's declared torch_dtype
  // Layer options a family switches on in the one decoder (docs/families.md).
  bool qkNorm = false;            // q_norm, k_norm: RMSNorm over each head's query and key before RoPE (Qwen3)
  std::vector<int> nopeLayers;    // layers without RoPE, ascending (SmolLM3: the zeros of no_rope_layers)
  int rotaryDim = 0;              // leading dims of each head that rotate (Phi-3's partial_rotary_factor); 0 = all
  bool fusedProjections = false;  // checkpoint keys qkv_proj and gate_up_proj (Phi-3), split in the model
  // Gemma-3: RMSNorm as x/rms(x) * (1 + w) all in fp32; norms on the attention
  // and MLP outputs too (pre/post feed-forward); embeddings times sqrt(d);
  // GeGLU (tanh); softmax scale query_pre_attn_scalar^-1/2; its windowed
  // layers rotate at their own base; logits soft-capped when set.
  bool normPlusOne = false;
  bool sandwichNorms = false;
  bool scaleEmbeddings = false;
  bool geluTanh = false;                 // MLP activation gelu (tanh approximation) instead of silu
  std::optional<double> queryScalar;     // query_pre_attn_scalar
  std::optional<double> localRopeTheta;  // RoPE base of the windowed layers (rope_local_base_freq)
  std::optional<double> finalLogitSoftcap;
  std::optional<MoeConfig> moe;           // Qwen3-MoE's sparse MLP
  std::optional<MlaConversion> mla;       // set on MHA2MLA-converted checkpoints
  std::optional<LatentAttention> latent;  // set on from-scratch MLA / GLA / MLRA models

  // config.json fields the reader does not use: what it does with each
  // ("ignored: ...") for `inspect` to show before a run.
  std::vector<std::pair<std::string, std::string>> unusedFields;

  int kvGroupSize() const { return numHeads / numKvHeads; }
  // Dims of each head that rotate: RoPE frequency pair k (of ropeDim()/2)
  // turns dims k and k + ropeDim()/2; dims from ropeDim() on never rotate.
  int ropeDim() const { return rotaryDim > 0 ? rotaryDim : headDim; }
  bool usesRope(int layer) const;  // false for the layers listed in nopeLayers
  // The window of layer `layer`'s attention, or 0 for full causal attention.
  int windowOf(int layer) const;
  bool sparseLayer(int layer) const;  // layer `layer` has the mixture-of-experts MLP
  // The softmax scale of the query-key products: 1/sqrt(dim) times yarn's
  // attention factor squared (it multiplies both the query's and the key's
  // cos/sin; folding it here applies it to RoPE and NoPE dims alike).
  double softmaxScale(int dim) const;
  // A partially rotating head (Phi-3) takes that factor on its rotating dims
  // only, as transformers does (on cos and sin): its RoPE tables carry it and
  // softmaxScale leaves it out. 1 for fully rotating heads.
  double ropeTableScale() const;
  // "llama (Llama-3 RoPE scaling ...)": the family and RoPE variant read.
  std::string familyDescription() const;
  // Throws Error(BadModel) naming `source` and the field when inconsistent.
  void validate(const std::string& source) const;
};

// Parameter count of the decoder described by `cfg` (embedding counted once
// when tied).
std::int64_t countParameters(const ModelConfig& cfg);

// Attention parameters of layer `layer` (projections and attention-internal norms).
std::int64_t attentionParameters(const ModelConfig& cfg, int layer);
// The same for the first layer with RoPE (every layer but an MHA2MLA
// conversion's NoPE layers, which have no RoPE key, has as many).
std::int64_t attentionParametersPerLayer(const ModelConfig& cfg);

// Parameter matching (MLRA recipe): sets the MLP width to the multiple of
// `multiple` that brings countParameters(cfg) nearest to `target`. A latent
// config with q_lora_rank 0 first gets the paper's rank: d/2 for MLA, d/3 for
// GLA and MLRA (rounded to `multiple`). Throws Error(BadInput) when the target
// leaves no room for an MLP.
ModelConfig matchParameters(ModelConfig cfg, std::int64_t target, int multiple = 8);
// The paper's query latent rank for a latent kind: d/2 for "mla", d/3 otherwise,
// rounded to a multiple of `multiple` (1536 and 1024 at d = 3072).
int defaultQLoraRank(int hidden, LatentKind kind, int multiple = 8);

// Reads and validates `dir/config.json` (Llama-family, or dense DeepSeek-V3
// as a latent model); throws Error naming the file.
ModelConfig readHfConfig(const std::filesystem::path& configJson);
// Writes cfg as an HF config.json (plus LatentLab's MLA fields when set); a
// model_type deepseek_v3 config as DeepSeek-V3's own config.json.
void writeHfConfig(const ModelConfig& cfg, const std::filesystem::path& configJson);

}  // namespace latentlab
