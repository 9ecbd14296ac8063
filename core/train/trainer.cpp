// trainRun: the training of one run (pretrain, finetune, convert-finetune):
// prepare data, build the model, (resume,) train with AdamW + schedule,
// evaluate, checkpoint, and record everything in the run store.
#include <unistd.h>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/file_util.h"
#include "common/json_util.h"
#include "data/batch_loader.h"
#include "eval/task_scoring.h"
#include "latentlab/error.h"
#include "latentlab/events.h"
#include "latentlab/kv_budget.h"
#include "latentlab/memory_plan.h"
#include "latentlab/multiple_choice.h"
#include "latentlab/train.h"
#include "model/autocast_scope.h"
#include "model/torch_util.h"
#include "model/weights.h"
#include "store/lease_keeper.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/data_pipeline.h"
#include "train/device_memory.h"
#include "train/distillation.h"
#include "train/model_builder.h"
#include "train/optimizer.h"
#include "train/train_step.h"
#include "train/trainer.h"
#include "train/zero.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

void emit(const JobEnvironment& env, const EngineEvent& e) {
  if (env.lines) env.lines(eventLine(e));
}

torch::Tensor toTensor(const Batch& b, torch::Device device) {
  return torch::from_blob(const_cast<std::int64_t*>(b.ids.data()), {b.rows, b.cols}, torch::kInt64).to(device);
}

}  // namespace

// With several ranks each evaluates its share of every validation batch and
// the mean is taken over ranks: the loss of the B·R-window batches. Under the
// training's precision (bf16 autocast when the steps use it), so that the
// validation loss measures the model as it trains.
double evaluateLoss(CausalLm& model, BatchLoader& val, int batches, torch::Device device, DataParallel* dp,
                    bool autocastBf16) {
  double sum = 0;
  {
    torch::NoGradGuard noGrad;
    AutocastScope autocast(device.type(), autocastBf16);
    struct EvalMode {  // training mode back however the scope ends
      CausalLm& m;
      explicit EvalMode(CausalLm& model) : m(model) { m.eval(); }
      ~EvalMode() { m.train(); }
    } evalMode(model);
    val.restore(LoaderPosition{0, 0, val.position().seed});
    for (int i = 0; i < batches; ++i) sum += languageModelLoss(model, toTensor(val.next(), device)).item<double>();
  }
  if (dp) sum = dp->sum({sum})[0] / dp->worldSize();
  return sum / batches;
}

namespace {

// This rank's device once per rank ("cpu,cpu"): what the memory plan of a
// data-parallel job is made for (ZeRO divides its state by the ranks).
std::string rankDeviceList(torch::Device device, int worldSize) {
  std::string list;
  for (int r = 0; r < worldSize; ++r) list += (r ? "," : "") + device.str();
  return list;
}

// The device of this rank: element LOCAL_RANK of a device list
// ("cuda:0,cuda:1"), or cuda:LOCAL_RANK when a data-parallel job says "cuda".
torch::Device rankDevice(const std::string& device, const DistEnv& dist) {
  const std::vector<std::string> list = deviceList(device);
  if (list.size() > 1) {
    if (static_cast<int>(list.size()) != dist.localWorldSize) {
      throw Error(ErrorCode::BadInput,
                  "device '" + device + "' lists " + std::to_string(list.size()) + " devices but " +
                      std::to_string(dist.localWorldSize) + " rank(s) run on this node",
                  "Start one engine per listed device (the workbench does; or torchrun --nproc-per-node " +
                      std::to_string(list.size()) + ").");
    }
    return parseDevice(list[static_cast<std::size_t>(dist.localRank)]);
  }
  if (dist.distributed() && device == "cuda") return parseDevice("cuda:" + std::to_string(dist.localRank));
  return parseDevice(device);
}

}  // namespace

const char* const kMemoryHint =
    "Lower micro_batch (raising grad_accum keeps the batch), turn on recompute, use bf16, or more devices; "
    "`latentlab-engine run SPEC --check` shows the plan (--ignore-memory-plan starts anyway).";

