// Fuzz target: the multiple-choice task-file readers (latentlab/task_files.h),
// LatentLab's JSONL and each public benchmark format. The input's first line
// names the format (and, for mmlu, the number of shots); a line "@@extra@@"
// splits off the second file (PIQA's labels, MMLU's dev CSV). The MMLU file is
// named like a subject's test CSV, so the subject is read from its name.
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "latentlab/task_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t eol = input.find('\n');
  if (eol == std::string_view::npos) return 0;
  const std::string_view head = input.substr(0, eol);
  std::string_view body = input.substr(eol + 1), extra;
  const std::size_t split = body.find("\n@@extra@@\n");
  if (split != std::string_view::npos) {
    extra = body.substr(split + 11);
    body = body.substr(0, split);
  }
  const std::string format(head.substr(0, head.find(' ')));
  int shots = 0;
  if (const std::size_t space = head.find(' '); space != std::string_view::npos && space + 1 < head.size())
    shots = (static_cast<unsigned char>(head[space + 1]) - '0') % 6;  // 0 to 5, as a digit or not
  namespace fuzz = latentlab::fuzz;
  const auto main = fuzz::scratchFile("high_school_physics_test.csv",
                                      reinterpret_cast<const std::uint8_t*>(body.data()), body.size());
  std::filesystem::path second;
  if (split != std::string_view::npos)
    second = fuzz::scratchFile("high_school_physics_dev.csv", reinterpret_cast<const std::uint8_t*>(extra.data()),
                               extra.size());
  fuzz::expectValueOrError([&] {
    const auto items = latentlab::readTaskFile(format, main, second, shots);
    for (const auto& item : items) {
      // What the scorer relies on: a gold that indexes a choice, and one
      // context per choice where contexts are given.
      if (item.gold < 0 || static_cast<std::size_t>(item.gold) >= item.choices.size()) std::abort();
      if (!item.contexts.empty() && item.contexts.size() != item.choices.size()) std::abort();
    }
  });
  return 0;
}
