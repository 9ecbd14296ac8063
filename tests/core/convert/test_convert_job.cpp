// convert() on model folders: the output reopens with identical logits, and
// impossible requests fail with a clear error before anything is written; the
// DeepSeek target through the same job.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include "common/file_util.h"
#include "convert_test_util.h"
#include "latentlab/convert.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "model/weights.h"
#include "test_support.h"

namespace latentlab::test {
namespace fs = std::filesystem;

namespace {

fs::path savedBase(const std::string& name, TinyShape s = {}) {
  auto dir = scratchDir(name) / "base";
  auto model = randomModel(tinyConfig(s), torch::kFloat32, 31);
  saveModel(*model, dir, DType::F32);
  return dir;
}

fs::path writeTokens(const fs::path& file, int count, int vocab) {
  std::ofstream out(file, std::ios::binary);
  for (int i = 0; i < count; ++i) {
    const std::uint16_t v = static_cast<std::uint16_t>((i * 37 + 11) % vocab);
    out.put(static_cast<char>(v & 0xff));
    out.put(static_cast<char>(v >> 8));
  }
  return file;
}

// rope: a strategy's name ("" keeps the default).
ConvertSpec spec(const fs::path& base, const fs::path& out, const std::string& rope, int r, int dKv) {
  ConvertSpec s;
  s.modelDir = base;
  s.outDir = out;
  if (!rope.empty()) s.ropeStrategy = parseChoice<RopeStrategy>(rope, "test rope");
  s.ropePairs = r;
  s.dKv = dKv;
  return s;
}

// Expects convert(spec) to throw Error with `code` and a message containing
// `needle`, and `spec.outDir` not to appear.
void expectRejected(const ConvertSpec& s, ErrorCode code, const std::string& needle) {
  NullProgress progress;
  CancelToken cancel;
  const bool existed = fs::exists(s.outDir);
  try {
    convert(s, progress, cancel);
    ADD_FAILURE() << "no error for " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.message();
    EXPECT_NE(e.message().find(needle), std::string::npos) << e.message();
  }
  EXPECT_EQ(fs::exists(s.outDir), existed) << needle;
  for (const auto& entry : fs::directory_iterator(s.outDir.parent_path())) {
    EXPECT_EQ(entry.path().filename().string().find("partial"), std::string::npos);
  }
}

}  // namespace

TEST(ConvertJob, ConvertedFolderReopensWithIdenticalLogits) {
  auto base = savedBase("convert_roundtrip", {.kvHeads = 2, .attentionBias = true});
  auto out = base.parent_path() / "mla";
  NullProgress progress;
  CancelToken cancel;
  auto s = spec(base, out, "2-norm", 2, 6);
  s.calibration.dataFile = writeTokens(base.parent_path() / "calib.u16", 400, 128);
  s.calibration.numSequences = 6;
  s.calibration.seqLen = 32;
  auto report = convert(s, progress, cancel);
  EXPECT_EQ(report.calibrationTokens, 6 * 32);
  EXPECT_EQ(report.reconstructionError.size(), 2u);
  EXPECT_GT(report.meanReconstructionError, 0.0);
  EXPECT_EQ(report.after.perTokenPerLayer, 2 * (4 + 6));
  EXPECT_EQ(report.before.perTokenPerLayer, 2 * 2 * 16);
  EXPECT_EQ(report.mla.ropeStrategy, RopeStrategy::TwoNorm);
  EXPECT_EQ(report.mla.twoNormScore, TwoNormScore::Product);
  EXPECT_FALSE(report.pairsSummary.empty());

  // The same conversion in memory, then the folder, agree.
  auto original = loadModel(base, torch::kCPU, torch::kFloat32);
  std::vector<torch::Tensor> calib;
  {
    auto folder = loadModel(out, torch::kCPU, torch::kFloat32);
    EXPECT_EQ(folder->config().mla->pairs, report.mla.pairs);
    std::int64_t parameters = 0;
    for (const auto& p : folder->parameters()) parameters += p.numel();
    EXPECT_EQ(report.parametersAfter, parameters);
    EXPECT_LT(report.parametersAfter, report.parametersBefore);
    ConversionOptions o = mlaOptions(RopeStrategy::TwoNorm, 2, 6);
    std::vector<std::int64_t> ids;
    for (int i = 0; i < 6 * 32; ++i) ids.push_back((i * 37 + 11) % 128);
    calib.push_back(torch::tensor(ids, torch::kInt64).view({6, 32}).narrow(0, 0, 4));
    calib.push_back(torch::tensor(ids, torch::kInt64).view({6, 32}).narrow(0, 4, 2));
    auto memory = convertModel(*original, o, calib);
    torch::NoGradGuard g;
    auto tokens = torch::randint(0, 128, {2, 16}, torch::kInt64);
    EXPECT_LT(maxAbsDiff(folder->forward(tokens), memory->forward(tokens)), 1e-5);

    // saveModel / loadModel of a converted model is exact.
    auto again = base.parent_path() / "mla_again";
    saveModel(*folder, again, DType::F32);
    auto reopened = loadModel(again, torch::kCPU, torch::kFloat32);
    EXPECT_EQ(maxAbsDiff(reopened->forward(tokens), folder->forward(tokens)), 0.0);
  }
  // inspect reads the converted folder and its budget.
  auto summary = inspectModel(out);
  ASSERT_TRUE(summary.config.mla.has_value());
  EXPECT_EQ(summary.kv.perTokenPerLayer, report.after.perTokenPerLayer);
  EXPECT_TRUE(summary.unusedKeys.empty());
}

TEST(ConvertJob, ImpossibleRequestsWriteNothing) {
  auto base = savedBase("convert_bad", {.kvHeads = 2});  // d_h 16: 8 pairs; d 64
  auto out = base.parent_path() / "out";
  expectRejected(spec(base, out, "high", 9, 4), ErrorCode::BadInput, "exceeds d_h/2");
  expectRejected(spec(base, out, "high", -1, 4), ErrorCode::BadInput, "at least 1");
  expectRejected(spec(base, out, "uniform", 3, 4), ErrorCode::BadInput, "S_uniform");
  expectRejected(spec(base, out, "high", 2, 29), ErrorCode::BadInput, "d_kv = 29");
  expectRejected(spec(base, out, "high", 2, 0), ErrorCode::BadInput, "d_kv must be at least 1");
  expectRejected(spec(base, out, "2-norm", 2, 4), ErrorCode::BadInput, "calibration");
  auto missing = spec(base, out, "2-norm", 2, 4);
  missing.calibration.dataFile = base.parent_path() / "nope.u16";
  expectRejected(missing, ErrorCode::BadInput, "not found");
  auto shortData = spec(base, out, "2-norm", 2, 4);
  shortData.calibration.dataFile = writeTokens(base.parent_path() / "short.u16", 10, 128);
  shortData.calibration.seqLen = 32;
  expectRejected(shortData, ErrorCode::BadData, "fewer than one calibration sequence");
  // Unknown names (a strategy "sideways", an SVD "triple") are refused where
  // they enter: EngineCli.ConvertRefusesUnknownChoicesNamingTheFlag.
  auto fullSplit = spec(base, out, "full", 0, 4);
  fullSplit.svd = SvdMethod::Split;
  expectRejected(fullSplit, ErrorCode::BadInput, "SVD_split");

  // An existing output folder is kept unless force.
  fs::create_directories(out);
  std::ofstream(out / "config.json") << "{}";
  expectRejected(spec(base, out, "high", 2, 4), ErrorCode::BadInput, "already exists");
  EXPECT_TRUE(fs::exists(out / "config.json"));
  // A converted model cannot be converted again.
  auto converted = base.parent_path() / "converted";
  NullProgress progress;
  CancelToken cancel;
  convert(spec(base, converted, "high", 2, 4), progress, cancel);
  expectRejected(spec(converted, base.parent_path() / "twice", "high", 2, 4), ErrorCode::BadInput,
                 "already MLA-converted");
  // Cancelled before saving: nothing written.
  CancelToken stop;
  stop.request();
  auto cancelledOut = base.parent_path() / "cancelled";
  EXPECT_THROW(convert(spec(base, cancelledOut, "high", 2, 4), progress, stop), Error);
  EXPECT_FALSE(fs::exists(cancelledOut));
  // checkConvertSpec previews the budget with the same validation.
  EXPECT_EQ(checkConvertSpec(spec(base, base.parent_path() / "preview", "low", 2, 4)).perTokenPerLayer, 2 * (4 + 4));
  EXPECT_THROW(checkConvertSpec(spec(base, base.parent_path() / "preview", "low", 2, 99)), Error);
}

TEST(ConvertJob, ForceReplacesAnExistingModelFolder) {
  auto base = savedBase("convert_force", {.kvHeads = 4});
  auto out = base.parent_path() / "out";
  NullProgress progress;
  CancelToken cancel;
  convert(spec(base, out, "high", 2, 4), progress, cancel);
  auto s = spec(base, out, "uniform", 4, 8);
  s.svd = SvdMethod::Split;
  s.force = true;
  auto report = convert(s, progress, cancel);
  auto cfg = readHfConfig(out / "config.json");
  ASSERT_TRUE(cfg.mla.has_value());
  EXPECT_EQ(cfg.mla->ropeStrategy, RopeStrategy::Uniform);
  EXPECT_EQ(cfg.mla->svdMethod, SvdMethod::Split);
  EXPECT_EQ(cfg.mla->pairs[0][0], (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(report.after.perTokenPerLayer, 4 * (8 + 16));
  // --force never replaces the input model or a folder that is not a model.
  auto self = spec(base, base, "high", 2, 4);
  self.force = true;
  expectRejected(self, ErrorCode::BadInput, "is the input model");
  auto other = base.parent_path() / "notes";
  fs::create_directories(other);
  std::ofstream(other / "todo.txt") << "keep me";
  auto notModel = spec(base, other, "high", 2, 4);
  notModel.force = true;
  expectRejected(notModel, ErrorCode::BadInput, "not a model folder");
  EXPECT_TRUE(fs::exists(other / "todo.txt"));
}

namespace {

// Every file under `dir` with its bytes.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    out[fs::relative(e.path(), dir).string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return out;
}

// Siblings a write leaves behind (temporary, partial or old folders).
std::vector<std::string> leftovers(const fs::path& parent) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(parent)) {
    const std::string name = e.path().filename().string();
    for (const char* mark : {".writing-", ".partial-", ".tmp.", ".old-", ".replaced-"})
      if (name.find(mark) != std::string::npos) out.push_back(name);
  }
  return out;
}

// chattr +i / -i on `path`, where the filesystem and the user allow it.
bool setImmutable(const fs::path& path, bool on) {
  const std::string cmd = std::string("chattr ") + (on ? "+i " : "-i ") + "'" + path.string() + "' 2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

// --force swaps the new folder in by renames: a folder that cannot be written
// beside the old one (its parent immutable) fails with the old folder byte
// for byte as it was and nothing left behind; an old folder holding a file
// that cannot be deleted is replaced all the same, what remains of it set
// aside and said.
TEST(ConvertJob, ForceNeverDeletesTheOldFolderBeforeTheNewOneIsInPlace) {
  auto base = savedBase("convert_force_immutable", {.kvHeads = 4});
  auto root = base.parent_path() / "models";
  auto out = root / "out";
  fs::create_directories(root);
  NullProgress progress;
  CancelToken cancel;
  convert(spec(base, out, "high", 2, 4), progress, cancel);
  std::ofstream(out / "tokenizer.json") << "{}";
  const auto before = snapshot(out);
  if (!setImmutable(root, true)) GTEST_SKIP() << "chattr +i is not permitted here (needs root on ext4/xfs)";
  auto again = spec(base, out, "uniform", 4, 8);
  again.force = true;
  EXPECT_THROW(convert(again, progress, cancel), Error);
  setImmutable(root, false);
  EXPECT_EQ(snapshot(out), before) << "the old folder changed";
  EXPECT_TRUE(leftovers(root).empty());
  // An immutable file inside the old folder: the replace succeeds, the file stays aside.
  ASSERT_TRUE(setImmutable(out / "tokenizer.json", true));
  struct LogSink final : ProgressSink {
    std::string warnings;
    void progress(std::string_view, double, double, std::string_view) override {}
    void log(LogLevel level, std::string_view m) override {
      if (level == LogLevel::Warning) warnings += std::string(m);
    }
  } sink;
  convert(again, sink, cancel);
  EXPECT_EQ(readHfConfig(out / "config.json").mla->ropeStrategy, RopeStrategy::Uniform);
  EXPECT_NE(sink.warnings.find("could not be removed"), std::string::npos) << sink.warnings;
  // What is left is named as the replaced model, not as an unfinished write.
  const auto left = leftovers(root);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind("out.replaced-", 0), 0u) << left[0];
  EXPECT_NE(sink.warnings.find(left[0]), std::string::npos) << sink.warnings;
  for (const auto& name : left) {
    setImmutable(root / name / "tokenizer.json", false);
    fs::remove_all(root / name);
  }
}

// A disk that fills while the folder is written (the weights, then the
// tokenizer files) leaves no target folder and says "disk full"; with --force
// the old folder stays as it was.
TEST(ConvertJob, AFullDiskLeavesNoFolderAndKeepsTheOldOne) {
  auto base = savedBase("convert_full_disk", {.kvHeads = 4});
  std::ofstream(base / "tokenizer.json") << std::string(200000, 'x');
  auto out = base.parent_path() / "out";
  NullProgress progress;
  CancelToken cancel;
  // Enough for the weights and config.json, not for the tokenizer.
  const auto weights = fs::file_size(base / "model.safetensors");
  for (bool force : {false, true}) {
    std::map<std::string, std::string> before;
    if (force) {
      convert(spec(base, out, "high", 2, 4), progress, cancel);
      before = snapshot(out);
    }
    auto s = spec(base, out, "low", 2, 4);
    s.force = force;
    setWriteBudgetForTesting(static_cast<long long>(weights) + 50000);
    try {
      convert(s, progress, cancel);
      ADD_FAILURE() << "no error on a full disk";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("disk full"), std::string::npos) << e.message();
    }
    setWriteBudgetForTesting(-1);
    if (force) {
      EXPECT_EQ(snapshot(out), before);
    } else {
      EXPECT_FALSE(fs::exists(out));
    }
    EXPECT_TRUE(leftovers(base.parent_path()).empty());
  }
}

