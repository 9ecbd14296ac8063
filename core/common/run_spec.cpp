// RunSpec JSON (versioned), validation, and the learning-rate schedules.
#include "latentlab/run_spec.h"
#include "latentlab/kv_budget.h"
#include "latentlab/passkey.h"
#include "latentlab/vocabulary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/file_util.h"
#include "common/json_util.h"
#include "latentlab/error.h"

namespace latentlab {
using nlohmann::json;

namespace {

// Reads optional fields into a struct, rejecting unknown keys so a typo in a
// spec is reported rather than silently ignored.
class Fields {
 public:
  Fields(const json& j, std::string where) : m_j(j), m_where(std::move(where)) {
    if (!j.is_object()) throw Error(ErrorCode::BadSpec, m_where + " must be a JSON object");
  }
  template <typename T>
  void get(const std::string& key, T& out) {
    m_known.insert(key);
    if (!m_j.contains(key) || m_j.at(key).is_null()) return;
    const json& v = m_j.at(key);
    try {
      if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean()) throw std::invalid_argument("a boolean");
      } else if constexpr (std::is_integral_v<T>) {
        if (!v.is_number_integer()) throw std::invalid_argument("an integer");
        // In the field's range: nothing wraps (-1 is no uint64 seed) or truncates.
        const bool fits =
            v.is_number_unsigned()
                ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                : v.get<std::int64_t>() >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                      (v.get<std::int64_t>() < 0 || static_cast<std::uint64_t>(v.get<std::int64_t>()) <=
                                                        static_cast<std::uint64_t>(std::numeric_limits<T>::max()));
        if (!fits) {
          throw std::invalid_argument("an integer from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
                                      std::to_string(std::numeric_limits<T>::max()));
        }
      } else if constexpr (std::is_floating_point_v<T>) {
        if (!v.is_number()) throw std::invalid_argument("a number");
      } else if constexpr (std::is_same_v<T, std::vector<int>>) {
        if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& x) {
              return x.is_number_integer() && x.get<std::int64_t>() >= 0 && x.get<std::int64_t>() <= INT32_MAX;
            }))
          throw std::invalid_argument("an array of non-negative integers");
      } else if constexpr (std::is_same_v<T, std::vector<double>>) {
        if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); }))
          throw std::invalid_argument("an array of numbers");
      } else {
        if (!v.is_string()) throw std::invalid_argument("a string");
      }
      out = v.get<T>();
    } catch (const std::invalid_argument& e) {
      throw Error(ErrorCode::BadSpec, m_where + "." + key + " must be " + e.what() + ", got " + v.dump());
    }
  }
  const json* object(const std::string& key) {
    m_known.insert(key);
    if (!m_j.contains(key) || m_j.at(key).is_null()) return nullptr;
    return &m_j.at(key);
  }
  void rejectUnknown() const {
    for (auto it = m_j.begin(); it != m_j.end(); ++it) {
      if (!m_known.count(it.key())) {
        throw Error(ErrorCode::BadSpec, m_where + "." + it.key() + " is not a RunSpec field",
                    "Check the spelling; see docs/run_spec.md for the fields.");
      }
    }
  }

 private:
  const json& m_j;
  std::string m_where;
  std::set<std::string> m_known;
};

[[noreturn]] void bad(const std::string& source, const std::string& field, const std::string& problem) {
  throw Error(ErrorCode::BadSpec, source + ": " + field + " " + problem);
}

// The names of E, "a, b or c".
template <typename E>
std::string allowed() {
  const auto names = choiceNames<E>();
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string n = names[i].empty() ? "empty" : names[i];
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + n;
  }
  return out;
}

// A choice field: one of E's names (an alias is stored as the name written).
template <typename E>
void checkChoice(const std::string& source, const std::string& field, const std::string& value) {
  if (!findChoice<E>(value)) bad(source, field, "must be " + allowed<E>() + ", got '" + value + "'");
}

