// RunSpec: one versioned, typed description of a job (pre-train, fine-tune,
// convert-then-fine-tune), with every default in this header. It is stored in
// the run database and in every checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "latentlab/architectures.h"
#include "latentlab/kv_quant.h"
#include "latentlab/vocabulary.h"

namespace latentlab {

inline constexpr int kRunSpecVersion = 1;

struct ConversionSpec {
  bool enabled = false;                                 // true for kind "convert-finetune"
  ConversionTarget target = ConversionTarget::Mha2Mla;  // mha2mla | deepseek (docs/conversion.md)
  std::optional<Factorisation> factorise;  // weights | activations; unset = weights (mha2mla), activations (deepseek)
  int ropeWidth = 0;                       // deepseek: d_R; 0 = 2 r n_kv
  int freqFold = 1;                        // deepseek: FreqFold
  RopeStrategy ropeStrategy = RopeStrategy::TwoNorm;  // mha2mla: high | low | uniform | 2-norm | full
  int ropePairs = 0;                                  // r; 0 = d_h/16
  int dKv = 16;                                       // latent dims per KV head
  SvdMethod svd = SvdMethod::Joint;                   // joint | split
  std::string layers = "all";  // mha2mla: all | none | every:K | last:N | "0,2,5" (or a JSON list)
  // mha2mla: a KV budget spread over the layers ("12288" bytes per token,
  // "75%" saving, "d_kv:8"; or a JSON number of bytes); "" = d_kv everywhere.
  std::string kvBudget;
  TwoNormScore twoNormScore = TwoNormScore::Product;  // product | sum
  int calibSequences = 64;                            // paper: 1024
  int calibSeqLen = 256;                              // paper: 2048
  bool deepseek() const { return target == ConversionTarget::DeepSeek; }
  // The factorisation after its default.
  Factorisation factorisation() const {
    return factorise ? *factorise : deepseek() ? Factorisation::Activations : Factorisation::Weights;
  }
};

// Knowledge distillation ("distill": {"teacher", "alpha", "temperature"};
// docs/run_spec.md): the loss a T^2 KL(teacher || student at T) + (1 - a) CE.
struct DistillSpec {
  bool enabled = false;              // a "distill" block, unless its "enabled" is false
  std::string teacher = "original";  // "original" (convert-finetune: the unconverted model_dir) or a model folder
  double alpha = 0.5;                // a in [0, 1]
  double temperature = 1.0;          // T > 0
  bool original() const { return teacher == "original"; }
};

struct DataSpec {
  std::string corpus = "demo";                  // file, folder, .jsonl, or "demo" (the Python docs)
  std::string textField = "text";               // for JSONL corpora
  std::string tokenizer;                        // tokenizer.json; empty = the model's, or trained for "demo"
  int tokenizerVocab = 4096;                    // when LatentLab trains the tokenizer
  TokenFormat tokenFormat = TokenFormat::Text;  // text: tokenize; u16 / u32: pre-tokenized raw ids
  int seqLen = 128;
  double validationShare = 0.02;
  std::int64_t maxCorpusBytes = 0;  // 0 = all
};

struct OptimizerSpec {
  double lr = 1e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weightDecay = 0.0;
  double clip = 1.0;  // 0 = no clipping
};

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::Wsd;
  int warmupSteps = 0;
  int decaySteps = 0;       // wsd: length of the final 1-sqrt decay; 0 = 20% of steps
  double minLrRatio = 0.0;  // lr_min = ratio * lr (cosine floor / WSD end)
};

// A zero-shot multiple-choice task scored at every checkpoint and at the end
// of a run ("eval_tasks": [{"name": ..., "file": ..., "limit": N}]).
struct EvalTaskSpec {
  std::string name;
  std::string file;                       // JSONL items (docs/evaluation.md)
  TaskFormat format = TaskFormat::Jsonl;  // jsonl | arc | openbookqa | hellaswag | piqa | winogrande | mmlu
  std::string labels;                     // piqa's labels file
  std::string dev;                        // mmlu: the subject's dev CSV (for shots)
  int shots = 0;                          // mmlu: solved dev examples before each question
  std::int64_t limit = 0;                 // score at most this many items (0: all)
};

// The passkey grid an evaluation job runs ("passkey": {"file": ..., ...};
// docs/evaluation.md).
struct PasskeySpec {
  std::string file;  // the haystack text; empty = no passkey test
  std::vector<int> lengths = {1024};
  std::vector<double> depths = {0.0, 0.25, 0.5, 0.75, 1.0};
  int trials = 3;
  std::uint64_t seed = 0;
};

