// Shared pieces of latentlab-engine's verbs: cancellation, progress output,
// and the verb entry points.
#pragma once

#include <string>
#include <string_view>

#include "latentlab/kv_budget.h"
#include "latentlab/kv_quant.h"
#include "latentlab/progress.h"

namespace latentlab::cli {

// SIGINT/SIGTERM request cancellation of the running job.
void installCancelHandlers();
CancelToken& cancelToken();
// Also cancel on a "cancel" line on stdin (the GUI's job controller).
void watchStdinForCancel();

// Progress as a one-line bar on stderr, redrawn in place.
class StderrProgress final : public ProgressSink {
 public:
  explicit StderrProgress(bool quiet) : m_quiet(quiet) {}
  ~StderrProgress() override;
  void progress(std::string_view stage, double done, double total, std::string_view detail) override;
  void log(LogLevel level, std::string_view message) override;

 private:
  bool m_quiet;
  bool m_drawn = false;
};

// A KV budget's per-layer allocation (verb_convert.cpp): as the JSON object
// `convert --check --kv-budget --json` and `run --check --kv-allocation
// --json` print, or as text, one line per layer.
void printAllocation(const KvAllocation& a, bool asJson);

int cmdRun(int argc, char** argv);
int cmdRuns(int argc, char** argv);
int cmdDemo(int argc, char** argv);
int cmdSubmit(int argc, char** argv);
int cmdConvert(int argc, char** argv);
int cmdExport(int argc, char** argv);
int cmdGenerate(int argc, char** argv);
class Args;
// --kv-quant Q, --kv-group G and --kv-residual N (docs/kv_quant.md), the
// defaults where absent; checked against a model later (checkKvQuant).
KvQuantSettings readKvQuantFlags(const Args& args);
// Their help lines, the descriptions starting at `column`.
std::string kvQuantHelp(int column);
// `eval DIR --passkey FILE` (verb_passkey.cpp).
int evalPasskey(const Args& args);

}  // namespace latentlab::cli
