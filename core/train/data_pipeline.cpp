// Corpus -> tokenizer -> cached token shard.
#include "train/data_pipeline.h"

#include "data/corpus.h"
#include "io/tokenizer.h"
#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {

Corpus openCorpus(const DataSpec& data) {
  if (data.corpus == "demo") return defaultDemoCorpus();
  CorpusOptions opts;
  const fs::path p(data.corpus);
  if (p.extension() == ".jsonl") {
    opts.format = CorpusFormat::Jsonl;
    opts.jsonField = data.textField;
    opts.extensions = {".jsonl"};
  } else if (fs::is_directory(p)) {
    opts.extensions = {".txt", ".md", ".rst", ".text"};
  }
  return Corpus::open(p, opts);
}

}  // namespace

PreparedData prepareData(const DataSpec& data, const fs::path& modelDir, const fs::path& cacheDir,
                         ProgressSink& progress, const CancelToken& cancel, const ModelVocab& model) {
  PreparedData out;
  std::error_code ec;
  fs::create_directories(cacheDir, ec);
  if (ec) throw Error(ErrorCode::Io, cacheDir.string() + ": cannot create cache folder: " + ec.message());

  if (data.tokenFormat != TokenFormat::Text) {
    out.shard =
        TokenShard::open(data.corpus, data.tokenFormat == TokenFormat::U32 ? ShardLayout::RawU32 : ShardLayout::RawU16);
    return out;
  }
  const Corpus corpus = openCorpus(data);
  if (!data.tokenizer.empty()) {
    out.tokenizerPath = data.tokenizer;
  } else if (!modelDir.empty() && fs::exists(fs::path(modelDir) / "tokenizer.json", ec)) {
    out.tokenizerPath = fs::path(modelDir) / "tokenizer.json";
  } else {
    // Train (once) a byte-level BPE tokenizer on the corpus itself.
    out.tokenizerPath =
        cacheDir / ("tokenizer-" + corpus.fingerprint() + "-" + std::to_string(data.tokenizerVocab) + ".json");
    if (!fs::exists(out.tokenizerPath, ec)) {
      progress.log(LogLevel::Info, "training a " + std::to_string(data.tokenizerVocab) + "-token BPE tokenizer on " +
                                       corpus.root().string());
      std::vector<fs::path> files;
      for (const auto& f : corpus.files()) files.push_back(f.path);
      BpeTrainOptions opts;
      opts.vocabSize = data.tokenizerVocab;
      trainBpeTokenizer(files, opts, out.tokenizerPath, progress, cancel);
    }
  }
  Tokenizer tok = Tokenizer::fromFile(out.tokenizerPath);
  out.vocabSize = static_cast<std::uint32_t>(tok.vocabSize());
  if (model.size > 0) requireTokenizerFits(tok, model.size, model.source);
  auto eos = tok.eosId();
  if (!eos) {
    throw Error(ErrorCode::BadData, out.tokenizerPath.string() + ": the tokenizer has no end-of-text token",
                "Documents are separated by EOS; add one (e.g. <|endoftext|>) to added_tokens.");
  }
  out.eosId = *eos;
  const fs::path shardPath = cacheDir / ("tokens-" + corpus.fingerprint() + "-" + tok.hash().substr(0, 16) + ".bin");
  EncodeFn encode = [&tok](std::string_view text, std::vector<std::int32_t>& ids) { ids = tok.encode(text, false); };
  ShardBuildReport report =
      buildOrReuseShard(corpus, encode, tok.hash(), out.vocabSize, out.eosId, shardPath, progress, cancel);
  if (report.rebuilt) {
    progress.log(LogLevel::Info, "tokenized " + std::to_string(report.sourceBytes) + " bytes into " +
                                     std::to_string(report.header.count) + " tokens (" +
                                     std::to_string(report.bytesPerSecond / 1e6) + " MB/s)");
  }
  out.rebuilt = report.rebuilt;
  out.tokenizeSeconds = report.seconds;
  out.shard = TokenShard::open(shardPath);
  return out;
}

}  // namespace latentlab