// A real filesystem that fills: a 3 MiB tmpfs (where mounting is permitted).
TEST(ConvertJob, AFullTmpfsLeavesNoFolder) {
  auto base = savedBase("convert_tmpfs", {.kvHeads = 4});
  std::ofstream(base / "tokenizer.json") << std::string(3 << 20, 'x');
  const auto mnt = base.parent_path() / "small";
  fs::create_directories(mnt);
  if (std::system(("mount -t tmpfs -o size=3m tmpfs '" + mnt.string() + "' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "mounting a tmpfs is not permitted here; the write-budget test covers the same path";
  }
  NullProgress progress;
  CancelToken cancel;
  try {
    convert(spec(base, mnt / "out", "high", 2, 4), progress, cancel);
    ADD_FAILURE() << "no error on a full tmpfs";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("disk full"), std::string::npos) << e.message();
  }
  EXPECT_FALSE(fs::exists(mnt / "out"));
  EXPECT_TRUE(leftovers(mnt).empty());
  std::system(("umount '" + mnt.string() + "'").c_str());
}

// Links in a model folder that lead out of it (a secret, /proc) are refused
// naming the link, and nothing of them is written.
TEST(ConvertJob, LinksOutOfTheModelFolderAreNotCopied) {
  auto base = savedBase("convert_links", {.kvHeads = 4});
  const fs::path secret = base.parent_path() / "secret.txt";
  std::ofstream(secret) << "password=hunter2";
  NullProgress progress;
  CancelToken cancel;
  for (const auto& [name, target] : std::vector<std::pair<std::string, fs::path>>{
           {"tokenizer.json", secret}, {"generation_config.json", "/proc/self/environ"}}) {
    fs::create_symlink(target, base / name);
    auto out = base.parent_path() / ("out-" + name);
    try {
      convert(spec(base, out, "high", 2, 4), progress, cancel);
      ADD_FAILURE() << name << ": a link out of the folder was copied";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find(name), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("outside the model folder"), std::string::npos) << e.message();
    }
    EXPECT_FALSE(fs::exists(out));
    fs::remove(base / name);
  }
  // A link inside the folder is fine, and a Hugging Face cache snapshot's links into its blobs.
  std::ofstream(base / "real-tokenizer.json") << "{}";
  fs::create_symlink("real-tokenizer.json", base / "tokenizer.json");
  convert(spec(base, base.parent_path() / "out-inside", "high", 2, 4), progress, cancel);
  EXPECT_EQ(readTextFile(base.parent_path() / "out-inside" / "tokenizer.json"), "{}");
}

}  // namespace latentlab::test

