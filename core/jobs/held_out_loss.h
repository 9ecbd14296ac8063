// The mean next-token loss of a loaded model over a token stream: the loop
// behind `eval --text/--tokens`, also used where a model exists only in
// memory (the uniform reference of a KV-budget conversion).
#pragma once

#include <cstdint>
#include <vector>

#include "latentlab/engine.h"
#include "model/llama.h"

namespace latentlab {

// Non-overlapping windows of opts.seqLen + 1 tokens (stride seqLen, the tail
// as one shorter window), opts.batchSize per forward pass on the model's
// device; every token after the first is predicted once. opts.logitsOut, when
// set, receives the first window's logits. Fills tokens, meanLoss,
// perplexity, seconds and tokensPerSecond.
EvalResult heldOutLoss(CausalLm& model, const std::vector<std::int64_t>& ids, const EvalOptions& opts,
                       ProgressSink& progress, const CancelToken& cancel);

}  // namespace latentlab
