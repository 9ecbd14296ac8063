// Benchmark of zero-shot multiple-choice scoring (the `eval --task` and eval
// job path, ChoiceScorer): seconds per 1,000 four-choice items of ARC-like
// length built from the Python tutorial, for the demo shape and a
// SmolLM-135M-shaped model (random weights, a BPE tokenizer trained on the
// tutorial), batched across items as the engine runs it and one request per
// forward pass for comparison.
#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench_util.h"
#include "io/tokenizer.h"
#include "latentlab/architectures.h"
#include "latentlab/engine.h"
#include "latentlab/multiple_choice.h"

namespace latentlab::bench {
namespace fs = std::filesystem;

namespace {

const char* kTutorial = "/usr/share/doc/python3.11/html/_sources/tutorial";

// Sentences of the tutorial, whitespace collapsed, 20 to 300 characters.
std::vector<std::string> sentences() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kTutorial)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
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

// Item i: a sentence as the context, the next sentence's opening and three
// others' as the choices.
std::vector<ChoiceItem> items(std::size_t n) {
  const auto s = sentences();
  std::vector<ChoiceItem> out;
  for (std::size_t i = 0; i < n; ++i) {
    ChoiceItem item;
    item.context = s[(2 * i) % s.size()];
    for (std::size_t c = 0; c < 4; ++c) item.choices.push_back(" " + s[(2 * i + 1 + 7 * c) % s.size()].substr(0, 40));
    item.gold = 0;
    out.push_back(std::move(item));
  }
  return out;
}

void multipleChoice(BenchReport& report) {
  const bool quick = benchOptions().quick;
  const fs::path root = fs::temp_directory_path() / ("latentlab-bench-eval-" + std::to_string(::getpid()));
  fs::create_directories(root);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kTutorial)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  BpeTrainOptions bpe;
  bpe.vocabSize = 2048;
  NullProgress quiet;
  CancelToken cancel;
  trainBpeTokenizer(files, bpe, root / "tokenizer.json", quiet, cancel);
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
    for (const std::int64_t batchTokens : {std::int64_t{4096}, std::int64_t{1}}) {
      o.batchTokens = batchTokens;
      ChoiceScorer scorer(o);
      scorer.score(std::vector<ChoiceItem>(task.begin(), task.begin() + 5), 0, quiet, cancel);  // warm-up
      const ChoiceEvalResult r = scorer.score(task, 0, quiet, cancel);
      const double per1000 = r.seconds / static_cast<double>(task.size()) * 1000.0;
      report.add({"eval",
                  shape.arch + (batchTokens > 1 ? " multiple choice, batched" : " multiple choice, one request a pass"),
                  per1000, "s/1k items",
                  std::to_string(task.size()) + " four-choice items timed" +
                      (batchTokens > 1 ? ", up to 4096 padded tokens a pass" : "") + "; " + o.device + ", fp32, " +
                      std::to_string(at::get_num_threads()) + " threads"});
    }
  }
  std::error_code ec;
  fs::remove_all(root, ec);
}

}  // namespace

LATENTLAB_BENCH("eval", multipleChoice);

}  // namespace latentlab::bench
