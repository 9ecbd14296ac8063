// Multiple-choice items and the task files they are read from: LatentLab's
// JSONL and the public benchmarks' files, turned into items with
// lm-evaluation-harness's prompts (docs/evaluation.md). No LibTorch here: the
// readers are fuzzed on their own (tests/fuzz).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "latentlab/run_spec.h"

namespace latentlab {

struct ChoiceItem {
  std::string context;
  std::vector<std::string> choices;  // appended to the context as written (" Paris")
  int gold = 0;
  // Partial scoring (WinoGrande): one context per choice, each followed by
  // its entry of `choices` (the same continuation for all).
  std::vector<std::string> contexts;
};

// {"context": str, "choices": [str, ...], "gold": int} one a line; errors name
// the file, the line and the field.
std::vector<ChoiceItem> readChoiceItems(const std::filesystem::path& jsonl);

// The public files of the papers' zero-shot benchmarks, turned into items
// with lm-evaluation-harness's prompts (docs/evaluation.md):
//   arc         ARC-Easy / ARC-Challenge JSONL: "Question: {stem}\nAnswer:", " {choice}"
//   openbookqa  OpenBookQA JSONL (the ARC schema): "{stem}", " {choice}"
//   hellaswag   HellaSwag JSONL: "{activity}: {ctx_a} {Ctx_b}" and " {ending}", cleaned of WikiHow brackets
//   piqa        PIQA JSONL with its labels file: "Question: {goal}\nAnswer:", " {sol1}" / " {sol2}"
//   winogrande  WinoGrande JSONL, partial scoring: contexts "{sentence before _}{option}", the
//               continuation " {sentence after _}"
//   mmlu        an MMLU subject's CSV (question, A, B, C, D, answer): "The following are multiple
//               choice questions (with answers) about {subject}.\n\n", `shots` solved examples of
//               its dev CSV, "{question}\nA. ..\nD. ..\nAnswer:", choices " A" .. " D"
//   jsonl       LatentLab's own {"context", "choices", "gold"} format
// `extra` is PIQA's labels file (one 0/1 a line) or MMLU's dev CSV (for shots > 0).
std::vector<ChoiceItem> readTaskFile(TaskFormat format, const std::filesystem::path& path,
                                     const std::filesystem::path& extra = {}, int shots = 0);
// The same with the format by name (the command line's --format): an unknown
// name is Error(BadInput) listing the formats.
std::vector<ChoiceItem> readTaskFile(const std::string& format, const std::filesystem::path& path,
                                     const std::filesystem::path& extra = {}, int shots = 0);

// A run spec's task: its file in its format (with piqa's labels or mmlu's dev CSV).
std::vector<ChoiceItem> readTaskFile(const EvalTaskSpec& task);

}  // namespace latentlab