void validateAttention(const RunSpec& s, const std::string& source) {
  const AttentionOptions& o = s.attentionOptions;
  const std::string opt = "attention_options.";
  for (auto [field, value] : {std::pair<const char*, int>{"gqa_group", o.gqaGroup},
                              {"d_c", o.dC},
                              {"d_rope", o.dRope},
                              {"d_nope", o.dNope},
                              {"d_v", o.dV},
                              {"q_lora_rank", o.qLoraRank}}) {
    if (value < 0) bad(source, opt + field, "must be >= 0 (0 derives it from the architecture)");
  }
  if (o.match != "architecture" && o.match != "target" && o.match != "none")
    bad(source, opt + "match", "must be architecture, target or none, got '" + o.match + "'");
  if (o.match == "target" && o.targetParameters <= 0)
    bad(source, opt + "target_parameters", "must be positive for match 'target'");
  if (o.matchMultiple < 1) bad(source, opt + "match_multiple", "must be at least 1");
  if (s.attention.empty()) return;
  if (!isAttentionVariant(s.attention))
    bad(source, "attention", "must be mha, gqa, mla, gla-<k>, mlra-2 or mlra-4 (or empty), got '" + s.attention + "'");
  if (s.kind != RunKind::Pretrain)
    bad(source, "attention", "applies to kind pretrain only (a model folder keeps its attention)");
  const auto names = builtinArchitectureNames();
  if (std::find(names.begin(), names.end(), s.architecture) != names.end()) {
    // Shape-dependent checks (d_c divisible by the latent heads, head groups, matching) now, not at run time.
    attentionVariant(builtinArchitecture(s.architecture), s.attention, o, source + ": spec");
  }
}

// A choice field read through its name table (an unknown name names the field).
template <typename E>
void readChoice(Fields& g, const char* key, E& out, const std::string& source, const std::string& field) {
  std::string name(choiceName(out));
  g.get(key, name);
  checkChoice<E>(source, field, name);
  out = *findChoice<E>(name);
}

// precision, or the older dtype field it replaced (read as its precision).
Precision readPrecision(Fields& f, const json& j, const std::string& source) {
  Precision current = Precision::Auto;
  std::string precision(choiceName(current));
  f.get("precision", precision);
  if (j.is_object() && j.contains("dtype")) {  // the field's name before precision
    std::string legacy;
    f.get("dtype", legacy);
    static const std::map<std::string, std::string> kLegacy = {
        {"auto", "auto"}, {"f32", "fp32"}, {"bf16", "bf16-mixed"}, {"f64", "fp64"}};
    const auto it = kLegacy.find(legacy);
    if (it == kLegacy.end())
      bad(source, "dtype", "must be auto, f32, bf16 or f64, got '" + legacy + "' (use precision)");
    if (j.contains("precision") && precision != it->second)
      bad(source, "precision", "'" + precision + "' contradicts dtype '" + legacy + "'; give precision only");
    precision = it->second;
  }
  checkChoice<Precision>(source, "precision", precision);
  return *findChoice<Precision>(precision);
}

// eval_tasks, passkey and evaluates: what an evaluation (or a run's checkpoints) scores.
void readEvaluation(Fields& f, RunSpec& s, const std::string& source) {
  if (const json* tasks = f.object("eval_tasks")) {
    if (!tasks->is_array()) bad(source, "eval_tasks", "must be an array of {\"name\", \"file\", \"limit\"} objects");
    for (std::size_t k = 0; k < tasks->size(); ++k) {
      Fields g((*tasks)[k], source + ": spec.eval_tasks[" + std::to_string(k) + "]");
      EvalTaskSpec t;
      g.get("name", t.name);
      g.get("file", t.file);
      readChoice(g, "format", t.format, source, "eval_tasks[" + std::to_string(k) + "].format");
      g.get("labels", t.labels);
      g.get("dev", t.dev);
      g.get("shots", t.shots);
      g.get("limit", t.limit);
      g.rejectUnknown();
      s.evalTasks.push_back(std::move(t));
    }
  }
  if (const json* p = f.object("passkey")) {
    Fields g(*p, source + ": spec.passkey");
    g.get("file", s.passkey.file);
    g.get("lengths", s.passkey.lengths);
    g.get("depths", s.passkey.depths);
    g.get("trials", s.passkey.trials);
    g.get("seed", s.passkey.seed);
    g.rejectUnknown();
  }
  if (const json* h = f.object("held_out")) {
    Fields g(*h, source + ": spec.held_out");
    g.get("text", s.heldOut.text);
    g.get("seq_len", s.heldOut.seqLen);
    g.get("batch", s.heldOut.batch);
    g.get("max_tokens", s.heldOut.maxTokens);
    g.get("chunk", s.heldOut.chunk);
    g.rejectUnknown();
  }
  if (const json* q = f.object("kv_quant")) {
    // One cache (an object) or several in turn (an array of objects).
    const bool several = q->is_array();
    for (std::size_t k = 0; k < (several ? q->size() : 1); ++k) {
      const std::string at = several ? "kv_quant[" + std::to_string(k) + "]" : "kv_quant";
      Fields g(several ? (*q)[k] : *q, source + ": spec." + at);
      KvQuantSettings c;
      std::string format = "none";
      g.get("format", format);
      try {
        c.bits = parseKvQuantBits(format, at + ".format");
      } catch (const Error&) {
        bad(source, at + ".format", "must be none, int8, int4 or int2, got '" + format + "'");
      }
      g.get("group", c.group);
      g.get("residual", c.residual);
      g.rejectUnknown();
      if (several || c.on()) s.kvCaches.push_back(c);
    }
  }
  if (const json* e = f.object("evaluates")) {
    Fields g(*e, source + ": spec.evaluates");
    g.get("run", s.evaluatesRun);
    g.get("step", s.evaluatesStep);
    g.rejectUnknown();
  }
}

