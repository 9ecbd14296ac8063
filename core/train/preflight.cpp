// preflightRunSpec: the checks a spec must pass before a run is registered,
// reading only what is cheap (config.json, safetensors headers, file names).
#include <algorithm>

#include "latentlab/architectures.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "latentlab/kv_budget.h"
#include "latentlab/multiple_choice.h"
#include "latentlab/passkey.h"
#include "latentlab/train.h"
#include "train/checkpoint.h"

namespace latentlab {
namespace fs = std::filesystem;

void preflightEvalModel(const fs::path& modelDir, const RunSpec& spec, const std::string& source) {
  auto bad = [&](const std::string& field, const std::string& problem) {
    throw Error(ErrorCode::BadSpec, source + ": " + field + " " + problem);
  };
  std::error_code ec;
  const std::string dir = modelDir.string();
  if (!fs::is_directory(modelDir, ec)) bad("model_dir", "'" + dir + "' is not a folder");
  const ModelSummary model = inspectModel(modelDir);  // config.json and every weight's header
  const int context = model.config.maxPositionEmbeddings;
  for (std::size_t k = 0; k < spec.passkey.lengths.size() && !spec.passkey.file.empty(); ++k) {
    if (spec.passkey.lengths[k] + kPasskeyAnswerTokens > context) {
      bad("passkey.lengths[" + std::to_string(k) + "]",
          std::to_string(spec.passkey.lengths[k]) + " with the " + std::to_string(kPasskeyAnswerTokens) +
              " answer tokens exceeds the model's context of " + std::to_string(context) + " (" + dir +
              "/config.json max_position_embeddings)");
    }
  }
  if (!spec.heldOut.text.empty() && spec.heldOut.seqLen > context) {
    bad("held_out.seq_len", std::to_string(spec.heldOut.seqLen) + " exceeds the model's context of " +
                                std::to_string(context) + " (" + dir + "/config.json max_position_embeddings)");
  }
  if (!fs::is_regular_file(modelDir / "tokenizer.json", ec))
    bad("model_dir", "'" + dir + "' has no tokenizer.json; evaluation needs the model's tokenizer");
}

void preflightRunSpec(const RunSpec& spec, const std::string& source, const fs::path& workspace) {
  auto bad = [&](const std::string& field, const std::string& problem, const std::string& hint = {}) {
    throw Error(ErrorCode::BadSpec, source + ": " + field + " " + problem, hint);
  };
  std::error_code ec;
  if (spec.kind == RunKind::Pretrain) {
    const auto names = builtinArchitectureNames();
    if (std::find(names.begin(), names.end(), spec.architecture) == names.end()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      bad("architecture", "'" + spec.architecture + "' is not a built-in architecture", "Use one of " + list + ".");
    }
  } else if (spec.kind == RunKind::Eval) {
    // Without model_dir the model is the evaluated run's checkpoint, found
    // (and checked the same way) when the job starts.
    if (!spec.modelDir.empty()) preflightEvalModel(spec.modelDir, spec, source);
    if (!spec.passkey.file.empty() && !fs::is_regular_file(spec.passkey.file, ec))
      bad("passkey.file", "'" + spec.passkey.file + "' is not a file");
    for (std::size_t k = 0; k < spec.evalTasks.size(); ++k) {
      const EvalTaskSpec& t = spec.evalTasks[k];
      if (!fs::is_regular_file(t.file, ec))
        bad("eval_tasks[" + std::to_string(k) + "].file", "'" + t.file + "' is not a file");
      readTaskFile(t);  // a bad line names itself
    }
    if (!spec.heldOut.text.empty() && spec.heldOut.text != "validation" && !fs::is_regular_file(spec.heldOut.text, ec))
      bad("held_out.text", "'" + spec.heldOut.text + "' is not a file (or \"validation\")");
    return;
  } else {
    if (!fs::is_directory(spec.modelDir, ec)) bad("model_dir", "'" + spec.modelDir + "' is not a folder");
    const ModelSummary model = inspectModel(spec.modelDir);  // config.json and every weight's header
    if (spec.conversion.enabled) {
      const KvSettings kv = kvSettingsFor(spec.conversion);
      if (model.config.mla || model.config.latent) {
        bad("model_dir",
            "'" + spec.modelDir + "' is already a latent-attention model; conversion needs an MHA/GQA model");
      }
      if (auto why = checkKvSettings(model.config, kv))
        bad("conversion", "is impossible for " + spec.modelDir + ": " + *why);
    }
  }
  if (spec.data.tokenFormat == TokenFormat::Text && spec.data.corpus != "demo" && !fs::exists(spec.data.corpus, ec))
    bad("data.corpus", "'" + spec.data.corpus + "' does not exist");
  if (spec.data.tokenFormat != TokenFormat::Text && !fs::is_regular_file(spec.data.corpus, ec))
    bad("data.corpus", "'" + spec.data.corpus + "' is not a token file");
  if (!spec.data.tokenizer.empty() && !fs::is_regular_file(spec.data.tokenizer, ec))
    bad("data.tokenizer", "'" + spec.data.tokenizer + "' is not a file");
  for (std::size_t k = 0; k < spec.evalTasks.size(); ++k) {
    if (!fs::is_regular_file(spec.evalTasks[k].file, ec))
      bad("eval_tasks[" + std::to_string(k) + "].file", "'" + spec.evalTasks[k].file + "' is not a file");
  }
  if (!spec.outDir.empty()) requireFreeRunDir(resolveRunDir(spec.outDir, workspace, 0));
}

}  // namespace latentlab