namespace latentlab::test {

TEST(ConvertJob, DeepSeekTargetFromTextReportsBothErrorsAndTheHeldOutLoss) {
  const fs::path root = scratchDir("convert-deepseek-job");
  const fs::path base = root / "base";
  writeSmallTextModel(base);  // demo-gqa with a BPE tokenizer trained on the Python tutorial
  const fs::path docs = "/usr/share/doc/python3.11/html/_sources/tutorial";
  std::map<std::string, ConvertReport> reports;
  for (const std::string factorise : {"weights", "activations"}) {
    ConvertSpec s = spec(base, root / ("ds-" + factorise), "", 0, 4);
    s.target = ConversionTarget::DeepSeek;
    s.factorise = parseChoice<Factorisation>(factorise, "test factorise");
    s.calibration.dataFile = docs / "controlflow.rst.txt";
    s.calibration.format = TokenFormat::Text;
    s.calibration.numSequences = 8;
    s.calibration.seqLen = 64;
    s.heldOutText = docs / "datastructures.rst.txt";
    s.force = true;
    NullProgress progress;
    CancelToken cancel;
    reports[factorise] = convert(s, progress, cancel);
  }
  const ModelConfig cfg = readHfConfig(base / "config.json");
  for (const auto& [name, r] : reports) {
    EXPECT_EQ(r.target, ConversionTarget::DeepSeek);
    EXPECT_EQ(r.factorise, parseChoice<Factorisation>(name, "test factorise"));
    ASSERT_EQ(static_cast<int>(r.activationError.size()), cfg.numLayers) << name;
    ASSERT_EQ(static_cast<int>(r.ropeEnergyKept.size()), cfg.numLayers) << name;
    // The default d_R is the MHA2MLA cache's RoPE dims at the default r: equal KV elements.
    const int r0 = defaultRopePairs(cfg.headDim);
    EXPECT_EQ(r.after.perTokenPerLayer, cfg.numKvHeads * 4 + 2 * r0 * cfg.numKvHeads) << name;
    EXPECT_GT(r.heldOutTokens, 0);
    EXPECT_TRUE(std::isfinite(r.heldOutLossBefore) && std::isfinite(r.heldOutLossAfter)) << name;
    EXPECT_GT(r.heldOutLossAfter, 0.0);
    // The folder reopens as DeepSeek-V3 attention with the report's figures.
    const ModelConfig out = readHfConfig(r.outDir / "config.json");
    ASSERT_TRUE(out.latent.has_value());
    EXPECT_EQ(out.latent->dC, r.latent.dC);
    EXPECT_EQ(out.latent->conversion->factorise, parseChoice<Factorisation>(name, "test factorise"));
    EXPECT_TRUE(fs::exists(r.outDir / "tokenizer.json"));
    EXPECT_FALSE(deepSeekExportProblem(out).has_value()) << *deepSeekExportProblem(out);
  }
  EXPECT_EQ(reports["weights"].heldOutLossBefore, reports["activations"].heldOutLossBefore);
  // eval's logits file holds the converted model's own forward of the first window.
  EvalOptions e;
  e.model = reports["activations"].outDir;
  e.textFile = docs / "datastructures.rst.txt";
  e.seqLen = 24;
  e.maxTokens = 48;
  e.logitsOut = root / "first-window.logits";
  NullProgress quiet;
  CancelToken cancel;
  evaluate(e, quiet, cancel);
  std::ifstream idsIn(root / "first-window.logits.ids", std::ios::binary);
  std::vector<std::int64_t> firstIds(24);
  idsIn.read(reinterpret_cast<char*>(firstIds.data()), 24 * sizeof(std::int64_t));
  ASSERT_TRUE(idsIn.good());
  auto model = loadModel(e.model, torch::kCPU, torch::kFloat32);
  torch::NoGradGuard g;
  auto expected = model->forward(torch::tensor(firstIds, torch::kInt64).view({1, 24}))[0];
  auto written = readRawFloat(root / "first-window.logits", {24, model->config().vocabSize});
  EXPECT_LT(maxAbsDiff(written, expected), 1e-6);
  for (int l = 0; l < cfg.numLayers; ++l) {
    EXPECT_LT(reports["activations"].activationError[static_cast<std::size_t>(l)],
              reports["weights"].activationError[static_cast<std::size_t>(l)])
        << "layer " << l;
  }
}

TEST(ConvertJob, DeepSeekTargetRefusalsWriteNothing) {
  const fs::path base = savedBase("convert-deepseek-refuse");
  ConvertSpec noData = spec(base, base.parent_path() / "out", "", 0, 4);
  noData.target = ConversionTarget::DeepSeek;
  expectRejected(noData, ErrorCode::BadInput, "needs calibration data");
  ConvertSpec split = noData;
  split.svd = SvdMethod::Split;
  expectRejected(split, ErrorCode::BadInput, "SVD_split");
  ConvertSpec fold = noData;
  fold.calibration.dataFile = writeTokens(base.parent_path() / "calib.u16", 400, 128);
  fold.freqFold = 3;  // d_h/2 = 8 pairs
  expectRejected(fold, ErrorCode::BadInput, "fold");
  // An unknown target ("deepseek-v2") is refused by the command line:
  // EngineCli.ConvertRefusesUnknownChoicesNamingTheFlag.
  ConvertSpec actsNoData = spec(base, base.parent_path() / "out", "high", 2, 4);
  actsNoData.factorise = Factorisation::Activations;
  expectRejected(actsNoData, ErrorCode::BadInput, "calibration");
}

}  // namespace latentlab::test