void readConversion(Fields& f, RunSpec& s, const std::string& source) {
  if (const json* c = f.object("conversion")) {
    Fields g(*c, source + ": spec.conversion");
    s.conversion.enabled = true;
    g.get("enabled", s.conversion.enabled);
    readChoice(g, "target", s.conversion.target, source, "conversion.target");
    if (g.object("factorise") != nullptr) {  // unset: the target's default
      Factorisation factorise = Factorisation::Weights;
      readChoice(g, "factorise", factorise, source, "conversion.factorise");
      s.conversion.factorise = factorise;
    }
    g.get("rope_width", s.conversion.ropeWidth);
    g.get("freq_fold", s.conversion.freqFold);
    readChoice(g, "rope_strategy", s.conversion.ropeStrategy, source, "conversion.rope_strategy");
    g.get("rope_pairs", s.conversion.ropePairs);
    g.get("d_kv", s.conversion.dKv);
    readChoice(g, "svd", s.conversion.svd, source, "conversion.svd");
    // Which layers: the text form ("all", "every:2", "0,2,5") or a list of indices.
    if (const json* layers = g.object("layers"); layers != nullptr && layers->is_array()) {
      std::vector<int> list;
      g.get("layers", list);
      std::string text;
      for (int l : list) text += (text.empty() ? "" : ",") + std::to_string(l);
      s.conversion.layers = list.empty() ? "none" : text;
    } else {
      g.get("layers", s.conversion.layers);
    }
    if (const json* budget = g.object("kv_budget"); budget != nullptr && budget->is_number_integer()) {
      std::int64_t bytes = 0;
      g.get("kv_budget", bytes);
      s.conversion.kvBudget = std::to_string(bytes);
    } else {
      g.get("kv_budget", s.conversion.kvBudget);
    }
    readChoice(g, "two_norm_score", s.conversion.twoNormScore, source, "conversion.two_norm_score");
    g.get("calib_sequences", s.conversion.calibSequences);
    g.get("calib_seq_len", s.conversion.calibSeqLen);
    g.rejectUnknown();
  }
}

void readDistill(Fields& f, RunSpec& s, const std::string& source) {
  if (const json* d = f.object("distill")) {
    Fields g(*d, source + ": spec.distill");
    s.distill.enabled = true;
    g.get("enabled", s.distill.enabled);
    g.get("teacher", s.distill.teacher);
    g.get("alpha", s.distill.alpha);
    g.get("temperature", s.distill.temperature);
    g.rejectUnknown();
  }
}

void readAttentionOptions(Fields& f, RunSpec& s, const std::string& source) {
  if (const json* a = f.object("attention_options")) {
    Fields g(*a, source + ": spec.attention_options");
    AttentionOptions& o = s.attentionOptions;
    g.get("gqa_group", o.gqaGroup);
    g.get("d_c", o.dC);
    g.get("d_rope", o.dRope);
    g.get("d_nope", o.dNope);
    g.get("d_v", o.dV);
    g.get("q_lora_rank", o.qLoraRank);
    g.get("scaled", o.scaled);
    g.get("match", o.match);
    g.get("target_parameters", o.targetParameters);
    g.get("match_multiple", o.matchMultiple);
    g.rejectUnknown();
  }
}