std::string memoryPlanVerdict(const RunSpec& spec, const std::string& device) {
  if (spec.kind == RunKind::Eval) return {};  // no training state to plan
  RunSpec local = spec;
  local.device = device;
  std::int64_t sourceParameters = 0;
  ModelConfig cfg;
  try {
    cfg = plannedModelConfig(spec, &sourceParameters);
  } catch (const Error&) {
    return {};  // e.g. a resumed run whose original model folder is gone: loading reports what is wrong
  }
  const MemoryPlan plan = planMemory(cfg, local, availableBytesOn(local.device, listDevices()), sourceParameters);
  if (plan.fits()) return {};
  std::string parts;
  for (const MemoryItem& i : plan.items) parts += (parts.empty() ? "" : ", ") + i.name + " " + formatBytes(i.bytes);
  std::string why = "does not fit " + local.device + ": the plan needs " + formatBytes(plan.peakBytes) + " (" + parts +
                    ") and " + formatBytes(plan.availableBytes) + " is free";
  if (!plan.suggestion.empty()) why += "; to fit: " + plan.suggestion;
  return why;
}

namespace {

// One training run, as named steps: the process group and the memory check,
// the run folder, data, model and optimiser, resume, the step loop (with
// validation, checkpoints and task scores), and the summary. Every rank runs
// the same steps; rank 0 (the writer) alone writes the store and checkpoints.
class Trainer {
 public:
  Trainer(RunStore& store, std::int64_t runId, const JobEnvironment& env, ProgressSink& progress,
          const CancelToken& cancel, RunSpec spec)
      : store(store), runId(runId), env(env), progress(progress), cancel(cancel), spec(std::move(spec)) {}

  RunResult run();

 private:
  void joinProcessGroup();
  void checkMemoryPlan() const;
  void openRunFolder();
  void loadData();
  void buildModel();
  void loadTeacher();
  void resume();
  void startFromTheSameParameters();
  void prepareTaskScoring();
  void trainSteps();
  bool step();  // false when the run failed at this step
  void finish();
  void writeSummary();
  void checkpoint(bool scoreEvalTasks);
  void scoreTasks(const fs::path& modelDir);
  void validate();
  void failAtStep(ErrorCode code, const std::string& what, const std::string& advice);
  double wallNow() const;
  void addMetric(const char* name, double value, double wall);

  RunStore& store;
  std::int64_t runId;
  const JobEnvironment& env;
  ProgressSink& progress;
  const CancelToken& cancel;
  RunSpec spec;

