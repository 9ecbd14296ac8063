// The embedded default: a demo workspace whose base models LatentLab
// pre-trains itself on real English text (the Python documentation shipped
// by Debian), with a tokenizer it trains, all cached after the first run.
#pragma once

#include <filesystem>
#include <string>

#include "latentlab/progress.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"
#include "latentlab/train.h"

namespace latentlab {

// The folder of the demo corpus's text files (Debian's python3.11-doc
// sources): where presets find their haystacks and held-out texts.
std::filesystem::path demoTextFolder();

// The spec that pre-trains the demo base `arch` ("demo-gqa" or "demo-mha").
RunSpec demoPretrainSpec(const std::string& arch);

// A demo-scale convert-then-fine-tune run of the demo base at `baseDir`.
RunSpec demoConvertSpec(const std::filesystem::path& baseDir, RopeStrategy ropeStrategy, int dKv);

// <workspace>/models/<arch>: an HF folder with tokenizer.json. Pre-trains it
// (a run in the store, kind pretrain) when missing.
std::filesystem::path ensureDemoBase(RunStore& store, const std::string& arch, const JobEnvironment& env,
                                     ProgressSink& progress, const CancelToken& cancel);

// Copies the final model of the completed pre-training run `runId` (with its
// tokenizer.json) to <workspace>/models/<arch>, replacing what is there.
// Throws Error naming the missing or unwritable folder.
std::filesystem::path publishDemoBase(RunStore& store, std::int64_t runId, const std::filesystem::path& workspace,
                                      const std::string& arch);

// The experiment named `name`, created when missing.
std::int64_t findOrCreateExperiment(RunStore& store, const std::string& name, const std::string& preset,
                                    const std::string& description);

}  // namespace latentlab
