// latentlab-engine: the headless engine. One verb per job; exit codes
// 0 done, 1 error, 2 cancelled.
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_args.h"
#include "engine_cli.h"
#include "latentlab/architectures.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "latentlab/kv_quant.h"
#include "latentlab/memory_plan.h"
#include "latentlab/multiple_choice.h"
#include "latentlab/version.h"

using namespace latentlab;
using nlohmann::json;
namespace fs = std::filesystem;
using namespace latentlab::cli;

namespace {

const char* kMainHelp = "latentlab-engine " LATENTLAB_VERSION
                        " - MHA/GQA to MLA conversion and latent-attention training\n"
                        "\n"
                        "usage: latentlab-engine VERB [options]   (VERB --help for its options)\n"
                        "\n"
                        "verbs:\n"
                        "  inspect DIR        architecture, parameters, KV cache per token of an HF model folder\n"
                        "  eval DIR           mean loss and perplexity over a held-out token stream\n"
                        "  generate           text from a model with its own (latent) cache, streamed\n"
                        "  convert            MHA/GQA -> MLA conversion (MHA2MLA or DeepSeek-V3 attention)\n"
                        "  export             write a converted or MLA model as a DeepSeek-V3 checkpoint\n"
                        "  init               write a randomly initialised built-in architecture\n"
                        "  run                run a training job (a spec file, or a run in a workspace DB)\n"
                        "  runs               list, show or export the runs of a workspace DB\n"
                        "  submit             register a run and submit it to Slurm (a cluster profile)\n"
                        "  demo               pre-train the demo base models and run the demo experiment\n"
                        "  devices            devices LibTorch can use here\n"
                        "  version            versions of LatentLab and LibTorch\n"
                        "\n"
                        "exit codes: 0 done, 1 error, 2 cancelled\n";

// `inspect`'s usage, printed for --help or without exactly one DIR.
void printInspectUsage() {
  std::printf(
      "usage: latentlab-engine inspect DIR [--json] [--tp N] [--kv-quant Q [--kv-group G]\n"
      "                                [--kv-residual N] [--context N]]\n\n"
      "Reads DIR/config.json and the safetensors headers (no weights are loaded), checks every\n"
      "tensor the model needs, and prints architecture, parameter count, layers, heads, KV heads,\n"
      "head_dim, KV-cache elements and bytes per token, dtype and size on disk.\n"
      "  --json   print one JSON object instead of text\n"
      "  --tp N   also the KV cache one device holds under N-way tensor parallelism (default 1)\n"
      "  --kv-quant Q      also the cache quantized: none | int8 | int4 | int2 (docs/kv_quant.md)\n"
      "  --kv-group G      values per scale and zero-point along a cached row (default 64)\n"
      "  --kv-residual N   the newest N tokens kept in full precision (default 128)\n"
      "  --context N       tokens of the whole-cache figure (default the model's context)\n");
}

// `inspect --kv-quant`: the quantized cache's bytes per token (codes, scales
// and zero-points) and for a context, against the cache at the weights' dtype.
json kvQuantJson(const ModelSummary& s, const KvQuantBudget& q, std::int64_t context) {
  return {{"format", kvQuantName(q.settings.bits)},
          {"group", q.settings.group},
          {"residual", q.settings.residual},
          {"dtype", dtypeName(s.weightDType)},
          {"full_bytes_per_token", q.fullBytesPerToken},
          {"quantized_bytes_per_token", q.quantizedBytesPerToken},
          {"code_bytes_per_token", q.codeBytesPerToken},
          {"scale_and_zero_bytes_per_token", q.scaleBytesPerToken},
          {"context", context},
          {"bytes_at_context", q.bytesFor(context)},
          {"unquantized_bytes_at_context", q.fullBytesPerToken * context},
          {"original_bytes_at_context", s.kv.originalBytesPerToken * context}};
}

void printKvQuant(const ModelSummary& s, const KvQuantBudget& q, std::int64_t context) {
  const double original = static_cast<double>(s.kv.originalBytesPerToken * context);
  std::printf(
      "kv quant      %s in groups of %d, newest %d tokens full: %lld bytes/token (%lld of codes, %lld of "
      "scales and zero-points) against %lld\n",
      kvQuantName(q.settings.bits), q.settings.group, q.settings.residual,
      static_cast<long long>(q.quantizedBytesPerToken), static_cast<long long>(q.codeBytesPerToken),
      static_cast<long long>(q.scaleBytesPerToken), static_cast<long long>(q.fullBytesPerToken));
  std::printf("kv context    %lld tokens: %s quantized, %s unquantized, %s the original model's (saving %.2f%%)\n",
              static_cast<long long>(context), formatBytes(q.bytesFor(context)).c_str(),
              formatBytes(q.fullBytesPerToken * context).c_str(),
              formatBytes(s.kv.originalBytesPerToken * context).c_str(),
              original > 0 ? 100.0 * (1.0 - static_cast<double>(q.bytesFor(context)) / original) : 0.0);
}

// The summary's flat figures: shape, KV cache, files.
json summaryJson(const ModelSummary& s) {
  const ModelConfig& c = s.config;
  return {{"dir", s.dir.string()},
          {"architecture", c.architecture},
          {"model_type", c.modelType},
          {"parameters", s.parameters},
          {"layers", c.numLayers},
          {"hidden_size", c.hiddenSize},
          {"intermediate_size", c.intermediateSize},
          {"heads", c.numHeads},
          {"kv_heads", c.numKvHeads},
          {"head_dim", c.headDim},
          {"vocab_size", c.vocabSize},
          {"tie_word_embeddings", c.tieWordEmbeddings},
          {"attention_bias", c.attentionBias},
          {"mlp_bias", c.mlpBias},
          {"rope_theta", c.ropeTheta},
          {"dtype", dtypeName(s.weightDType)},
          {"kv_elements_per_token", s.kv.perToken},
          {"kv_elements_per_token_per_layer", s.kv.perTokenPerLayer},
          {"kv_bytes_per_token", s.kv.bytesPerToken},
          {"original_kv_bytes_per_token", s.kv.originalBytesPerToken},
          {"kv_saving", s.kv.saving},
          {"tp_degree", s.kv.tpDegree},
          {"kv_elements_per_token_per_layer_per_device", s.kv.perDevicePerTokenPerLayer},
          {"kv_bytes_per_token_per_device", s.kv.perDeviceBytesPerToken},
          {"size_on_disk", s.sizeOnDisk},
          {"files", s.weightFiles},
          {"tensors", s.tensorCount},
          {"unused_keys", s.unusedKeys},
          {"family", c.familyDescription()},
          {"max_position_embeddings", c.maxPositionEmbeddings},
          {"sliding_window", c.slidingWindow ? json(*c.slidingWindow) : json(nullptr)}};
}

// The RoPE settings: type, theta, and the scaling's factor and original context when set.
json ropeJson(const ModelConfig& c) {
  json rope = {
      {"type", c.ropeScaling.type}, {"theta", c.ropeTheta}, {"attention_scaling", c.ropeScaling.attentionScaling()}};
  if (!c.ropeScaling.isDefault()) rope["factor"] = c.ropeScaling.factor;
  if (c.ropeScaling.originalMaxPositionEmbeddings > 0)
    rope["original_max_position_embeddings"] = c.ropeScaling.originalMaxPositionEmbeddings;
  return rope;
}

// An MHA2MLA conversion's settings, and the official layout it was read from.
json mlaJson(const MlaConversion& mla) {
  json j = {{"rope_strategy", choiceName(mla.ropeStrategy)},
            {"rope_pairs", mla.ropePairs},
            {"d_kv", mla.dKv},
            {"svd_method", choiceName(mla.svdMethod)}};
  if (mla.layers) j["layers"] = *mla.layers;                      // a hybrid model: the converted layers
  if (!mla.layerDKv.empty()) j["d_kv_per_layer"] = mla.layerDKv;  // a KV budget spread over the layers
  if (mla.official) {
    j["official_layout"] = mla.official->format;
    j["official_version"] = mla.official->version;
  }
  return j;
}

// The cache per layer kind: RoPE layers, an MHA2MLA conversion's NoPE layers
// (latent only), and a hybrid conversion's unconverted layers (original K/V).
// With a per-layer d_kv the converted layers' figures differ (null here;
// kv_elements_per_token_each_layer has them).
json kvLayerKindsJson(const ModelSummary& s) {
  const bool perLayer = s.config.mla && !s.config.mla->layerDKv.empty();
  const auto converted = [&](std::int64_t e) { return perLayer ? json(nullptr) : json(e); };
  json kinds = json::array({{{"kind", "rope"},
                             {"layers", s.config.numLayers - s.kv.nopeLayers - s.kv.originalLayers},
                             {"elements_per_token_per_layer", converted(s.kv.perTokenPerLayer)}}});
  if (s.kv.nopeLayers > 0) {
    kinds.push_back({{"kind", "nope"},
                     {"layers", s.kv.nopeLayers},
                     {"elements_per_token_per_layer", converted(s.kv.nopePerTokenPerLayer)}});
  }
  if (s.kv.originalLayers > 0) {
    kinds.push_back({{"kind", "original"},
                     {"layers", s.kv.originalLayers},
                     {"elements_per_token_per_layer", s.kv.originalPerTokenPerLayer}});
  }
  return kinds;
}

// Latent attention's variant and dimensions.
json latentJson(const LatentAttention& a) {
  return {{"variant", a.name()},
          {"d_c", a.dC},
          {"d_rope", a.dRope},
          {"d_nope", a.dNope},
          {"d_v", a.dV},
          {"q_lora_rank", a.qLoraRank},
          {"latent_heads", a.latentHeads},
          {"branches", a.branches},
          {"scaled", a.scaled}};
}

// `inspect --json`: the whole summary as one JSON object.
void printInspectJson(const ModelSummary& s, const json& kvQuant) {
  const ModelConfig& c = s.config;
  json j = summaryJson(s);
  if (!kvQuant.is_null()) j["kv_quant"] = kvQuant;
  j["rope"] = ropeJson(c);
  json unused = json::object();
  for (const auto& [field, what] : c.unusedFields) unused[field] = what;
  j["config_fields_not_used"] = unused;
  if (c.mla) j["mla"] = mlaJson(*c.mla);
  j["kv_layer_kinds"] = kvLayerKindsJson(s);
  j["kv_elements_per_token_each_layer"] = s.kv.layerElements;
  j["kv_key_scale_elements_per_token_per_layer"] = s.kv.keyScalePerTokenPerLayer;
  j["qk_norm"] = c.qkNorm;
  j["nope_layers"] = c.nopeLayers;
  j["rotary_dim"] = c.ropeDim();
  if (c.latent) j["latent"] = latentJson(*c.latent);
  std::cout << j.dump(2) << "\n";
}

// Text: the model itself (architecture, shape, RoPE, an MHA2MLA conversion or latent attention).
void printModelSection(const ModelSummary& s) {
  const ModelConfig& c = s.config;
  std::printf("model         %s\n", s.dir.string().c_str());
  std::printf("architecture  %s (model_type %s)%s\n", c.architecture.c_str(), c.modelType.c_str(),
              c.mla ? "  [MHA2MLA-converted]" : "");
  std::printf("parameters    %lld (%.1fM)\n", static_cast<long long>(s.parameters), s.parameters / 1e6);
  std::printf("layers        %d\n", c.numLayers);
  std::printf("hidden        %d   (MLP %d)\n", c.hiddenSize, c.intermediateSize);
  std::printf("heads         %d   KV heads %d   head_dim %d   (%s)\n", c.numHeads, c.numKvHeads, c.headDim,
              c.latent                     ? "latent; KV heads unused"
              : c.numKvHeads == c.numHeads ? "MHA"
              : c.numKvHeads == 1          ? "MQA"
                                           : "GQA");
  std::printf("vocab         %d   tied embeddings %s\n", c.vocabSize, c.tieWordEmbeddings ? "yes" : "no");
  std::printf("biases        attention %s   mlp %s\n", c.attentionBias ? "yes" : "no", c.mlpBias ? "yes" : "no");
  std::printf("family        %s\n", c.familyDescription().c_str());
  std::printf("rope          theta %g   context %d\n", c.ropeTheta, c.maxPositionEmbeddings);
  for (const auto& [field, what] : c.unusedFields) std::printf("config field  %s: %s\n", field.c_str(), what.c_str());
  if (c.mla) {
    std::printf("mla           strategy %s   r %d pairs   d_kv %d   svd %s%s\n",
                std::string(choiceName(c.mla->ropeStrategy)).c_str(), c.mla->ropePairs, c.mla->dKv,
                std::string(choiceName(c.mla->svdMethod)).c_str(),
                !c.mla->official ? ""
                : c.mla->official->format == 2
                    ? "   (official MHA2MLA checkpoint, \"mha2mla\" layout)"
                    : "   (official MHA2MLA checkpoint, first-release \"RoPE\"/\"SVD\" layout)");
    if (c.mla->layers) {
      std::string list;
      for (int l : *c.mla->layers) list += (list.empty() ? "" : ",") + std::to_string(l);
      std::printf("mla layers    %s converted (%zu of %d); the others keep their original attention\n",
                  list.empty() ? "none" : list.c_str(), c.mla->layers->size(), c.numLayers);
    }
    if (!c.mla->layerDKv.empty()) {
      std::string list;
      for (int d : c.mla->layerDKv) list += (list.empty() ? "" : " ") + (d > 0 ? std::to_string(d) : std::string("-"));
      std::printf("mla d_kv      per layer: %s (a KV budget spread over the layers; - original)\n", list.c_str());
    }
  }
  if (c.latent) {
    const LatentAttention& a = *c.latent;
    std::printf("latent        %s   d_c %d (%d latent head(s))   d_R %d   d_nope %d   d_v %d   q_lora %d   %s\n",
                a.name().c_str(), a.dC, a.latentHeads, a.dRope, a.dNope, a.dV, a.qLoraRank,
                a.scaled ? "scaled" : "no scale");
  }
}

// Text: the KV cache per token, per layer kind and per device, and its saving.
void printKvSection(const ModelSummary& s) {
  const ModelConfig& c = s.config;
  const bool perLayer = c.mla && !c.mla->layerDKv.empty();
  std::string layers = perLayer ? "per layer" : std::to_string(s.kv.perTokenPerLayer) + " per layer";
  if (perLayer) {
    for (std::int64_t e : s.kv.layerElements) layers += " " + std::to_string(e);
  }
  std::printf("kv cache      %lld elements/token (%s) = %s/token at %s\n", static_cast<long long>(s.kv.perToken),
              layers.c_str(), formatBytes(static_cast<std::int64_t>(s.kv.bytesPerToken)).c_str(),
              dtypeName(s.weightDType));
  if (s.kv.nopeLayers > 0 && !perLayer) {
    std::printf("kv per layer  %lld elements in each of %d RoPE layers, %lld in each of %d NoPE layers (latent only)\n",
                static_cast<long long>(s.kv.perTokenPerLayer), c.numLayers - s.kv.nopeLayers - s.kv.originalLayers,
                static_cast<long long>(s.kv.nopePerTokenPerLayer), s.kv.nopeLayers);
  }
  if (s.kv.originalLayers > 0 && !perLayer) {
    std::printf(
        "kv hybrid     %lld elements in each of %d converted layers, %lld (the original K/V) in each of %d "
        "unconverted layers\n",
        static_cast<long long>(s.kv.perTokenPerLayer), c.numLayers - s.kv.originalLayers,
        static_cast<long long>(s.kv.originalPerTokenPerLayer), s.kv.originalLayers);
  }
  if (s.kv.keyScalePerTokenPerLayer > 0) {
    std::printf("kv key norm   %lld key-norm scales per layer included (one per KV head: QK norm kept exact)\n",
                static_cast<long long>(s.kv.keyScalePerTokenPerLayer));
  }
  if (s.kv.tpDegree > 1) {
    std::printf("kv per device %lld elements/token (%lld per layer) = %s/token under %d-way tensor parallelism\n",
                static_cast<long long>(s.kv.perDevicePerToken), static_cast<long long>(s.kv.perDevicePerTokenPerLayer),
                formatBytes(static_cast<std::int64_t>(s.kv.perDeviceBytesPerToken)).c_str(), s.kv.tpDegree);
  }
  if (c.mla || c.latent) {
    std::printf("kv saving     %.2f%% against %s (%s/token)\n", s.kv.saving == 0.0 ? 0.0 : -100.0 * s.kv.saving,
                c.latent && !c.latent->conversion ? "MHA with the same heads" : "the original",
                formatBytes(static_cast<std::int64_t>(s.kv.originalBytesPerToken)).c_str());
  }
}

// Text: the weights' dtype, files and keys the model does not use.
void printFilesSection(const ModelSummary& s) {
  std::printf("dtype         %s\n", dtypeName(s.weightDType));
  std::printf("on disk       %s in %zu file(s), %d tensors\n",
              formatBytes(static_cast<std::int64_t>(s.sizeOnDisk)).c_str(), s.weightFiles.size(), s.tensorCount);
  if (!s.unusedKeys.empty()) {
    std::printf("unused keys   %zu (first: %s)\n", s.unusedKeys.size(), s.unusedKeys.front().c_str());
  }
}

int cmdInspect(int argc, char** argv) {
  cli::Args args(argc, argv, 2, {"json", "help"}, {"tp", "kv-quant", "kv-group", "kv-residual", "context"});
  if (args.flag("help") || args.positionals().size() != 1) {
    printInspectUsage();
    return args.flag("help") ? 0 : 1;
  }
  const int tp = args.getInt("tp", 1, 1, 4096);
  ModelSummary s = inspectModel(args.positionals()[0], tp);
  std::optional<KvQuantBudget> quant;
  std::int64_t context = 0;
  if (args.get("kv-quant")) {
    const KvQuantSettings q = readKvQuantFlags(args);
    context = args.getInt64("context", s.config.maxPositionEmbeddings, 1, INT64_MAX);
    if (auto why = checkKvQuant(q, s.config, context)) throw Error(ErrorCode::BadInput, *why);
    quant = kvQuantBudget(s.config, q, s.weightDType);
  }
  if (args.flag("json")) {
    printInspectJson(s, quant ? kvQuantJson(s, *quant, context) : json());
    return 0;
  }
  printModelSection(s);
  printKvSection(s);
  if (quant) printKvQuant(s, *quant, context);
  printFilesSection(s);
  return 0;
}

// `eval DIR --task [NAME=]FILE`: zero-shot multiple choice, as lm-eval scores it.
int evalTask(const cli::Args& args) {
  std::string spec = *args.get("task");
  std::string name = fs::path(spec).stem().string();
  if (const auto eq = spec.find('='); eq != std::string::npos && !fs::exists(spec)) {
    name = spec.substr(0, eq);
    spec = spec.substr(eq + 1);
  }
  ChoiceEvalOptions o;
  o.model = args.positionals()[0];
  o.device = args.get("device", "cpu");
  o.dtype = parseDType(args.get("dtype", "f32"));
  o.limit = args.getInt64("limit", 0, 0, INT64_MAX);
  o.maxLength = args.getInt("max-length", 0, 0, INT_MAX);
  o.batchTokens = args.getInt64("batch-tokens", o.batchTokens, 1, INT64_MAX);
  o.kvQuant = readKvQuantFlags(args);
  StderrProgress progress(args.flag("quiet"));
  const std::string format = args.get("format", "jsonl");
  const auto items =
      readTaskFile(format, spec, args.get(format == "mmlu" ? "dev" : "labels", ""), args.getInt("shots", 0, 0, 1000));
  ChoiceEvalResult r;
  try {
    r = evaluateChoices(o, items, progress, cancelToken());
  } catch (const Error& e) {
    if (e.code() != ErrorCode::BadData) throw;
    throw e.withContext(spec);  // an item that cannot be scored: its file too
  }
  if (args.flag("json")) {
    std::cout << json{{"task", name},
                      {"file", spec},
                      {"items", r.items},
                      {"acc", r.acc},
                      {"acc_stderr", r.accStderr},
                      {"acc_norm", r.accNorm},
                      {"acc_norm_stderr", r.accNormStderr},
                      {"seconds", r.seconds},
                      {"log_likelihoods", r.logLikelihoods}}
                     .dump()
              << "\n";
  } else {
    std::printf("%s  acc %.4f +- %.4f  acc_norm %.4f +- %.4f  over %lld items (%.1f s)\n", name.c_str(), r.acc,
                r.accStderr, r.accNorm, r.accNormStderr, static_cast<long long>(r.items), r.seconds);
  }
  return 0;
}

int cmdEval(int argc, char** argv) {
  cli::Args args(argc, argv, 2, {"json", "help", "quiet"},
                 {"text",       "tokens",   "token-format", "seq-len",     "batch",        "max-tokens", "device",
                  "dtype",      "task",     "limit",        "max-length",  "batch-tokens", "format",     "labels",
                  "dev",        "shots",    "passkey",      "lengths",     "depths",       "trials",     "seed",
                  "logits-out", "kv-quant", "kv-group",     "kv-residual", "kv-chunk"});
  if (args.positionals().size() == 1 && args.get("task") && !args.flag("help")) return evalTask(args);
  if (args.positionals().size() == 1 && args.get("passkey") && !args.flag("help")) return cli::evalPasskey(args);
  if (args.flag("help") || args.positionals().size() != 1) {
    std::printf(
        "usage: latentlab-engine eval DIR (--text FILE | --tokens FILE) [options]\n"
        "       latentlab-engine eval DIR --task [NAME=]FILE [--format F] [--labels FILE] [--limit N] [--json]\n"
        "       latentlab-engine eval DIR --passkey TEXTFILE [--lengths 1024,2048] [--depths 0,0.5,1] [--trials N]\n\n"
        "Mean next-token loss and perplexity of the model in DIR over a held-out stream, in\n"
        "non-overlapping windows (every token after the first is predicted once). With --task, zero-shot\n"
        "multiple choice scored by log-likelihood as lm-evaluation-harness does (acc, acc_norm and their\n"
        "standard errors) over a JSONL file of {\"context\", \"choices\", \"gold\"} items, or a benchmark's own file\n"
        "with lm-eval's prompts: --format arc | openbookqa | hellaswag | piqa (with --labels FILE) | winogrande |\n"
        "mmlu (a subject's CSV; --shots K solved examples from --dev FILE) | jsonl. With --passkey, long-context\n"
        "retrieval: a 5-digit key hidden at each depth (0..1) of prompts of each length, filled with TEXTFILE's\n"
        "text, the model asked to repeat it (greedy); the share repeated exactly per cell (--trials keys each).\n"
        "  --text FILE          UTF-8 text, tokenized with DIR/tokenizer.json\n"
        "  --tokens FILE        raw little-endian token ids\n"
        "  --token-format F     u16 (default) or u32\n"
        "  --seq-len N          window length (default 256)\n"
        "  --batch N            windows per forward pass (default 4)\n"
        "  --batch-tokens N     --task: padded tokens per forward pass, choices of any items (default 4096)\n"
        "  --limit N            --task: score the first N items\n"
        "  --max-tokens N       evaluate at most N predicted tokens (default: all)\n"
        "  --logits-out FILE    also write the first window's logits (float32, seq-len x vocab) and its\n"
        "                       input ids (FILE.ids, int64): to compare with another stack's forward\n"
        "  --device D           cpu (default), cuda, cuda:N\n"
        "  --dtype T            f32 (default), bf16, f16\n"
        "%s"
        "                       --text/--tokens: each window fed --kv-chunk N tokens at a time (default 64);\n"
        "                       --task: each item's context into the cache, its choices continuing it;\n"
        "                       --passkey: the answers generated over it\n"
        "  --json               print the result as JSON\n"
        "  --quiet              no progress bar on stderr\n",
        kvQuantHelp(23).c_str());
    return args.flag("help") ? 0 : 1;
  }
  EvalOptions o;
  o.kvQuant = readKvQuantFlags(args);
  o.kvChunk = args.getInt("kv-chunk", o.kvChunk, 1, INT_MAX);
  o.model = args.positionals()[0];
  if (auto t = args.get("text")) o.textFile = *t;
  if (auto t = args.get("tokens")) o.tokenFile = *t;
  o.tokenFormat = args.get("token-format", "u16");
  o.seqLen = args.getInt("seq-len", 256, 1, INT_MAX);
  o.batchSize = args.getInt("batch", 4, 1, INT_MAX);
  o.maxTokens = args.getInt64("max-tokens", 0, 0, INT64_MAX);
  o.device = args.get("device", "cpu");
  o.dtype = parseDType(args.get("dtype", "f32"));
  o.logitsOut = args.get("logits-out", "");
  StderrProgress progress(args.flag("quiet"));
  EvalResult r = evaluate(o, progress, cancelToken());
  if (args.flag("json")) {
    std::cout << json{{"loss", r.meanLoss},
                      {"perplexity", r.perplexity},
                      {"tokens", r.tokens},
                      {"seconds", r.seconds},
                      {"tokens_per_second", r.tokensPerSecond}}
                     .dump()
              << "\n";
  } else {
    std::printf("loss %.6f  perplexity %.4f  over %lld tokens  (%.1f tokens/s)\n", r.meanLoss, r.perplexity,
                static_cast<long long>(r.tokens), r.tokensPerSecond);
  }
  return 0;
}

int cmdInit(int argc, char** argv) {
  cli::Args args(argc, argv, 2, {"help"}, {"arch", "out", "seed", "dtype", "vocab"});
  if (args.flag("help") || !args.get("arch") || !args.get("out")) {
    std::printf(
        "usage: latentlab-engine init --arch NAME --out DIR [--seed N] [--dtype f32|bf16] [--vocab N]\n\n"
        "Writes a randomly initialised model (normal(0, 0.02)) as an HF folder.\narchitectures:");
    for (const auto& n : builtinArchitectureNames()) std::printf(" %s", n.c_str());
    std::printf("\n");
    return args.flag("help") ? 0 : 1;
  }
  ModelConfig cfg = builtinArchitecture(*args.get("arch"), args.getInt("vocab", 0, 2, static_cast<int>(1 << 24)));
  initModel(cfg, *args.get("out"), static_cast<std::uint64_t>(args.getInt64("seed", 0, 0, INT64_MAX)),
            parseDType(args.get("dtype", "f32")));
  std::printf("wrote %s (%s, %.1fM parameters)\n", args.get("out")->c_str(), args.get("arch")->c_str(),
              countParameters(cfg) / 1e6);
  return 0;
}

int cmdDevices(int argc, char** argv) {
  cli::Args args(argc, argv, 2, {"help", "json"}, {});
  if (args.flag("help")) {
    std::printf(
        "usage: latentlab-engine devices [--json]\n\nLists cpu and each CUDA device LibTorch sees, with total "
        "and free memory (the host's RAM for cpu).\n");
    return 0;
  }
  auto devices = listDevices();
  if (args.flag("json")) {
    std::cout << devicesJson(devices) << "\n";
  } else {
    for (const auto& d : devices) {
      const std::string memory = d.memoryBytes > 0
                                     ? "  " + formatBytes(static_cast<std::int64_t>(d.freeBytes)) + " free of " +
                                           formatBytes(static_cast<std::int64_t>(d.memoryBytes))
                                     : std::string();
      std::printf("%-8s %s%s\n", d.id.c_str(), d.name.c_str(), memory.c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Waiting OpenMP threads sleep instead of spinning: on a shared or busy CPU
  // spinning threads took over half the cores (see latentlab-bench train).
  reexecWithPassiveOpenMpWait(argv);
  installCpuBlockCache();  // large tensors reused across steps instead of re-faulted
  installCancelHandlers();
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    std::printf("%s", kMainHelp);
    return argc < 2 ? 1 : 0;
  }
  const std::map<std::string, std::function<int(int, char**)>> verbs = {
      {"inspect", cmdInspect},
      {"eval", cmdEval},
      {"init", cmdInit},
      {"devices", cmdDevices},
      {"run", cmdRun},
      {"runs", cmdRuns},
      {"demo", cmdDemo},
      {"submit", cmdSubmit},
      {"convert", cmdConvert},
      {"export", cmdExport},
      {"generate", cmdGenerate},
      {"version", [](int, char**) {
         std::printf("latentlab %s\nlibtorch %s\n", LATENTLAB_VERSION, libtorchVersion().c_str());
         return 0;
       }}};
  auto it = verbs.find(argv[1]);
  if (it == verbs.end()) {
    std::fprintf(stderr, "error: unknown verb '%s'\n%s", argv[1], kMainHelp);
    return 1;
  }
  try {
    return it->second(argc, argv);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Cancelled) {
      std::fprintf(stderr, "cancelled: %s\n", e.message().c_str());
      return 2;
    }
    std::fprintf(stderr, "error: %s\n", e.message().c_str());
    if (!e.hint().empty()) std::fprintf(stderr, "hint: %s\n", e.hint().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
