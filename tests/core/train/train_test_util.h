// Helpers for trainer tests: a small real-text spec and metric reads.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"

namespace latentlab::test {

// A tiny pre-training run on the Python tutorial (real English text from the
// Debian python3.11-doc package) with a 512-token tokenizer.
inline RunSpec tinyPretrainSpec(int steps) {
  RunSpec s;
  s.name = "tiny";
  s.kind = "pretrain";
  s.architecture = "demo-gqa";
  s.data.corpus = "/usr/share/doc/python3.11/html/_sources/tutorial";
  s.data.tokenizerVocab = 512;
  s.data.seqLen = 32;
  s.data.validationShare = 0.05;
  s.steps = steps;
  s.microBatch = 4;
  s.optimizer.lr = 3e-3;
  s.schedule.kind = "constant";
  s.evalEvery = 0;
  s.evalBatches = 2;
  s.checkpointEvery = 0;
  s.seed = 5;
  return s;
}

inline std::vector<double> seriesValues(const RunStore& store, std::int64_t run, const std::string& name) {
  std::vector<double> out;
  for (const auto& p : store.rowsSince(run, name, -1)) out.push_back(p.value);
  return out;
}

} // namespace latentlab::test
