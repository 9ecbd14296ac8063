// Tokenizes a text file with the tokenizer.json next to a model.
#include <filesystem>
#include <vector>

#include "common/file_util.h"
#include "latentlab/error.h"

namespace latentlab {

std::vector<std::int64_t> tokenizeForModel(const std::filesystem::path& modelDir, const std::filesystem::path& textFile) {
  throw Error(ErrorCode::Unsupported, (modelDir / "tokenizer.json").string() +
              ": text evaluation needs the tokenizer, which this build lacks; pass --tokens FILE");
}

} // namespace latentlab