  RunResult result{RunStatus::Running};
  bool writer = false;
  torch::Device device{torch::kCPU};
  std::unique_ptr<DataParallel> dp;
  fs::path runDir;  // set once the run ID is known on every rank
  RunIdentity identity;
  std::string canonicalSpec;
  std::optional<fs::path> ckpt;  // the checkpoint the run resumes from
  fs::path startModel;
  // Precision: the parameters' dtype while built or loaded (fp32, fp64), the
  // dtype the model then trains in, and whether the forward runs under autocast.
  torch::ScalarType paramType = torch::kFloat32;
  bool bf16Weights = false;
  bool autocastBf16 = false;
  std::optional<PreparedData> data;
  std::string tokenizerJson;  // carried by every checkpoint
  std::optional<BatchLoader> train;
  std::optional<BatchLoader> val;
  json notes;
  std::shared_ptr<CausalLm> model;
  std::optional<MasterWeights> master;       // bf16 weights without ZeRO: fp32 masters
  std::optional<Distillation> distillation;  // a teacher (spec.distill)
  std::vector<torch::Tensor> params;         // what the optimiser steps
  std::optional<torch::optim::AdamWOptions> adamw;
  std::unique_ptr<FusedAdamW> optimizer;
  std::unique_ptr<ShardedAdamW> zero;
  KvBudget kv;
  TrainerState state;
  std::optional<MetricWriter> metricWriter;
  std::int64_t tokensPerStep = 0;
  Clock::time_point wallStart;
  double wallOffset = 0;
  double lastLoss = 0;
  Clock::time_point lastReport;
  Batch batch;
  std::vector<std::vector<ChoiceItem>> taskItems;
  json lastTaskScores = json::object();
};

// The embedding rows of the model a fine-tune starts from (its config.json),
// so that a tokenizer with more ids is refused before any text is tokenized.
ModelVocab modelVocabOf(const fs::path& modelDir) {
  const fs::path config = modelDir / "config.json";
  return {readHfConfig(config).vocabSize, config};
}

RunResult Trainer::run() {
  writer = env.dist.writesMetrics();
  device = rankDevice(env.device.empty() ? spec.device : env.device, env.dist);
  joinProcessGroup();
  if (env.checkMemory) checkMemoryPlan();
  openRunFolder();
  loadData();
  buildModel();
  loadTeacher();
  if (ckpt) resume();
  startFromTheSameParameters();
  if (writer) metricWriter.emplace(store.metricWriter(runId));
  tokensPerStep = static_cast<std::int64_t>(spec.microBatch) * spec.gradAccum * spec.data.seqLen * env.dist.worldSize;
  wallStart = Clock::now();
  wallOffset = state.wallSeconds;
  prepareTaskScoring();
  if (state.step == 0 && val) validate();  // the loss right after build/conversion
  trainSteps();
  if (result.status == RunStatus::Running) finish();
  if (metricWriter) metricWriter->flush();
  writeSummary();
  return result;
}

// All ranks meet here, before any data work; a rank launched from a spec
// learns the run ID rank 0 registered.
void Trainer::joinProcessGroup() {
  const DistEnv& dist = env.dist;
  if (!dist.distributed()) return;
  dp = std::make_unique<DataParallel>(dist, device);
  if (writer) {
    progress.log(LogLevel::Info, "data parallel: " + std::to_string(dist.worldSize) + " ranks over " +
                                     dp->backendName() + " (" + dist.launcher + ")");
  }
  const double id = dp->sum({writer ? static_cast<double>(runId) : 0.0})[0];
  if (!writer && runId == 0) runId = static_cast<std::int64_t>(id);
}

// The memory plan on this rank's device, before anything is loaded; every
// rank stops when one does not fit.
void Trainer::checkMemoryPlan() const {
  const std::string why = memoryPlanVerdict(spec, rankDeviceList(device, env.dist.worldSize));
  const bool tooBig = dp ? dp->sum({why.empty() ? 0.0 : 1.0})[0] > 0 : !why.empty();
  if (tooBig) {
    throw Error(ErrorCode::BadSpec,
                "run " + std::to_string(runId) + ": " + (why.empty() ? "another rank's device is too small" : why),
                kMemoryHint);
  }
}

// The run folder is this run's alone (owner.json): a folder of another run,
// database or deleted namesake is refused before anything is read from it.
// The hash is of the spec as stored with the run (fixed at registration), so
// a later engine that writes specs differently still recognises the run.
// Resume reads everything from the checkpoint: its model, its tokenizer; the
// original model folder is needed only before the first checkpoint.
void Trainer::openRunFolder() {
  runDir = resolveRunDir(spec.outDir, env.workspace, runId);
  const RunRecord record = store.run(runId);
  canonicalSpec = runSpecToJson(spec);
  identity = RunIdentity{store.storeId(), store.path().string(), runId, record.uid, specHash(record.specJson)};
  if (writer) claimRunDir(runDir, identity);
  if (dp) dp->barrier();
  ckpt = env.resume ? latestCheckpoint(runDir) : std::nullopt;
  startModel = ckpt ? *ckpt / "model" : fs::path(spec.modelDir);
  const Precision precision = resolvePrecision(spec.precision, device.is_cuda());
  paramType = precision == Precision::Fp64 ? torch::kFloat64 : torch::kFloat32;
  bf16Weights = precision == Precision::Bf16;
  autocastBf16 = precision == Precision::Bf16Mixed;
}

// Rank 0 tokenizes and caches first; the other ranks then find the cache.
void Trainer::loadData() {
  DataSpec dataSpec = spec.data;
  std::error_code ec;
  if (ckpt && dataSpec.tokenFormat == TokenFormat::Text && fs::exists(startModel / "tokenizer.json", ec))
    dataSpec.tokenizer = (startModel / "tokenizer.json").string();
  const ModelVocab vocabLimit = (ckpt || spec.kind != RunKind::Pretrain) ? modelVocabOf(startModel) : ModelVocab{};
  if (dp && !writer) dp->barrier();
  data.emplace(prepareData(dataSpec, ckpt ? startModel : fs::path(spec.modelDir), env.workspace / "cache", progress,
                           cancel, vocabLimit));
  // Every checkpoint carries the tokenizer (read once: the source may go away).
  tokenizerJson = data->tokenizerPath.empty() ? std::string() : readTextFile(data->tokenizerPath);
  if (dp && writer) dp->barrier();
  LoaderOptions lo;
  lo.batchSize = spec.microBatch;
  lo.seqLen = spec.data.seqLen;
  lo.validationShare = spec.data.validationShare;
  lo.seed = spec.seed;
  lo.rank = env.dist.rank;
  lo.worldSize = env.dist.worldSize;
  train.emplace(data->shard, Split::Train, lo);
  if (spec.data.validationShare > 0) {
    LoaderOptions vo = lo;
    vo.shuffle = false;
    val.emplace(data->shard, Split::Validation, vo);
  }
}

// The model (built, converted, or the checkpoint's) and its optimiser. bf16
// weights: the optimiser steps fp32 masters copied before the cast (with
// ZeRO, the sharded optimiser keeps them; it is built after the broadcast).
void Trainer::buildModel() {
  const fs::path notesPath = runDir / "build_notes.json";
  std::error_code ec;
  if (ckpt) {
    model = loadModel(startModel, torch::kCPU, paramType == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32);
    model->to(device, paramType);
    if (fs::exists(notesPath, ec))
      notes = parseJson(readTextFile(notesPath), notesPath.string(), ErrorCode::BadCheckpoint);
    notes["parameters"] = countParameters(model->config());
  } else {
    model = buildModelForRun(spec, data->vocabSize, data->shard, device, paramType, progress, cancel, notes);
    if (writer) atomicWriteText(notesPath, notes.dump(2) + "\n");
  }
  model->train();
  model->setRecompute(spec.recompute);
  if (bf16Weights && spec.zeroStage == 0) {
    master.emplace(model->parameters());
    model->to(torch::kBFloat16);
    master->bind(model->parameters());
  }
  params = master ? master->masters() : model->parameters();
  adamw = torch::optim::AdamWOptions(spec.optimizer.lr)
              .betas({spec.optimizer.beta1, spec.optimizer.beta2})
              .eps(spec.optimizer.eps)
              .weight_decay(spec.optimizer.weightDecay);
  optimizer = std::make_unique<FusedAdamW>(adamWParamGroups(params, *adamw), *adamw);
  const ModelConfig& cfg = model->config();
  kv = currentKvBudget(cfg, autocastBf16 || bf16Weights ? DType::BF16 : fromTorch(paramType));
  if (writer && spec.data.seqLen > cfg.maxPositionEmbeddings) {
    const std::string warning = "data.seq_len " + std::to_string(spec.data.seqLen) +
                                " exceeds the model's max_position_embeddings (" +
                                std::to_string(cfg.maxPositionEmbeddings) + "): positions past it were never trained";
    progress.log(LogLevel::Warning, warning);
    store.addEvent(runId, "warning", warning);
    emit(env, EngineEvent::logOf("warning", warning));
  }
}

// The teacher of a distilled run: the unconverted model (convert-finetune's
// model_dir, needed for the whole run, resumed or not) or a model folder, in
// the student's precision on its device, without gradients. It must read the
// same tokens: the same vocabulary size and, where the run has a tokenizer,
// the same tokenizer.json.
void Trainer::loadTeacher() {
  if (!spec.distill.enabled) return;
  const fs::path dir = spec.distill.original() ? fs::path(spec.modelDir) : fs::path(spec.distill.teacher);
  const std::string field = spec.distill.original() ? "distill.teacher \"original\" (model_dir " + dir.string() + ")"
                                                    : "distill.teacher " + dir.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(ErrorCode::BadSpec, field + ": no such model folder",
                spec.distill.original() ? "A distilled run reads the unconverted model for its whole length: restore "
                                          "the folder (or point model_dir at its copy) and resume."
                                        : "");
  }
  const int teacherVocab = readHfConfig(dir / "config.json").vocabSize;
  if (teacherVocab != model->config().vocabSize) {
    throw Error(ErrorCode::BadSpec, field + ": the teacher's vocabulary (" + std::to_string(teacherVocab) + ", " +
                                        (dir / "config.json").string() + ") differs from the student's (" +
                                        std::to_string(model->config().vocabSize) + ")");
  }
  if (!tokenizerJson.empty()) {
    const fs::path teacherTokenizer = dir / "tokenizer.json";
    if (!fs::exists(teacherTokenizer, ec) || readTextFile(teacherTokenizer) != tokenizerJson) {
      throw Error(ErrorCode::BadSpec,
                  field + ": " + teacherTokenizer.string() +
                      (fs::exists(teacherTokenizer, ec) ? " differs from" : " is missing; the teacher must share") +
                      " the run's tokenizer (" + data->tokenizerPath.string() + ")",
                  "Teacher and student must read the same token ids: distil from a model with the same tokenizer.");
    }
  }
  Distillation d;
  d.teacher = loadModel(dir, torch::kCPU, paramType == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32);
  d.teacher->to(device, bf16Weights ? torch::kBFloat16 : paramType);
  d.teacher->eval();
  for (auto& p : d.teacher->parameters()) p.requires_grad_(false);
  d.alpha = spec.distill.alpha;
  d.temperature = spec.distill.temperature;
  distillation = std::move(d);
  if (writer) {
    progress.log(LogLevel::Info, "distilling from " + dir.string() + " (alpha " + std::to_string(spec.distill.alpha) +
                                     ", temperature " + std::to_string(spec.distill.temperature) + ")");
  }
}

