// The conversion step of convert-finetune runs.
#include <nlohmann/json.hpp>

#include "data/token_shard.h"
#include "latentlab/error.h"
#include "latentlab/run_spec.h"
#include "model/llama.h"

namespace latentlab {

std::shared_ptr<CausalLm> convertForRun(CausalLm& base, const ConversionSpec& conv, const TokenShard& calibration,
                                        ProgressSink& progress, const CancelToken& cancel, nlohmann::json& notes) {
  throw Error(ErrorCode::Unsupported, "spec.conversion: MHA2MLA conversion is not available in this build");
}

} // namespace latentlab
