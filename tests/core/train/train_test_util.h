// Helpers for trainer tests: a small real-text spec and metric reads.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "latentlab/engine.h"
#include "latentlab/model_config.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"
#include "latentlab/train.h"

namespace latentlab::test {

// Requests cancellation once training reports `atStep`.
class CancelAtStep final : public ProgressSink {
 public:
  CancelAtStep(CancelToken& token, int atStep) : m_token(token), m_at(atStep) {}
  void progress(std::string_view stage, double done, double, std::string_view) override {
    if (stage == "train" && done >= m_at) m_token.request();
  }
  void log(LogLevel, std::string_view) override {}

 private:
  CancelToken& m_token;
  int m_at;
};

// A tiny pre-training run on the Python tutorial (real English text from the
// Debian python3.11-doc package) with a 512-token tokenizer.
inline RunSpec tinyPretrainSpec(int steps) {
  RunSpec s;
  s.name = "tiny";
  s.kind = RunKind::Pretrain;
  s.architecture = "demo-gqa";
  s.data.corpus = "/usr/share/doc/python3.11/html/_sources/tutorial";
  s.data.tokenizerVocab = 512;
  s.data.seqLen = 32;
  s.data.validationShare = 0.05;
  s.steps = steps;
  s.microBatch = 4;
  s.optimizer.lr = 3e-3;
  s.schedule.kind = ScheduleKind::Constant;
  s.evalEvery = 0;
  s.evalBatches = 2;
  s.checkpointEvery = 0;
  s.seed = 5;
  return s;
}

// tinyPretrainSpec(steps) trained into a workspace at `dir` (its store
// dir/runs.db): a small model of the demo's shape that has seen real text.
inline RunResult trainTinyBase(const std::filesystem::path& dir, int steps) {
  RunStore store(dir / "runs.db");
  const RunSpec spec = tinyPretrainSpec(steps);
  const auto id = store.createRun(std::nullopt, "tiny", spec.kind, runSpecToJson(spec), "cpu");
  JobEnvironment env;
  env.workspace = dir;
  NullProgress progress;
  CancelToken cancel;
  return runJob(store, id, env, progress, cancel);
}

// A TCP port free on loopback right now, for a test's data-parallel ranks to
// meet at. Drawn at random from below the kernel's ephemeral range (read from
// /proc/sys/net/ipv4/ip_local_port_range): a port the kernel hands out (port
// 0) is free only until the ranks' process starts, and meanwhile any socket
// of a test running beside this one may be given it too, which left a rank 0
// unable to listen and its peer waiting for it until the rendezvous timeout.
inline int freeLoopbackPort() {
  int low = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> low;
  const int first = 10000, last = std::max(first + 1000, low - 1);
  std::random_device seed;
  std::mt19937 rng(seed());
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = std::uniform_int_distribution<int>(first, last)(rng);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    if (free) return port;
  }
  return 0;  // none free: the ranks then fail to listen, naming the port
}

// A two-layer GQA model of 64 tokens for optimiser-level tests.
inline ModelConfig tinyModelConfig() {
  ModelConfig cfg;
  cfg.vocabSize = 64;
  cfg.hiddenSize = 32;
  cfg.intermediateSize = 48;
  cfg.numLayers = 2;
  cfg.numHeads = 4;
  cfg.numKvHeads = 2;
  cfg.headDim = 8;
  return cfg;
}

inline std::vector<double> seriesValues(const RunStore& store, std::int64_t run, const std::string& name) {
  std::vector<double> out;
  for (const auto& p : store.rowsSince(run, name, -1)) out.push_back(p.value);
  return out;
}

}  // namespace latentlab::test
