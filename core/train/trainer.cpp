// runJob: the training loop of one run, top to bottom: read the spec, prepare
// data, build the model, (resume,) train with AdamW + schedule, evaluate,
// checkpoint, and record everything in the run store.
#include <chrono>
#include <thread>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/file_util.h"
#include "common/json_util.h"
#include "data/batch_loader.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "latentlab/multiple_choice.h"
#include "latentlab/train.h"
#include "latentlab/memory_plan.h"
#include "model/autocast_scope.h"
#include "model/torch_util.h"
#include "model/weights.h"
#include "store/lease_keeper.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/data_pipeline.h"
#include "train/device_memory.h"
#include "train/eval_job.h"
#include "train/model_builder.h"
#include "train/optimizer.h"
#include "train/train_step.h"
#include "train/zero.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

void emit(const JobEnvironment& env, const json& j) {
  if (env.lines) env.lines(j.dump());
}

torch::Tensor toTensor(const Batch& b, torch::Device device) {
  return torch::from_blob(const_cast<std::int64_t*>(b.ids.data()), {b.rows, b.cols}, torch::kInt64).to(device);
}

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

} // namespace

const char* const kMemoryHint =
    "Lower micro_batch (raising grad_accum keeps the batch), turn on recompute, use bf16, or more devices; "
    "`latentlab-engine run SPEC --check` shows the plan (--ignore-memory-plan starts anyway).";