// data, optimizer and schedule.
void readTraining(Fields& f, RunSpec& s, const std::string& source) {
  if (const json* d = f.object("data")) {
    Fields g(*d, source + ": spec.data");
    g.get("corpus", s.data.corpus);
    g.get("text_field", s.data.textField);
    g.get("tokenizer", s.data.tokenizer);
    g.get("tokenizer_vocab", s.data.tokenizerVocab);
    readChoice(g, "token_format", s.data.tokenFormat, source, "data.token_format");
    g.get("seq_len", s.data.seqLen);
    g.get("validation_share", s.data.validationShare);
    g.get("max_corpus_bytes", s.data.maxCorpusBytes);
    g.rejectUnknown();
  }
  if (const json* o = f.object("optimizer")) {
    Fields g(*o, source + ": spec.optimizer");
    g.get("lr", s.optimizer.lr);
    g.get("beta1", s.optimizer.beta1);
    g.get("beta2", s.optimizer.beta2);
    g.get("eps", s.optimizer.eps);
    g.get("weight_decay", s.optimizer.weightDecay);
    g.get("clip", s.optimizer.clip);
    g.rejectUnknown();
  }
  if (const json* o = f.object("schedule")) {
    Fields g(*o, source + ": spec.schedule");
    readChoice(g, "kind", s.schedule.kind, source, "schedule.kind");
    g.get("warmup_steps", s.schedule.warmupSteps);
    g.get("decay_steps", s.schedule.decaySteps);
    g.get("min_lr_ratio", s.schedule.minLrRatio);
    g.rejectUnknown();
  }
}

}  // namespace

RunSpec parseRunSpec(const std::string& text, const std::string& source) {
  json j = parseJson(text, source, ErrorCode::BadSpec);
  RunSpec s;
  Fields f(j, source + ": spec");
  f.get("version", s.version);
  if (s.version > kRunSpecVersion) {
    throw Error(ErrorCode::BadSpec, source + ": spec version " + std::to_string(s.version) +
                                        " is newer than this engine understands (" + std::to_string(kRunSpecVersion) +
                                        ")");
  }
  f.get("name", s.name);
  readChoice(f, "kind", s.kind, source, "kind");
  f.get("architecture", s.architecture);
  f.get("model_dir", s.modelDir);
  f.get("attention", s.attention);
  f.get("steps", s.steps);
  f.get("micro_batch", s.microBatch);
  f.get("grad_accum", s.gradAccum);
  s.precision = readPrecision(f, j, source);
  f.get("seed", s.seed);
  f.get("eval_every", s.evalEvery);
  f.get("eval_batches", s.evalBatches);
  f.get("checkpoint_every", s.checkpointEvery);
  f.get("init_std", s.initStd);
  f.get("zero_init_output", s.zeroInitOutput);
  f.get("recompute", s.recompute);
  f.get("zero_stage", s.zeroStage);
  f.get("device", s.device);
  f.get("out_dir", s.outDir);
  readEvaluation(f, s, source);
  readConversion(f, s, source);
  readDistill(f, s, source);
  readAttentionOptions(f, s, source);
  readTraining(f, s, source);
  f.rejectUnknown();
  if (s.kind == RunKind::ConvertFinetune) s.conversion.enabled = true;
  validateRunSpec(s, source);
  return s;
}

RunSpec loadRunSpec(const std::filesystem::path& path) {
  return parseRunSpec(readTextFile(path), path.string());
}