// The step, data position, optimiser and clock of the checkpoint.
void Trainer::resume() {
  state = loadCheckpoint(*ckpt, *optimizer, identity, /*loadOptimizer=*/spec.zeroStage == 0);
  train->restore(state.data);
  result.lastCheckpoint = *ckpt;
  progress.log(LogLevel::Info, "resumed from " + ckpt->string() + " at step " + std::to_string(state.step));
  if (writer) {
    store.addEvent(runId, "resume", "resumed at step " + std::to_string(state.step),
                   json{{"checkpoint", ckpt->string()}}.dump());
    emit(env, EngineEvent::logOf("info", "resumed at step " + std::to_string(state.step)));
  }
}

// Every rank starts from rank 0's parameters (built with the same seed, or
// resumed). ZeRO: each rank keeps its slices of the masters and moments, from
// the (broadcast, full-precision) parameters; then a bf16 run's model is cast.
void Trainer::startFromTheSameParameters() {
  if (dp) {
    const double resumedStep = dp->sum({static_cast<double>(state.step)})[0];
    if (resumedStep != static_cast<double>(state.step) * env.dist.worldSize) {
      throw Error(ErrorCode::BadCheckpoint,
                  "rank " + std::to_string(env.dist.rank) + " resumed at step " + std::to_string(state.step) +
                      " but the ranks disagree on the step",
                  "Every rank must see the same checkpoint folder (" + runDir.string() + ") on a shared filesystem.");
    }
    dp->broadcast(params);
    if (master) master->mastersToModel();
  }
  if (spec.zeroStage == 0) return;
  zero = std::make_unique<ShardedAdamW>(model->parameters(), model->parameters(), *adamw, spec.zeroStage, dp.get());
  if (bf16Weights) model->to(torch::kBFloat16);
  if (ckpt) {
    const std::vector<fs::path> shards = optimizerShards(*ckpt);
    if (shards.empty()) {
      throw Error(ErrorCode::BadCheckpoint, ckpt->string() + ": no optimizer-rank*.pt shards for this ZeRO run",
                  "The checkpoint was not written by a run with zero_stage set.");
    }
    zero->load(shards);
  }
}

