// `latentlab-engine eval DIR --passkey FILE`: long-context retrieval.
#include <climits>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_args.h"
#include "engine_cli.h"
#include "latentlab/error.h"
#include "latentlab/passkey.h"

namespace latentlab::cli {
using nlohmann::json;

namespace {

// "1024,2048" -> {1024, 2048}; each element checked like a CLI integer.
template <typename T, typename Parse>
std::vector<T> parseList(const std::string& option, const std::string& text, Parse parse) {
  std::vector<T> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) throw Error(ErrorCode::BadInput, "--" + option + " '" + text + "': an empty element");
    out.push_back(parse(item));
  }
  if (out.empty()) throw Error(ErrorCode::BadInput, "--" + option + ": no values");
  return out;
}

}  // namespace

int evalPasskey(const Args& args) {
  PasskeyOptions o;
  o.model = args.positionals()[0];
  o.haystack = *args.get("passkey");
  o.lengths = parseList<int>("lengths", args.get("lengths", "1024"), [](const std::string& s) {
    return static_cast<int>(parseInteger(s, "--lengths", 16, INT_MAX / 2));
  });
  o.depths = parseList<double>("depths", args.get("depths", "0,0.25,0.5,0.75,1"), [](const std::string& s) {
    std::size_t used = 0;
    double d = -1;
    try {
      d = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || !(d >= 0.0 && d <= 1.0)) {
      throw Error(ErrorCode::BadInput,
                  "--depths '" + s + "': each depth is a number from 0 (the start) to 1 (the end)");
    }
    return d;
  });
  o.trials = args.getInt("trials", 3, 1, kMaxPasskeyTrials);
  o.seed = static_cast<std::uint64_t>(args.getInt64("seed", 0, 0, INT64_MAX));
  o.device = args.get("device", "cpu");
  o.dtype = parseDType(args.get("dtype", "f32"));
  o.kvQuant = readKvQuantFlags(args);
  StderrProgress progress(args.flag("quiet"));
  const PasskeyResult r = runPasskey(o, progress, cancelToken());
  if (args.flag("json")) {
    json cells = json::array();
    for (const PasskeyCell& c : r.cells) {
      json trials = json::array();
      for (const PasskeyTrial& t : c.trials) {
        trials.push_back({{"key", t.key},
                          {"answer", t.answer},
                          {"correct", t.correct},
                          {"key_position", t.keyPosition},
                          {"prompt_tokens", t.promptTokens}});
      }
      cells.push_back({{"length", c.length},
                       {"depth", c.depth},
                       {"correct", c.correct()},
                       {"trials", static_cast<int>(c.trials.size())},
                       {"runs", trials}});
    }
    std::cout << json{{"task", "passkey"}, {"haystack", o.haystack.string()}, {"cells", cells}}.dump() << "\n";
    return 0;
  }
  // Depths down, lengths across: the share of keys repeated exactly.
  std::printf("passkey retrieval, exact match over %d key(s) a cell\n%-8s", o.trials, "depth");
  for (int length : o.lengths) std::printf(" %8d", length);
  std::printf("  (prompt tokens)\n");
  for (std::size_t d = 0; d < o.depths.size(); ++d) {
    std::printf("%6.0f%% ", 100.0 * o.depths[d]);
    for (std::size_t l = 0; l < o.lengths.size(); ++l) {
      const PasskeyCell& c = r.cells[l * o.depths.size() + d];
      std::printf(" %7.0f%%", 100.0 * c.correct() / static_cast<double>(c.trials.size()));
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace latentlab::cli
