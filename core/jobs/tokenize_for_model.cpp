// Tokenizes a text file with the tokenizer.json next to a model.
#include <filesystem>
#include <vector>

#include "common/file_util.h"
#include "io/tokenizer.h"
#include "latentlab/error.h"
#include "latentlab/model_config.h"

namespace latentlab {
namespace fs = std::filesystem;

std::vector<std::int64_t> tokenizeForModel(const std::filesystem::path& modelDir,
                                           const std::filesystem::path& textFile) {
  const auto tokPath = modelDir / "tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::exists(tokPath, ec)) {
    throw Error(ErrorCode::BadData, tokPath.string() + ": not found; text evaluation needs the model's tokenizer",
                "Copy the model's tokenizer.json into its folder, or pass --tokens FILE.");
  }
  Tokenizer tok = Tokenizer::fromFile(tokPath);
  // Ids beyond the embedding rows cannot be looked up: refused before any text is encoded.
  const fs::path configPath = modelDir / "config.json";
  requireTokenizerFits(tok, readHfConfig(configPath).vocabSize, configPath);
  const std::string text = readTextFile(textFile);
  std::vector<std::int32_t> ids = tok.encode(text, /*addSpecial=*/true);
  return std::vector<std::int64_t>(ids.begin(), ids.end());
}

}  // namespace latentlab