std::vector<std::string> deviceList(const std::string& device) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= device.size();) {
    const std::size_t end = std::min(device.find(',', at), device.size());
    out.push_back(device.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::vector<KvQuantSettings> evalCaches(const RunSpec& s) {
  return s.kvCaches.empty() ? std::vector<KvQuantSettings>{KvQuantSettings{}} : s.kvCaches;
}

namespace {

// What an evaluation scores (kind eval): tasks, passkey, held-out text, the
// caches, the evaluated run; and the eval tasks any run scores.
void validateEvaluation(const RunSpec& s, const std::string& source) {
  if (s.kind == RunKind::Eval) {
    if (s.evalTasks.empty() && s.passkey.file.empty() && s.heldOut.text.empty())
      bad(source, "eval_tasks", "passkey or held_out is required for kind eval (what to evaluate the model on)");
    if (s.conversion.enabled) bad(source, "conversion", "does not apply to kind eval");
  } else if (!s.passkey.file.empty() || !s.heldOut.text.empty() || s.evaluatesRun != 0 || !s.kvCaches.empty()) {
    bad(source,
        !s.passkey.file.empty()   ? "passkey"
        : !s.heldOut.text.empty() ? "held_out"
        : !s.kvCaches.empty()     ? "kv_quant"
                                  : "evaluates",
        "applies to kind eval only");
  }
  for (std::size_t k = 0; k < s.kvCaches.size(); ++k) {
    const std::string at = s.kvCaches.size() > 1 ? "kv_quant[" + std::to_string(k) + "]" : "kv_quant";
    if (s.kvCaches[k].group < 1) bad(source, at + ".group", "must be at least 1");
    if (s.kvCaches[k].residual < 0) bad(source, at + ".residual", "must be 0 or more");
    for (std::size_t i = 0; i < k; ++i) {
      if (kvQuantLabel(s.kvCaches[i]) == kvQuantLabel(s.kvCaches[k]))
        bad(source, at, "repeats kv_quant[" + std::to_string(i) + "]; each cache is scored once");
    }
  }
  if (!s.heldOut.text.empty()) {
    if (s.heldOut.seqLen < 1) bad(source, "held_out.seq_len", "must be at least 1");
    if (s.heldOut.batch < 1) bad(source, "held_out.batch", "must be at least 1");
    if (s.heldOut.maxTokens < 0) bad(source, "held_out.max_tokens", "must be 0 (all) or more");
    if (s.heldOut.chunk < 1) bad(source, "held_out.chunk", "must be at least 1");
    if (s.heldOut.text == "validation" && s.data.validationShare <= 0)
      bad(source, "held_out.text", "is \"validation\" but data.validation_share is 0: there is no validation tail");
  }
  if (s.evaluatesRun < 0) bad(source, "evaluates.run", "must be a run ID (>= 1)");
  if (s.evaluatesStep < -1) bad(source, "evaluates.step", "must be >= 0 (omit it for the run's newest checkpoint)");
  if (!s.passkey.file.empty()) {
    if (s.passkey.lengths.empty()) bad(source, "passkey.lengths", "must list at least one prompt length");
    for (int L : s.passkey.lengths)
      if (L < 64) bad(source, "passkey.lengths", "must be at least 64 tokens each, got " + std::to_string(L));
    if (s.passkey.depths.empty()) bad(source, "passkey.depths", "must list at least one depth");
    for (double d : s.passkey.depths)
      if (!(d >= 0 && d <= 1)) bad(source, "passkey.depths", "must each be in [0, 1]");
    if (s.passkey.trials < 1 || s.passkey.trials > kMaxPasskeyTrials)
      bad(source, "passkey.trials", "must be in [1, " + std::to_string(kMaxPasskeyTrials) + "]");
  }
  std::set<std::string> taskNames;
  for (std::size_t k = 0; k < s.evalTasks.size(); ++k) {
    const std::string field = "eval_tasks[" + std::to_string(k) + "]";
    const EvalTaskSpec& t = s.evalTasks[k];
    if (t.name.empty()) bad(source, field + ".name", "must not be empty");
    if (!taskNames.insert(t.name).second) bad(source, field + ".name", "'" + t.name + "' is used twice");
    if (t.file.empty()) bad(source, field + ".file", "must name a JSONL task file");
    if (t.limit < 0) bad(source, field + ".limit", "must be >= 0 (0: every item)");
    if (t.shots < 0) bad(source, field + ".shots", "must be >= 0");
    if (t.shots > 0 && (t.format != TaskFormat::Mmlu || t.dev.empty()))
      bad(source, field + ".shots", "needs format mmlu and its dev CSV (dev)");
    if (t.format == TaskFormat::Piqa && t.labels.empty()) bad(source, field + ".labels", "is required for piqa");
  }
}

// The length, batches, devices, data, optimiser and schedule of a run.
void validateTraining(const RunSpec& s, const std::string& source) {
  if (s.steps < 1) bad(source, "steps", "must be at least 1");
  if (s.microBatch < 1) bad(source, "micro_batch", "must be at least 1");
  if (s.gradAccum < 1) bad(source, "grad_accum", "must be at least 1");
  if (s.evalEvery < 0) bad(source, "eval_every", "must be 0 (end only) or positive");
  if (s.evalBatches < 1) bad(source, "eval_batches", "must be at least 1");
  if (s.checkpointEvery < 0) bad(source, "checkpoint_every", "must be 0 (end only) or positive");
  if (s.zeroStage < 0 || s.zeroStage > 2)
    bad(source, "zero_stage",
        "must be 0 (off), 1 (optimizer state sharded) or 2 (and gradients), got " + std::to_string(s.zeroStage));
  // One device, or a comma list of devices for a data-parallel job (one rank each).
  for (const std::string& d : deviceList(s.device)) {
    const bool cudaN =
        d.rfind("cuda:", 0) == 0 && d.size() > 5 && d.find_first_not_of("0123456789", 5) == std::string::npos;
    if (d != "cpu" && d != "cuda" && !cudaN)
      bad(source, "device",
          "must be cpu, cuda, cuda:N or a comma list of them (one rank each), got '" + s.device + "'");
  }
  if (s.data.seqLen < 2) bad(source, "data.seq_len", "must be at least 2");
  if (s.data.validationShare < 0 || s.data.validationShare >= 0.5)
    bad(source, "data.validation_share", "must be in [0, 0.5)");
  if (s.data.tokenizerVocab < 300) bad(source, "data.tokenizer_vocab", "must be at least 300");
  if (!(s.optimizer.lr > 0)) bad(source, "optimizer.lr", "must be positive");
  if (s.optimizer.beta1 < 0 || s.optimizer.beta1 >= 1) bad(source, "optimizer.beta1", "must be in [0, 1)");
  if (s.optimizer.beta2 < 0 || s.optimizer.beta2 >= 1) bad(source, "optimizer.beta2", "must be in [0, 1)");
  if (!(s.optimizer.eps > 0)) bad(source, "optimizer.eps", "must be positive");
  if (s.optimizer.weightDecay < 0) bad(source, "optimizer.weight_decay", "must be >= 0");
  if (s.optimizer.clip < 0) bad(source, "optimizer.clip", "must be >= 0 (0 disables clipping)");
  if (s.schedule.warmupSteps < 0 || s.schedule.warmupSteps > s.steps)
    bad(source, "schedule.warmup_steps", "must be in [0, steps]");
  if (s.schedule.decaySteps < 0 || s.schedule.warmupSteps + s.schedule.decaySteps > s.steps)
    bad(source, "schedule.decay_steps", "must be >= 0 with warmup_steps + decay_steps <= steps");
  if (s.schedule.minLrRatio < 0 || s.schedule.minLrRatio > 1) bad(source, "schedule.min_lr_ratio", "must be in [0, 1]");
}

// Distillation and conversion settings.
void validateDistillAndConversion(const RunSpec& s, const std::string& source) {
  if (s.distill.enabled) {
    if (s.kind != RunKind::Finetune && s.kind != RunKind::ConvertFinetune)
      bad(source, "distill",
          "applies to kinds finetune and convert-finetune (a teacher for a model that starts trained)");
    if (s.distill.teacher.empty()) bad(source, "distill.teacher", "must be \"original\" or a model folder");
    if (s.distill.original() && s.kind != RunKind::ConvertFinetune)
      bad(source, "distill.teacher",
          "\"original\" (the unconverted model) needs kind convert-finetune; give the teacher's model folder");
    if (!(s.distill.alpha >= 0 && s.distill.alpha <= 1)) bad(source, "distill.alpha", "must be in [0, 1]");
    if (!(s.distill.temperature > 0) || !std::isfinite(s.distill.temperature))
      bad(source, "distill.temperature", "must be positive");
  }
  if (s.conversion.enabled) {
    if (s.conversion.ropeWidth < 0) bad(source, "conversion.rope_width", "must be >= 2 (or 0 for 2 r n_kv)");
    if (s.conversion.freqFold < 1) bad(source, "conversion.freq_fold", "must be at least 1");
    if (s.conversion.deepseek() && s.conversion.svd == SvdMethod::Split)
      bad(source, "conversion.svd", "must be joint for the deepseek target (DeepSeek-V3 has one joint latent)");
    if (s.conversion.ropePairs < 0) bad(source, "conversion.rope_pairs", "must be >= 1 (or 0 for d_h/16)");
    if (s.conversion.dKv < 1) bad(source, "conversion.d_kv", "must be at least 1");
    if (s.conversion.layers != "all") {
      if (s.conversion.deepseek()) bad(source, "conversion.layers", "applies to the mha2mla target only");
      try {  // the form here; the indices against the model's layers when it is loaded
        resolveLayerSelection(s.conversion.layers, 1 << 20, "conversion.layers");
      } catch (const Error& e) {
        throw Error(ErrorCode::BadSpec, source + ": " + e.message());
      }
    }
    if (!s.conversion.kvBudget.empty() && s.conversion.deepseek())
      bad(source, "conversion.kv_budget", "applies to the mha2mla target only");
    if (s.conversion.calibSequences < 1) bad(source, "conversion.calib_sequences", "must be at least 1");
    if (s.conversion.calibSeqLen < 2) bad(source, "conversion.calib_seq_len", "must be at least 2");
  }
}

}  // namespace

void validateRunSpec(const RunSpec& s, const std::string& source) {
  validateEvaluation(s, source);
  if (s.kind == RunKind::Pretrain && s.architecture.empty())
    bad(source, "architecture", "is required for kind pretrain");
  // An evaluation of a run's checkpoint finds the model when it starts.
  const bool modelFromRun = s.kind == RunKind::Eval && s.evaluatesRun > 0;
  if (s.kind != RunKind::Pretrain && s.modelDir.empty() && !modelFromRun)
    bad(source, "model_dir", "is required for kind " + std::string(choiceName(s.kind)));
  validateTraining(s, source);
  validateAttention(s, source);
  validateDistillAndConversion(s, source);
}

namespace {

// eval_tasks, passkey, held_out, kv_quant and evaluates, where set.
void writeEvaluation(json& j, const RunSpec& s) {
  if (!s.evalTasks.empty()) {
    json tasks = json::array();
    for (const auto& t : s.evalTasks) {
      tasks.push_back({{"name", t.name},
                       {"file", t.file},
                       {"format", std::string(choiceName(t.format))},
                       {"labels", t.labels},
                       {"dev", t.dev},
                       {"shots", t.shots},
                       {"limit", t.limit}});
    }
    j["eval_tasks"] = tasks;
  }
  if (!s.passkey.file.empty()) {
    j["passkey"] = {{"file", s.passkey.file},
                    {"lengths", s.passkey.lengths},
                    {"depths", s.passkey.depths},
                    {"trials", s.passkey.trials},
                    {"seed", s.passkey.seed}};
  }
  if (!s.heldOut.text.empty()) {
    j["held_out"] = {{"text", s.heldOut.text},
                     {"seq_len", s.heldOut.seqLen},
                     {"batch", s.heldOut.batch},
                     {"max_tokens", s.heldOut.maxTokens},
                     {"chunk", s.heldOut.chunk}};
  }
  if (!s.kvCaches.empty()) {
    json caches = json::array();
    for (const KvQuantSettings& c : s.kvCaches)
      caches.push_back({{"format", kvQuantName(c.bits)}, {"group", c.group}, {"residual", c.residual}});
    j["kv_quant"] = caches.size() == 1 ? caches[0] : caches;
  }
  if (s.evaluatesRun > 0) {
    j["evaluates"] = {{"run", s.evaluatesRun}};
    if (s.evaluatesStep >= 0) j["evaluates"]["step"] = s.evaluatesStep;
  }
}

// The conversion block: each target's own fields only.
void writeConversion(json& j, const RunSpec& s) {
  if (s.conversion.enabled) {
    // Each target's own fields only, so a config diff shows what differs.
    const ConversionSpec& c = s.conversion;
    json conv = {{"enabled", true},
                 {"target", std::string(choiceName(c.target))},
                 {"factorise", std::string(choiceName(c.factorisation()))}};
    if (c.deepseek()) {
      conv["rope_width"] = c.ropeWidth;
      conv["freq_fold"] = c.freqFold;
    } else {
      conv["rope_strategy"] = std::string(choiceName(c.ropeStrategy));
      conv["svd"] = std::string(choiceName(c.svd));
      if (c.layers != "all") conv["layers"] = c.layers;
      if (!c.kvBudget.empty()) conv["kv_budget"] = c.kvBudget;
      conv["two_norm_score"] = std::string(choiceName(c.twoNormScore));
    }
    conv["rope_pairs"] = c.ropePairs;
    conv["d_kv"] = c.dKv;
    conv["calib_sequences"] = c.calibSequences;
    conv["calib_seq_len"] = c.calibSeqLen;
    j["conversion"] = conv;
  }
}

}  // namespace

std::string runSpecToJson(const RunSpec& s) {
  json j = {{"version", s.version},
            {"name", s.name},
            {"kind", std::string(choiceName(s.kind))},
            {"architecture", s.architecture},
            {"model_dir", s.modelDir},
            {"attention", s.attention},
            {"steps", s.steps},
            {"micro_batch", s.microBatch},
            {"grad_accum", s.gradAccum},
            {"precision", std::string(choiceName(s.precision))},
            {"seed", s.seed},
            {"eval_every", s.evalEvery},
            {"eval_batches", s.evalBatches},
            {"checkpoint_every", s.checkpointEvery},
            {"init_std", s.initStd},
            {"zero_init_output", s.zeroInitOutput},
            {"recompute", s.recompute},
            {"zero_stage", s.zeroStage},
            {"device", s.device},
            {"out_dir", s.outDir},
            {"data",
             {{"corpus", s.data.corpus},
              {"text_field", s.data.textField},
              {"tokenizer", s.data.tokenizer},
              {"tokenizer_vocab", s.data.tokenizerVocab},
              {"token_format", std::string(choiceName(s.data.tokenFormat))},
              {"seq_len", s.data.seqLen},
              {"validation_share", s.data.validationShare},
              {"max_corpus_bytes", s.data.maxCorpusBytes}}},
            {"optimizer",
             {{"lr", s.optimizer.lr},
              {"beta1", s.optimizer.beta1},
              {"beta2", s.optimizer.beta2},
              {"eps", s.optimizer.eps},
              {"weight_decay", s.optimizer.weightDecay},
              {"clip", s.optimizer.clip}}},
            {"schedule",
             {{"kind", std::string(choiceName(s.schedule.kind))},
              {"warmup_steps", s.schedule.warmupSteps},
              {"decay_steps", s.schedule.decaySteps},
              {"min_lr_ratio", s.schedule.minLrRatio}}}};
  if (!s.attention.empty()) {
    const AttentionOptions& o = s.attentionOptions;
    j["attention_options"] = {{"gqa_group", o.gqaGroup},
                              {"d_c", o.dC},
                              {"d_rope", o.dRope},
                              {"d_nope", o.dNope},
                              {"d_v", o.dV},
                              {"q_lora_rank", o.qLoraRank},
                              {"scaled", o.scaled},
                              {"match", o.match},
                              {"target_parameters", o.targetParameters},
                              {"match_multiple", o.matchMultiple}};
  }
  writeEvaluation(j, s);
  writeConversion(j, s);
  // Written for every fine-tune (off, or its settings), so that a config diff
  // of a distilled run against a plain one shows the difference.
  if (s.distill.enabled) {
    j["distill"] = {{"enabled", true},
                    {"teacher", s.distill.teacher},
                    {"alpha", s.distill.alpha},
                    {"temperature", s.distill.temperature}};
  } else if (s.kind == RunKind::Finetune || s.kind == RunKind::ConvertFinetune) {
    j["distill"] = {{"enabled", false}};
  }
  return j.dump(2);
}

Precision resolvePrecision(Precision requested, bool cuda) {
  if (requested != Precision::Auto) return requested;
  return cuda ? Precision::Bf16Mixed : Precision::Fp32;
}

double learningRateAt(const OptimizerSpec& opt, const ScheduleSpec& sched, int step, int totalSteps) {
  const double lr0 = opt.lr, lrMin = sched.minLrRatio * opt.lr;
  const int warm = sched.warmupSteps;
  if (warm > 0 && step < warm) return lr0 * static_cast<double>(step + 1) / static_cast<double>(warm);
  if (sched.kind == ScheduleKind::Constant) return lr0;
  if (sched.kind == ScheduleKind::Cosine) {
    const int span = std::max(1, totalSteps - warm);
    const double progress = std::min(1.0, static_cast<double>(step - warm) / static_cast<double>(span));
    return lrMin + 0.5 * (lr0 - lrMin) * (1.0 + std::cos(M_PI * progress));
  }
  // WSD: constant until t_decay, then 1-sqrt decay over the last T_decay steps.
  const int decay = sched.decaySteps > 0 ? sched.decaySteps : std::max(1, totalSteps / 5);
  const int tDecay = totalSteps - decay;
  if (step < tDecay) return lr0;
  const double frac = std::min(1.0, static_cast<double>(step - tDecay) / static_cast<double>(decay));
  return lrMin + (lr0 - lrMin) * (1.0 - std::sqrt(frac));
}

}  // namespace latentlab