// Kind eval: the mean next-token loss of the model over held-out text, as
// `eval --text` computes it (docs/evaluation.md), stored as task "held-out"
// with metric "loss".
struct HeldOutSpec {
  // A text file tokenized with the model's tokenizer, or "validation": the
  // validation tail of the spec's `data` corpus (its validation_share), the
  // tokens a run's val/loss is measured on. Empty: no held-out loss.
  std::string text;
  int seqLen = 512;
  int batch = 4;
  std::int64_t maxTokens = 0;  // 0: the whole text
  int chunk = 64;              // over a quantized cache: tokens fed through it at a time
};

struct RunSpec {
  int version = kRunSpecVersion;
  std::string name;
  RunKind kind = RunKind::Pretrain;   // pretrain | finetune | convert-finetune | eval
  std::string architecture;           // built-in shape for pretrain (e.g. "demo-gqa")
  std::string modelDir;               // HF folder for finetune / convert-finetune
  std::string attention;              // pretrain only: mha | gqa | mla | gla-<k> | mlra-2 | mlra-4;
                                      // empty = the architecture's own attention
  AttentionOptions attentionOptions;  // "attention_options": latent dims, scale factors, matching
  ConversionSpec conversion;
  DistillSpec distill;
  DataSpec data;
  OptimizerSpec optimizer;
  ScheduleSpec schedule;
  int steps = 100;
  int microBatch = 8;
  int gradAccum = 1;
  // fp32 | bf16-mixed (fp32 weights, bf16 autocast) | bf16 (bf16 weights and
  // gradients, fp32 master copy and AdamW state in the optimiser) | fp64 |
  // auto (bf16-mixed on CUDA, fp32 on CPU). Older specs' "dtype" (f32, bf16,
  // f64, auto) reads as fp32, bf16-mixed, fp64, auto.
  Precision precision = Precision::Auto;
  bool recompute = false;  // activation recompute per decoder layer (memory for compute)
  int zeroStage = 0;       // 0 off; 1 optimizer state and masters sharded over the ranks; 2 also gradients
  std::uint64_t seed = 0;
  int evalEvery = 25;  // 0 = only at the end
  int evalBatches = 4;
  int checkpointEvery = 50;     // 0 = only at the end
  double initStd = 0.02;        // pretrain initialisation
  bool zeroInitOutput = false;  // zero-init o_proj/down_proj (MLRA recipe)
  std::string device = "cpu";
  std::string outDir;                   // checkpoints; empty = <workspace>/runs/<run id>
  std::vector<EvalTaskSpec> evalTasks;  // scored on every checkpoint's model; results in the store
  // Kind eval: the model in model_dir is scored on eval_tasks, the passkey
  // grid and held-out text, no training. Its results are stored under the run
  // it evaluates (a checkpoint of run `evaluates_run` at step
  // `evaluates_step`), else under the evaluation job itself at step 0. With
  // evaluates_run and no model_dir, the model is that run's checkpoint at
  // evaluates_step, or its newest when the job starts (step omitted: -1).
  PasskeySpec passkey;
  HeldOutSpec heldOut;
  // Kind eval: the caches everything is scored over, in turn ("kv_quant":
  // {"format": "int4", "group": 64, "residual": 128}, or an array of such
  // objects, "none" for the plain cache; docs/kv_quant.md), each result
  // stored as "<task> (int4 cache)". Empty: the plain cache only.
  std::vector<KvQuantSettings> kvCaches;
  std::int64_t evaluatesRun = 0;
  std::int64_t evaluatesStep = -1;
};

// The caches an eval spec scores over: its kv_quant entries, or the plain
// cache alone.
std::vector<KvQuantSettings> evalCaches(const RunSpec& s);

// The devices of a job, one per rank: "cuda:0,cuda:1" -> {"cuda:0", "cuda:1"};
// empty parts are kept (validation rejects them).
std::vector<std::string> deviceList(const std::string& device);

// Parses and validates; throws Error(BadSpec) naming `source` and the field.
RunSpec parseRunSpec(const std::string& json, const std::string& source);
// Reads and parses a spec file; Error(Io) when unreadable, Error(BadSpec) naming the file and field.
RunSpec loadRunSpec(const std::filesystem::path& path);
std::string runSpecToJson(const RunSpec& spec);
void validateRunSpec(const RunSpec& spec, const std::string& source);

// The precision a run trains in: `requested`, or for auto bf16-mixed on CUDA
// and fp32 on the CPU.
Precision resolvePrecision(Precision requested, bool cuda);

// The learning rate at `step` (0-based) of `totalSteps` for this schedule:
// linear warmup to lr, then constant, then WSD's "1-sqrt" decay
// lr_min + (lr - lr_min) * (1 - sqrt((t - t_decay) / T_decay)), or cosine to lr_min.
double learningRateAt(const OptimizerSpec& opt, const ScheduleSpec& sched, int step, int totalSteps);

}  // namespace latentlab