// The eval tasks' items, read now so that a bad task file fails the run
// before any training.
void Trainer::prepareTaskScoring() {
  if (!writer) return;
  for (const EvalTaskSpec& t : spec.evalTasks) taskItems.push_back(readTaskFile(t));
}

double Trainer::wallNow() const {
  return wallOffset + std::chrono::duration<double>(Clock::now() - wallStart).count();
}

void Trainer::addMetric(const char* name, double value, double wall) {
  if (metricWriter) metricWriter->add(name, state.step, state.tokens, wall, value);
}

// Scores every eval task on the checkpoint's model (as saved, so the figures
// are the checkpoint's) and records them in the store.
void Trainer::scoreTasks(const fs::path& modelDir) {
  if (spec.evalTasks.empty()) return;
  ChoiceEvalOptions o;
  o.model = modelDir;
  o.device = device.str();
  ChoiceScorer scorer(o);  // the checkpoint's model, loaded once for every task
  NullProgress quiet;      // the items are not the run's progress
  const TaskScoreTarget into{store, runId, state.step, env.lines, std::chrono::milliseconds(0)};
  for (std::size_t k = 0; k < spec.evalTasks.size(); ++k) {
    const EvalTaskSpec& t = spec.evalTasks[k];
    const ChoiceEvalResult r = scoreTaskIntoStore(scorer, t, taskItems[k], into, quiet, progress, cancel);
    // Also metric series, so the chart draws them over the steps like any other.
    if (metricWriter) {
      metricWriter->add("eval/" + t.name + "/acc", state.step, state.tokens, wallNow(), r.acc);
      metricWriter->add("eval/" + t.name + "/acc_norm", state.step, state.tokens, wallNow(), r.accNorm);
    }
    lastTaskScores[t.name] = choiceScoresJson(r, static_cast<std::int64_t>(taskItems[k].size()));
    lastTaskScores[t.name]["step"] = state.step;
  }
}

