// Official MHA2MLA checkpoints (docs/official_mha2mla.md): the kept pairs of a
// 2-norm checkpoint from its rank or score tensor file, which torch.save wrote.
#pragma once

#include <filesystem>

#include "latentlab/model_config.h"

namespace latentlab {

// cfg (cfg.mla->official set) with cfg.mla->pairs filled: for 2-norm from the
// tensor file config.json names (as written, relative to `dir`, or by its file
// name inside `dir`), selected as the official code selects: format 2 keeps the
// pairs whose rank is below r, format 1 the r pairs of largest score. Throws
// Error naming the file and the problem (missing, unreadable, wrong shape).
ModelConfig resolveOfficialPairs(const ModelConfig& cfg, const std::filesystem::path& dir);

}  // namespace latentlab