std::string memoryPlanVerdict(const RunSpec& spec, const std::string& device) {
  if (spec.kind == "eval") return {};   // no training state to plan
  RunSpec local = spec;
  local.device = device;
  std::int64_t sourceParameters = 0;
  ModelConfig cfg;
  try {
    cfg = plannedModelConfig(spec, &sourceParameters);
  } catch (const Error&) {
    return {};   // e.g. a resumed run whose original model folder is gone: loading reports what is wrong
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

struct Trainer {
  RunStore& store;
  std::int64_t runId;
  const JobEnvironment& env;
  ProgressSink& progress;
  const CancelToken& cancel;
  RunSpec spec;
  fs::path runDir;   // set in run() once the run ID is known on every rank

  RunResult run();
};

// The embedding rows of the model a fine-tune starts from (its config.json),
// so that a tokenizer with more ids is refused before any text is tokenized.
ModelVocab modelVocabOf(const fs::path& modelDir) {
  const fs::path config = modelDir / "config.json";
  return {readHfConfig(config).vocabSize, config};
}

RunResult Trainer::run() {
  RunResult result;
  const DistEnv& dist = env.dist;
  const bool writer = dist.writesMetrics();
  const torch::Device device = rankDevice(env.device.empty() ? spec.device : env.device, dist);
  const bool cuda = device.is_cuda();
  // 0. The process group (all ranks meet here, before any data work).
  std::unique_ptr<DataParallel> dp;
  if (dist.distributed()) {
    dp = std::make_unique<DataParallel>(dist, device);
    if (writer) {
      progress.log(LogLevel::Info, "data parallel: " + std::to_string(dist.worldSize) + " ranks over " + dp->backendName() +
                                       " (" + dist.launcher + ")");
    }
    const double id = dp->sum({writer ? static_cast<double>(runId) : 0.0})[0];
    if (!writer && runId == 0) runId = static_cast<std::int64_t>(id);
  }
  if (env.checkMemory) {
    // The memory plan on this rank's device, before anything is loaded; every
    // rank stops when one does not fit.
    const std::string why = memoryPlanVerdict(spec, rankDeviceList(device, dist.worldSize));
    const bool tooBig = dp ? dp->sum({why.empty() ? 0.0 : 1.0})[0] > 0 : !why.empty();
    if (tooBig) {
      throw Error(ErrorCode::BadSpec,
                  "run " + std::to_string(runId) + ": " + (why.empty() ? "another rank's device is too small" : why),
                  kMemoryHint);
    }
  }
  runDir = resolveRunDir(spec.outDir, env.workspace, runId);
  // The run folder is this run's alone (owner.json): a folder of another run,
  // database or deleted namesake is refused before anything is read from it.
  // The hash is of the spec as stored with the run (fixed at registration), so
  // a later engine that writes specs differently still recognises the run.
  const RunRecord record = store.run(runId);
  const std::string canonicalSpec = runSpecToJson(spec);
  const RunIdentity identity{store.storeId(), store.path().string(), runId, record.uid, specHash(record.specJson)};
  if (writer) claimRunDir(runDir, identity);
  if (dp) dp->barrier();
  // Resume reads everything from the checkpoint: its model, its tokenizer; the
  // original model folder is needed only before the first checkpoint.
  const std::optional<fs::path> ckpt = env.resume ? latestCheckpoint(runDir) : std::nullopt;
  const fs::path startModel = ckpt ? *ckpt / "model" : fs::path(spec.modelDir);
  DataSpec dataSpec = spec.data;
  std::error_code ec;
  if (ckpt && dataSpec.tokenFormat.empty() && fs::exists(startModel / "tokenizer.json", ec))
    dataSpec.tokenizer = (startModel / "tokenizer.json").string();
  const ModelVocab vocabLimit = (ckpt || spec.kind != "pretrain") ? modelVocabOf(startModel) : ModelVocab{};
  // Precision: the parameters' dtype while built or loaded (fp32, fp64), the
  // dtype the model then trains in, and whether the forward runs under autocast.
  const std::string precision = spec.precision == "auto" ? (cuda ? "bf16-mixed" : "fp32") : spec.precision;
  const torch::ScalarType paramType = precision == "fp64" ? torch::kFloat64 : torch::kFloat32;
  const bool bf16Weights = precision == "bf16";
  const bool autocastBf16 = precision == "bf16-mixed";

  // 1. Data. Rank 0 tokenizes and caches first; the other ranks then find the cache.
  if (dp && !writer) dp->barrier();
  PreparedData data = prepareData(dataSpec, ckpt ? startModel : fs::path(spec.modelDir), env.workspace / "cache",
                                  progress, cancel, vocabLimit);
  // Every checkpoint carries the tokenizer (read once: the source may go away).
  const std::string tokenizerJson = data.tokenizerPath.empty() ? std::string() : readTextFile(data.tokenizerPath);
  if (dp && writer) dp->barrier();
  LoaderOptions lo;
  lo.batchSize = spec.microBatch;
  lo.seqLen = spec.data.seqLen;
  lo.validationShare = spec.data.validationShare;
  lo.seed = spec.seed;
  lo.rank = dist.rank;
  lo.worldSize = dist.worldSize;
  BatchLoader train(data.shard, Split::Train, lo);
  std::optional<BatchLoader> val;
  if (spec.data.validationShare > 0) {
    LoaderOptions vo = lo;
    vo.shuffle = false;
    val.emplace(data.shard, Split::Validation, vo);
  }

  // 2. Model and optimiser.
  json notes;
  const fs::path notesPath = runDir / "build_notes.json";
  std::shared_ptr<CausalLm> model;
  if (ckpt) {
    model = loadModel(startModel, torch::kCPU, paramType == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32);
    model->to(device, paramType);
    if (fs::exists(notesPath, ec)) notes = parseJson(readTextFile(notesPath), notesPath.string(), ErrorCode::BadCheckpoint);
    notes["parameters"] = countParameters(model->config());
  } else {
    model = buildModelForRun(spec, data.vocabSize, data.shard, device, paramType, progress, cancel, notes);
    if (writer) atomicWriteText(notesPath, notes.dump(2) + "\n");
  }
  model->train();
  model->setRecompute(spec.recompute);
  // bf16 weights: the optimiser steps fp32 masters copied before the cast
  // (with ZeRO, the sharded optimiser keeps them; it is built below).
  const bool sharded = spec.zeroStage > 0;
  std::optional<MasterWeights> master;
  if (bf16Weights && !sharded) {
    master.emplace(model->parameters());
    model->to(torch::kBFloat16);
    master->bind(model->parameters());
  }
  std::vector<torch::Tensor> params = master ? master->masters() : model->parameters();
  const auto adamw = torch::optim::AdamWOptions(spec.optimizer.lr)
                         .betas({spec.optimizer.beta1, spec.optimizer.beta2})
                         .eps(spec.optimizer.eps)
                         .weight_decay(spec.optimizer.weightDecay);
  FusedAdamW optimizer(adamWParamGroups(params, adamw), adamw);
  const ModelConfig& cfg = model->config();
  const KvBudget kv = currentKvBudget(cfg, autocastBf16 || bf16Weights ? DType::BF16 : fromTorch(paramType));
  if (writer && spec.data.seqLen > cfg.maxPositionEmbeddings) {
    const std::string warning = "data.seq_len " + std::to_string(spec.data.seqLen) +
                                " exceeds the model's max_position_embeddings (" +
                                std::to_string(cfg.maxPositionEmbeddings) + "): positions past it were never trained";
    progress.log(LogLevel::Warning, warning);
    store.addEvent(runId, "warning", warning);
    emit(env, {{"event", "log"}, {"level", "warning"}, {"message", warning}});
  }

  // 3. Resume.
  TrainerState state;
  if (ckpt) {
    state = loadCheckpoint(*ckpt, optimizer, identity, /*loadOptimizer=*/!sharded);
    train.restore(state.data);
    result.lastCheckpoint = *ckpt;
    progress.log(LogLevel::Info, "resumed from " + ckpt->string() + " at step " + std::to_string(state.step));
    if (writer) {
      store.addEvent(runId, "resume", "resumed at step " + std::to_string(state.step), json{{"checkpoint", ckpt->string()}}.dump());
      emit(env, {{"event", "log"}, {"level", "info"}, {"message", "resumed at step " + std::to_string(state.step)}});
    }
  }
  // Every rank starts from rank 0's parameters (built with the same seed, or resumed).
  if (dp) {
    const double resumedStep = dp->sum({static_cast<double>(state.step)})[0];
    if (resumedStep != static_cast<double>(state.step) * dist.worldSize) {
      throw Error(ErrorCode::BadCheckpoint,
                  "rank " + std::to_string(dist.rank) + " resumed at step " + std::to_string(state.step) +
                      " but the ranks disagree on the step",
                  "Every rank must see the same checkpoint folder (" + runDir.string() + ") on a shared filesystem.");
    }
    dp->broadcast(params);
    if (master) master->mastersToModel();
  }
  // ZeRO: each rank keeps its slices of the masters and moments, from the
  // (broadcast, full-precision) parameters; then a bf16 run's model is cast.
  std::unique_ptr<ShardedAdamW> zero;
  if (sharded) {
    zero = std::make_unique<ShardedAdamW>(model->parameters(), model->parameters(), adamw, spec.zeroStage, dp.get());
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

  std::optional<MetricWriter> metricWriter;
  if (writer) metricWriter.emplace(store.metricWriter(runId));
  auto addMetric = [&](const char* name, double value, double wall) {
    if (metricWriter) metricWriter->add(name, state.step, state.tokens, wall, value);
  };
  const std::int64_t tokensPerStep =
      static_cast<std::int64_t>(spec.microBatch) * spec.gradAccum * spec.data.seqLen * dist.worldSize;
  const auto wallStart = Clock::now();
  const double wallOffset = state.wallSeconds;
  auto wallNow = [&] { return wallOffset + std::chrono::duration<double>(Clock::now() - wallStart).count(); };
  double lastLoss = 0;
  // The eval tasks' items, read now so that a bad task file fails the run
  // before any training.
  std::vector<std::vector<ChoiceItem>> taskItems;
  if (writer) {
    for (const EvalTaskSpec& t : spec.evalTasks)
      taskItems.push_back(readTaskFile(t));
  }
  json lastTaskScores = json::object();
  // Scores every eval task on the checkpoint's model (as saved, so the figures
  // are the checkpoint's) and records them in the store.
  auto scoreTasks = [&](const fs::path& modelDir) {
    if (spec.evalTasks.empty()) return;
    ChoiceEvalOptions o;
    o.model = modelDir;
    o.device = device.str();
    ChoiceScorer scorer(o);   // the checkpoint's model, loaded once for every task
    for (std::size_t k = 0; k < spec.evalTasks.size(); ++k) {
      const EvalTaskSpec& t = spec.evalTasks[k];
      NullProgress quiet;
      const ChoiceEvalResult r = scorer.score(taskItems[k], t.limit, quiet, cancel);
      const bool partial = r.items < static_cast<std::int64_t>(taskItems[k].size());
      storeChoiceScores(store, runId, state.step, t.name, r, partial);
      // Also metric series, so the chart draws them over the steps like any other.
      if (metricWriter) {
        metricWriter->add("eval/" + t.name + "/acc", state.step, state.tokens, wallNow(), r.acc);
        metricWriter->add("eval/" + t.name + "/acc_norm", state.step, state.tokens, wallNow(), r.accNorm);
      }
      lastTaskScores[t.name] = {{"step", state.step}, {"acc", r.acc},         {"acc_stderr", r.accStderr},
                                {"acc_norm", r.accNorm}, {"acc_norm_stderr", r.accNormStderr}, {"items", r.items}};
      emit(env, {{"event", "eval_task"}, {"step", state.step}, {"task", t.name}, {"acc", r.acc}, {"acc_norm", r.accNorm},
                 {"items", r.items}});
      progress.log(LogLevel::Info, t.name + " at step " + std::to_string(state.step) + ": acc " + std::to_string(r.acc) +
                                       ", acc_norm " + std::to_string(r.accNorm) + " (" + std::to_string(r.items) + " items)");
    }
  };
  auto checkpoint = [&](bool scoreEvalTasks) {
    state.data = train.position();
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
      zero->save(staging / ("optimizer-rank" + std::to_string(dist.rank) + ".pt"));
      if (bf16Weights) gathered = zero->gatherMasters();   // every rank takes part; rank 0 saves them
      if (dp) dp->barrier();
      extras.optimizerShards = true;
      if (bf16Weights) extras.weights = &gathered;
      if (writer) extras.moveIn = optimizerShards(staging);
    }
    if (writer) {
      const SavedCheckpoint saved =
          saveCheckpoint(runDir, *model, optimizer, state, canonicalSpec, identity, tokenizerJson, 2, extras);
      if (!staging.empty()) {
        std::error_code ec;
        fs::remove_all(staging, ec);
      }
      result.lastCheckpoint = saved.dir;
      store.addArtifact(runId, "checkpoint", result.lastCheckpoint.string(), state.step, 0);
      for (const fs::path& gone : saved.pruned) store.deleteArtifacts(runId, gone.string());
      metricWriter->flush();
      emit(env, {{"event", "checkpoint"}, {"step", state.step}, {"path", result.lastCheckpoint.string()}});
      if (scoreEvalTasks) scoreTasks(saved.dir / "model");
    }
    if (dp) dp->barrier();   // no rank runs ahead of a checkpoint it may resume from
  };
  auto runEval = [&]() {
    if (!val) return;
    const double v = evaluateLoss(*model, *val, spec.evalBatches, device, dp.get(), autocastBf16);
    addMetric("val/loss", v, wallNow());
    if (!state.bestValLoss || v < *state.bestValLoss) state.bestValLoss = v;
    result.finalValLoss = v;
    emit(env, {{"event", "eval"}, {"step", state.step}, {"val_loss", v}});
  };
  if (state.step == 0 && val) runEval();  // the loss right after build/conversion

  // 4. Train, measuring the device's peak for the summary beside the plan's.
  resetPeakMemory(device);
  Batch batch;
  auto lastReport = Clock::now() - std::chrono::seconds(1);
  while (state.step < spec.steps) {
    // A cancel seen by any rank stops all of them after the same step.
    const bool stop = dp ? dp->sum({cancel.requested() ? 1.0 : 0.0})[0] > 0 : cancel.requested();
    if (stop) {
      checkpoint(/*scoreEvalTasks=*/false);
      result.status = RunStatus::Cancelled;
      break;
    }
    const auto t0 = Clock::now();
    const double lr = learningRateAt(spec.optimizer, spec.schedule, static_cast<int>(state.step), spec.steps);
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    if (zero) zero->setLr(lr);
    const StepSettings settings{spec.gradAccum, autocastBf16, spec.optimizer.clip, master ? &*master : nullptr};
    StepOutcome outcome;
    std::string outOfMemory;
    try {
      auto next = [&] {
        train.next(batch);
        return toTensor(batch, device);
      };
      outcome = zero ? trainStep(*model, *zero, next, settings, dp.get())
                     : trainStep(*model, optimizer, params, next, settings, dp.get());
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
      // The step is lost, nothing else: the run resumes from its last checkpoint.
      if (metricWriter) metricWriter->flush();
      result.status = RunStatus::Failed;
      result.error = "out of memory at step " + std::to_string(state.step + 1) + " on " + device.str() + " (" +
                     outOfMemory.substr(0, outOfMemory.find('\n')) + "); last good checkpoint: " +
                     (result.lastCheckpoint.empty() ? std::string("none") : result.lastCheckpoint.string()) +
                     "; lower micro_batch or turn on recompute, then resume";
      break;
    }
    const double trainLoss = outcome.loss;
    const double gradNorm = outcome.gradNorm;
    if (!outcome.finite) {
      if (metricWriter) metricWriter->flush();
      result.status = RunStatus::Failed;
      result.error = std::string("non-finite ") + (!std::isfinite(trainLoss) ? "loss" : "gradient norm") + " (" +
                     std::to_string(trainLoss) + ") at step " + std::to_string(state.step + 1) + "; last good checkpoint: " +
                     (result.lastCheckpoint.empty() ? std::string("none") : result.lastCheckpoint.string());
      break;
    }
    state.step += 1;
    state.tokens += tokensPerStep;
    lastLoss = trainLoss;
    const double stepSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const double tokPerSec = static_cast<double>(tokensPerStep) / std::max(stepSeconds, 1e-9);
    const double wall = wallNow();
    addMetric("train/loss", trainLoss, wall);
    addMetric("lr", lr, wall);
    addMetric("grad_norm", gradNorm, wall);
    addMetric("tokens_per_s", tokPerSec, wall);
    if (spec.evalEvery > 0 && state.step % spec.evalEvery == 0 && state.step < spec.steps) runEval();
    if (writer && (Clock::now() - lastReport > std::chrono::milliseconds(200) || state.step == spec.steps)) {
      lastReport = Clock::now();
      progress.progress("train", static_cast<double>(state.step), spec.steps,
                        "loss " + std::to_string(trainLoss).substr(0, 6));
      emit(env, {{"event", "progress"}, {"step", state.step}, {"steps", spec.steps}, {"tokens", state.tokens},
                 {"loss", trainLoss}, {"lr", lr}, {"grad_norm", gradNorm}, {"tokens_per_s", tokPerSec}});
    }
    if (spec.checkpointEvery > 0 && state.step % spec.checkpointEvery == 0 && state.step < spec.steps) checkpoint(true);
  }
  if (result.status == RunStatus::Completed) {
    runEval();
    checkpoint(true);
    result.finalModel = result.lastCheckpoint / "model";
  }
  if (metricWriter) metricWriter->flush();
  result.steps = state.step;
  result.tokens = state.tokens;
  result.finalTrainLoss = lastLoss;
  RunSpec planned = spec;
  planned.device = rankDeviceList(device, dist.worldSize);
  const MemoryPlan plan = planMemory(cfg, planned, 0);
  const std::int64_t peakBytes = peakMemoryBytes(device);
  json summary = {{"steps", state.step},
                  {"tokens", state.tokens},
                  {"final_train_loss", lastLoss},
                  {"parameters", notes.value("parameters", json(nullptr))},
                  {"kv_bytes_per_token", kv.bytesPerToken},
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
  if (dist.distributed()) summary["data_parallel"] = {{"world_size", dist.worldSize}, {"backend", dp->backendName()},
                                                      {"launcher", dist.launcher}};
  if (zero) summary["zero"] = {{"stage", zero->stage()}, {"state_bytes_per_rank", zero->stateBytes()}};
  if (writer) store.setSummary(runId, summary.dump());
  return result;
}

} // namespace

RunResult runJob(RunStore& store, std::int64_t runId, const JobEnvironment& env, ProgressSink& progress,
                 const CancelToken& cancel) {
  RunResult result;
  const bool writer = env.dist.writesMetrics();
  const bool launchedFromSpec = !writer && runId == 0;
  RunRecord record;
  if (!launchedFromSpec) record = store.run(runId);
  const std::string specJson = launchedFromSpec ? env.specJson : record.specJson;
  std::unique_ptr<LeaseKeeper> keeper;
  if (writer) {
    // The engine rides out another process holding the database lock for
    // minutes (a long reader or a backup) instead of failing the run.
    store.setBusyTimeout(std::chrono::minutes(10));
    if (record.status == RunStatus::Completed) {
      // A finished run keeps its outcome and its files: nothing to do.
      progress.log(LogLevel::Info, "run " + std::to_string(runId) + " is already completed; nothing to do");
      emit(env, {{"event", "status"}, {"run", runId}, {"status", "completed"}});
      return result;
    }
    try {
      const std::string takenFrom = store.acquireRun(runId);
      if (!takenFrom.empty()) progress.log(LogLevel::Warning, "took over the stale lease of " + takenFrom);
    } catch (const LeaseHeld& e) {
      // Another live engine owns the run: leave its status and files alone.
      result.status = RunStatus::Failed;
      result.notStarted = true;
      result.error = e.message() + (e.hint().empty() ? "" : " (" + e.hint() + ")");
      emit(env, {{"event", "log"}, {"level", "error"}, {"message", result.error}});
      return result;
    }
    keeper = std::make_unique<LeaseKeeper>(store.path(), runId);
    store.setStatus(runId, RunStatus::Running);
    emit(env, {{"event", "status"}, {"run", runId}, {"status", "running"}});
  }
  try {
    RunSpec spec = parseRunSpec(specJson, launchedFromSpec ? "spec" : "run " + std::to_string(runId) + " spec");
    if (spec.kind == "eval") {
      if (env.dist.distributed()) throw Error(ErrorCode::BadSpec, "run " + std::to_string(runId) + ": an eval job runs on one device");
      result = withTorchErrors("run " + std::to_string(runId),
                               [&] { return runEvaluationJob(store, runId, env, spec, progress, cancel); });
    } else {
      Trainer t{store, runId, env, progress, cancel, spec, {}};
      result = withTorchErrors("run " + std::to_string(runId), [&] { return t.run(); });
    }
  } catch (const Error& e) {
    result.status = e.code() == ErrorCode::Cancelled ? RunStatus::Cancelled : RunStatus::Failed;
    result.error = e.message() + (e.hint().empty() ? "" : " (" + e.hint() + ")");
  } catch (const std::exception& e) {
    result.status = RunStatus::Failed;
    result.error = std::string("run ") + std::to_string(runId) + ": " + e.what();
  }
  if (!writer) return result;   // rank 0 records the outcome of the job
  keeper.reset();
  // The outcome is recorded even when the store cannot be written for a while
  // (a full disk): retried until it can, for up to two minutes.
  const auto recordOutcome = [&] {
    store.setStatus(runId, result.status, result.error.empty() ? std::nullopt : std::optional<std::string>(result.error));
    if (!result.error.empty()) store.addEvent(runId, "error", result.error);
    store.releaseRun(runId);
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  for (int attempt = 0;; ++attempt) {
    try {
      recordOutcome();
      break;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Store || std::chrono::steady_clock::now() > deadline) throw;
      if (attempt == 0) {
        emit(env, {{"event", "log"}, {"level", "warning"},
                   {"message", "run " + std::to_string(runId) + " ended " + runStatusName(result.status) +
                                   "; the store cannot be written (" + e.message() +
                                   "), retrying until it can"}});
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(4000, 250 << std::min(attempt, 4))));
    }
  }
  json st = {{"event", "status"}, {"run", runId}, {"status", runStatusName(result.status)}};
  if (!result.error.empty()) st["error"] = result.error;
  emit(env, st);
  return result;
}

} // namespace latentlab
