// Benchmark of zero-shot multiple-choice scoring (the `eval --task` and eval
// job path, ChoiceScorer): seconds per 1,000 four-choice items of ARC-like
// length built from the Python tutorial, for the demo shape and a
// SmolLM-135M-shaped model (random weights, a BPE tokenizer trained on the
// tutorial), as the engine runs it (each item's context once, its choices
// continuing the context's KV cache), with every request scored whole
// (batched across items) and one request per forward pass. The peer: the
// SmolLM-135M shape's items scored by the engine's `eval --task` and by
// transformers the way lm-eval's HF backend scores them
// (peers/mc_hf_peer.py), each a process of its own, alternating: wall time
// and peak resident memory.
#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench_process.h"
#include "bench_util.h"
#include "io/tokenizer.h"
#include "latentlab/architectures.h"
#include "latentlab/engine.h"
#include "latentlab/multiple_choice.h"

namespace latentlab::bench {
namespace fs = std::filesystem;

namespace {

// Sentences of the tutorial, whitespace collapsed, 20 to 300 characters.
std::vector<std::string> sentences() {
  const std::vector<fs::path> files = tutorialFiles();
  std::vector<std::string> out;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text, current;
    for (char c : ss.str()) text += (c == '\n' || c == '\t') ? ' ' : c;
    for (char c : text) {
      if (c == ' ' && !current.empty() && current.back() == ' ') continue;
      current += c;
      if (c == '.' || c == '?' || c == '!') {
        while (!current.empty() && current.front() == ' ') current.erase(0, 1);
        if (current.size() >= 20 && current.size() <= 300) out.push_back(current);
        current.clear();
      }
    }
  }
  return out;
}

// Item i: `shots` sentences as the context (1: ARC-like; 8: a few-shot
// prompt of a few hundred tokens), the next sentence's opening and three
// others' as the choices.
std::vector<ChoiceItem> items(std::size_t n, std::size_t shots = 1) {
  const auto s = sentences();
  std::vector<ChoiceItem> out;
  for (std::size_t i = 0; i < n; ++i) {
    ChoiceItem item;
    for (std::size_t k = shots; k-- > 0;)
      item.context += s[(2 * i + s.size() - k) % s.size()] + (k > 0 ? std::string(" ") : std::string());
    for (std::size_t c = 0; c < 4; ++c) item.choices.push_back(" " + s[(2 * i + 1 + 7 * c) % s.size()].substr(0, 40));
    item.gold = 0;
    out.push_back(std::move(item));
  }
  return out;
}

// The engine's `eval --task` and the transformers peer on the same items,
// alternating, two rounds: wall time (start-up and loading included) and
// peak resident memory of each process.
void cliAgainstPeer(BenchReport& report, const fs::path& dir, const std::vector<ChoiceItem>& task,
                    const std::string& what) {
  const fs::path items = dir / "items.jsonl";
  {
    std::ofstream out(items);
    for (const ChoiceItem& item : task)
      out << nlohmann::json{{"context", item.context}, {"choices", item.choices}, {"gold", item.gold}}.dump() << "\n";
  }
  const fs::path log = dir / "child.log";
  const std::vector<std::string> engine = {LATENTLAB_ENGINE_EXE,   "eval",   dir.string(), "--task",
                                           "mc=" + items.string(), "--json", "--quiet"};
  const std::vector<std::string> peer = {LATENTLAB_PYTHON, LATENTLAB_SOURCE_DIR "/tests/bench/peers/mc_hf_peer.py",
                                         dir.string(), items.string()};
  std::vector<ChildRun> ours, theirs;
  for (int round = 0; round < 2; ++round) {
    ours.push_back(runChild(engine, log));
    theirs.push_back(runChild(peer, log));
    if (ours.back().status != 0 || theirs.back().status != 0) {
      report.add({"eval", what + " vs transformers", 0, "skipped",
                  "a process failed: " + (ours.back().status != 0 ? std::string("engine") : std::string("peer")) +
                      " (is transformers installed in the test venv?)"});
      return;
    }
  }
  const auto best = [](const std::vector<ChildRun>& runs) {
    ChildRun b = runs[0];
    for (const auto& r : runs) {
      b.seconds = std::min(b.seconds, r.seconds);
      b.peakMiB = std::max(b.peakMiB, r.peakMiB);
    }
    return b;
  };
  const ChildRun e = best(ours), p = best(theirs);
  const std::string n = std::to_string(task.size()) + " four-choice items, fp32, whole process";
  report.add({"eval", what + ", latentlab-engine eval --task", e.seconds, "s",
              n + "; peak RSS " + fixed(e.peakMiB, 0) + " MiB; best of 2, alternating with the peer"});
  report.add({"eval", what + ", transformers as lm-eval's HF backend", p.seconds, "s",
              n + ", batch 8; peak RSS " + fixed(p.peakMiB, 0) + " MiB; best of 2"});
  report.add({"eval", what + ", engine speed over the peer's", p.seconds / e.seconds, "x",
              "memory " + fixed(e.peakMiB / p.peakMiB, 2) + "x the peer's"});
}

void multipleChoice(BenchReport& report) {
  const bool quick = benchOptions().quick;
  const fs::path root = fs::temp_directory_path() / ("latentlab-bench-eval-" + std::to_string(::getpid()));
  fs::create_directories(root);
  trainTutorialTokenizer(root / "tokenizer.json");
  NullProgress quiet;
  CancelToken cancel;
  struct Shape {
    std::string arch;
    int vocab;
    std::size_t items;
  };
  const std::vector<Shape> shapes = {{"demo-gqa", 2048, quick ? 100u : 1000u}, {"smollm-135m", 0, quick ? 20u : 200u}};
  for (const Shape& shape : shapes) {
    const fs::path dir = root / shape.arch;
    const ModelConfig cfg = builtinArchitecture(shape.arch, shape.vocab);
    initModel(cfg, dir, 3, DType::F32);
    fs::copy_file(root / "tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing);
    const auto task = items(shape.items);
    ChoiceEvalOptions o;
    o.model = dir;
    o.device = benchOptions().device;
    struct Mode {
      const char* name;
      std::int64_t batchTokens, minSharedPrefix;
    };
    const std::int64_t engine = ChoiceEvalOptions{}.minSharedPrefix;
    const std::string asRun = "as the engine runs it (context once from " + std::to_string(engine) + " tokens)";
    for (const Mode& m :
         {Mode{asRun.c_str(), 4096, engine}, Mode{"context once, every item", 4096, 1},
          Mode{"whole requests batched across items", 4096, 0}, Mode{"one whole request a pass", 1, 0}}) {
      o.batchTokens = m.batchTokens;
      o.minSharedPrefix = m.minSharedPrefix;
      ChoiceScorer scorer(o);
      scorer.score(std::vector<ChoiceItem>(task.begin(), task.begin() + 5), 0, quiet, cancel);  // warm-up
      const ChoiceEvalResult r = scorer.score(task, 0, quiet, cancel);
      const double per1000 = r.seconds / static_cast<double>(task.size()) * 1000.0;
      report.add({"eval", shape.arch + " multiple choice, " + m.name, per1000, "s/1k items",
                  std::to_string(task.size()) + " four-choice items timed" +
                      (m.batchTokens > 1 ? ", up to 4096 padded tokens a pass" : "") + "; " + o.device + ", fp32, " +
                      std::to_string(at::get_num_threads()) + " threads"});
    }
    // Few-shot contexts: the context once pays off as it grows.
    const auto fewShot = items(shape.items / 4, 8);
    for (const std::int64_t minShared : {engine, std::int64_t{0}}) {
      o.batchTokens = 4096;
      o.minSharedPrefix = minShared;
      ChoiceScorer scorer(o);
      scorer.score(std::vector<ChoiceItem>(fewShot.begin(), fewShot.begin() + 2), 0, quiet, cancel);  // warm-up
      const ChoiceEvalResult r = scorer.score(fewShot, 0, quiet, cancel);
      report.add({"eval",
                  shape.arch + " multiple choice, 8-sentence contexts, " +
                      (minShared > 0 ? asRun : std::string("whole requests batched")),
                  r.seconds / static_cast<double>(fewShot.size()) * 1000.0, "s/1k items",
                  std::to_string(fewShot.size()) + " four-choice items timed; " + o.device + ", fp32"});
    }
    o.minSharedPrefix = ChoiceEvalOptions{}.minSharedPrefix;
    if (shape.arch == "smollm-135m" && o.device == "cpu") {
      cliAgainstPeer(report, dir, task, shape.arch + " multiple choice");
      cliAgainstPeer(report, dir, std::vector<ChoiceItem>(fewShot.begin(), fewShot.begin() + (quick ? 5 : 20)),
                     shape.arch + " multiple choice, 8-sentence contexts");
    }
  }
  std::error_code ec;
  fs::remove_all(root, ec);
}

}  // namespace

LATENTLAB_BENCH("eval", multipleChoice);

}  // namespace latentlab::bench