void Trainer::checkpoint(bool scoreEvalTasks) {
  state.data = train->position();
  state.wallSeconds = wallNow();
  CheckpointExtras extras;
  extras.weights = master ? &master->masters() : nullptr;
  std::vector<torch::Tensor> gathered;
  fs::path staging;
  if (zero) {
    // Every rank writes its shard where rank 0 then moves it into the checkpoint.
    staging = runDir / "checkpoints" / (".zero-staging-" + std::to_string(state.step));
    if (writer) {
      std::error_code ec;
      fs::remove_all(staging, ec);
      fs::create_directories(staging, ec);
      if (ec) throw Error(ErrorCode::Io, staging.string() + ": cannot create: " + ec.message());
    }
    if (dp) dp->barrier();
    zero->save(staging / ("optimizer-rank" + std::to_string(env.dist.rank) + ".pt"));
    if (bf16Weights) gathered = zero->gatherMasters();  // every rank takes part; rank 0 saves them
    if (dp) dp->barrier();
    extras.optimizerShards = true;
    if (bf16Weights) extras.weights = &gathered;
    if (writer) extras.moveIn = optimizerShards(staging);
  }
  if (writer) {
    const SavedCheckpoint saved =
        saveCheckpoint(runDir, *model, *optimizer, state, canonicalSpec, identity, tokenizerJson, 2, extras);
    if (!staging.empty()) {
      std::error_code ec;
      fs::remove_all(staging, ec);
    }
    result.lastCheckpoint = saved.dir;
    store.addArtifact(runId, "checkpoint", result.lastCheckpoint.string(), state.step, 0);
    for (const fs::path& gone : saved.pruned) store.deleteArtifacts(runId, gone.string());
    metricWriter->flush();
    emit(env, EngineEvent::checkpointOf(state.step, result.lastCheckpoint.string()));
    if (scoreEvalTasks) scoreTasks(saved.dir / "model");
  }
  if (dp) dp->barrier();  // no rank runs ahead of a checkpoint it may resume from
}

void Trainer::validate() {
  if (!val) return;
  const double v = evaluateLoss(*model, *val, spec.evalBatches, device, dp.get(), autocastBf16);
  addMetric("val/loss", v, wallNow());
  if (!state.bestValLoss || v < *state.bestValLoss) state.bestValLoss = v;
  result.finalValLoss = v;
  emit(env, EngineEvent::evalOf(state.step, v));
}

// The step loop, measuring the device's peak for the summary beside the plan's.
void Trainer::trainSteps() {
  resetPeakMemory(device);
  lastReport = Clock::now() - std::chrono::seconds(1);
  while (state.step < spec.steps) {
    // A cancel seen by any rank stops all of them after the same step.
    const bool stop = dp ? dp->sum({cancel.requested() ? 1.0 : 0.0})[0] > 0 : cancel.requested();
    if (stop) {
      checkpoint(/*scoreEvalTasks=*/false);
      result.status = RunStatus::Cancelled;
      return;
    }
    if (!step()) return;
  }
}

// The step is lost, nothing else: the run resumes from its last checkpoint.
void Trainer::failAtStep(ErrorCode code, const std::string& what, const std::string& advice) {
  if (metricWriter) metricWriter->flush();
  result.status = RunStatus::Failed;
  result.error =
      Error(code, what + "; last good checkpoint: " +
                      (result.lastCheckpoint.empty() ? std::string("none") : result.lastCheckpoint.string()) + advice);
}

bool Trainer::step() {
  const auto t0 = Clock::now();
  const double lr = learningRateAt(spec.optimizer, spec.schedule, static_cast<int>(state.step), spec.steps);
  for (auto& group : optimizer->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  if (zero) zero->setLr(lr);
  const StepSettings settings{spec.gradAccum, autocastBf16, spec.optimizer.clip, master ? &*master : nullptr,
                              distillation ? &*distillation : nullptr};
  StepOutcome outcome;
  std::string outOfMemory;
  try {
    auto next = [&] {
      train->next(batch);
      return toTensor(batch, device);
    };
    outcome = zero ? trainStep(*model, *zero, next, settings, dp.get())
                   : trainStep(*model, *optimizer, params, next, settings, dp.get());
  } catch (const c10::OutOfMemoryError& e) {
    outOfMemory = e.what_without_backtrace();
  } catch (const std::bad_alloc&) {
    outOfMemory = "an allocation on the host failed";
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (what.find("not enough memory") == std::string::npos && what.find("out of memory") == std::string::npos) throw;
    outOfMemory = what;
  }
  if (!outOfMemory.empty()) {
    failAtStep(ErrorCode::Device,
               "out of memory at step " + std::to_string(state.step + 1) + " on " + device.str() + " (" +
                   outOfMemory.substr(0, outOfMemory.find('\n')) + ")",
               "; lower micro_batch or turn on recompute, then resume");
    return false;
  }
  // train/loss is the next-token loss of every run, distilled or not, so that
  // it compares with validation and with other runs; a distilled run's
  // objective (the KL's share added) is loss/total.
  const double trainLoss = outcome.ce.value_or(outcome.loss);
  const double gradNorm = outcome.gradNorm;
  if (!outcome.finite) {
    failAtStep(ErrorCode::Numeric,
               std::string("non-finite ") + (!std::isfinite(outcome.loss) ? "loss" : "gradient norm") + " (" +
                   std::to_string(outcome.loss) + ") at step " + std::to_string(state.step + 1),
               "");
    return false;
  }
  state.step += 1;
  state.tokens += tokensPerStep;
  lastLoss = trainLoss;
  const double stepSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double tokPerSec = static_cast<double>(tokensPerStep) / std::max(stepSeconds, 1e-9);
  const double wall = wallNow();
  addMetric("train/loss", trainLoss, wall);
  if (outcome.ce) {
    addMetric("loss/ce", *outcome.ce, wall);
    addMetric("loss/kd", *outcome.kd, wall);
    addMetric("loss/total", outcome.loss, wall);
  }
  addMetric("lr", lr, wall);
  addMetric("grad_norm", gradNorm, wall);
  addMetric("tokens_per_s", tokPerSec, wall);
  if (spec.evalEvery > 0 && state.step % spec.evalEvery == 0 && state.step < spec.steps) validate();
  if (writer && (Clock::now() - lastReport > std::chrono::milliseconds(200) || state.step == spec.steps)) {
    lastReport = Clock::now();
    progress.progress("train", static_cast<double>(state.step), spec.steps,
                      "loss " + std::to_string(trainLoss).substr(0, 6));
    EngineEvent e = EngineEvent::progressOf(state.step, spec.steps, state.tokens);
    e.loss = trainLoss;
    e.lr = lr;
    e.gradNorm = gradNorm;
    e.tokensPerSecond = tokPerSec;
    emit(env, e);
  }
  if (spec.checkpointEvery > 0 && state.step % spec.checkpointEvery == 0 && state.step < spec.steps) checkpoint(true);
  return true;
}

// The last validation and checkpoint (with task scores) of a completed run.
void Trainer::finish() {
  validate();
  checkpoint(true);
  result.status = RunStatus::Completed;
  result.finalModel = result.lastCheckpoint / "model";
}

void Trainer::writeSummary() {
  result.steps = state.step;
  result.tokens = state.tokens;
  result.finalTrainLoss = lastLoss;
  if (!writer) return;
  RunSpec planned = spec;
  planned.device = rankDeviceList(device, env.dist.worldSize);
  const MemoryPlan plan = planMemory(model->config(), planned, 0);
  const std::int64_t peakBytes = peakMemoryBytes(device);
  json summary = {{"steps", state.step},
                  {"tokens", state.tokens},
                  {"final_train_loss", lastLoss},
                  {"parameters", notes.value("parameters", json(nullptr))},
                  {"kv_bytes_per_token", kv.bytesPerToken},
                  {"kv_dtype", autocastBf16 || bf16Weights    ? "bf16"
                               : paramType == torch::kFloat64 ? "fp64"
                                                              : "fp32"},
                  {"kv_elements_per_token", kv.perToken},
                  {"kv_saving", kv.saving},
                  {"wall_seconds", wallNow()},
                  {"tokens_per_s", wallNow() > 0 ? static_cast<double>(state.tokens) / wallNow() : 0.0},
                  {"checkpoint", result.lastCheckpoint.string()},
                  {"notes", notes}};
  summary["memory"] = {{"peak_bytes", peakBytes > 0 ? json(peakBytes) : json(nullptr)},
                       {"planned_peak_bytes", plan.peakBytes},
                       {"planned_phase", plan.peakPhase},
                       {"precision", plan.precision}};
  if (result.finalValLoss) summary["final_val_loss"] = *result.finalValLoss;
  if (state.bestValLoss) summary["best_val_loss"] = *state.bestValLoss;
  if (!lastTaskScores.empty()) summary["eval_tasks"] = lastTaskScores;
  if (env.dist.distributed())
    summary["data_parallel"] = {
        {"world_size", env.dist.worldSize}, {"backend", dp->backendName()}, {"launcher", env.dist.launcher}};
  if (zero) summary["zero"] = {{"stage", zero->stage()}, {"state_bytes_per_rank", zero->stateBytes()}};
  store.setSummary(runId, summary.dump());
}

}  // namespace

RunResult trainRun(RunStore& store, std::int64_t runId, const JobEnvironment& env, const RunSpec& spec,
                   ProgressSink& progress, const CancelToken& cancel) {
  Trainer trainer(store, runId, env, progress, cancel, spec);
  return trainer.run();
}

}  // namespace latentlab
