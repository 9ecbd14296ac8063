// `latentlab-engine demo`: the embedded default without the GUI.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "engine_cli.h"
#include "latentlab/demo.h"
#include "latentlab/engine.h"
#include "latentlab/error.h"

namespace latentlab::cli {
namespace fs = std::filesystem;

int cmdDemo(int argc, char** argv) {
  Args args(argc, argv, 2, {"help", "quiet", "base-only"}, {"workspace", "device", "arch"});
  if (args.flag("help") || !args.get("workspace")) {
    std::printf(
        "usage: latentlab-engine demo --workspace DIR [--arch demo-gqa|demo-mha] [--device D]\n\n"
        "Prepares the demo workspace offline: trains a BPE tokenizer on the Python documentation\n"
        "(Debian package python3.11-doc), tokenizes it once, pre-trains the small demo base model\n"
        "and records every run in DIR/runs.db, then converts it to MLA with three RoPE strategies\n"
        "(d_kv 8) and fine-tunes each briefly. Cached: a second call reuses all of it.\n"
        "  --base-only   stop after the base model\n");
    return args.flag("help") ? 0 : 1;
  }
  const fs::path ws = *args.get("workspace");
  fs::create_directories(ws);
  RunStore store(ws / "runs.db");
  JobEnvironment env;
  env.workspace = ws;
  env.device = args.get("device", "");
  StderrProgress progress(args.flag("quiet"));
  const std::string arch = args.get("arch", "demo-gqa");
  fs::path base = ensureDemoBase(store, arch, env, progress, cancelToken());
  ModelSummary s = inspectModel(base);
  std::printf("demo base %s: %s, %.2fM parameters, %d layers, %d heads / %d KV heads, KV cache %lld elements/token\n",
              arch.c_str(), base.string().c_str(), s.parameters / 1e6, s.config.numLayers, s.config.numHeads,
              s.config.numKvHeads, static_cast<long long>(s.kv.perToken));
  if (!args.flag("base-only")) {
    const std::int64_t exp = findOrCreateExperiment(store, "demo: rope strategies", "rope-strategies",
                                                    "MHA2MLA on the demo base: S_2-norm, S_high, S_uniform at d_kv 8");
    for (const RopeStrategy strategy : {RopeStrategy::TwoNorm, RopeStrategy::High, RopeStrategy::Uniform}) {
      RunSpec spec = demoConvertSpec(base, strategy, 8);
      bool done = false;
      std::int64_t id = 0;
      for (const auto& r : store.listRuns(RunFilter{exp, std::nullopt, std::nullopt})) {
        if (r.name == spec.name) {
          done = r.status == RunStatus::Completed;
          id = r.id;
        }
      }
      if (done) continue;
      if (id == 0)
        id = store.createRun(exp, spec.name, spec.kind, runSpecToJson(spec), env.device.empty() ? "cpu" : env.device);
      progress.log(LogLevel::Info, "run " + std::to_string(id) + ": " + spec.name);
      RunResult r = runJob(store, id, env, progress, cancelToken());
      if (r.status == RunStatus::Cancelled) return 2;
      if (r.status != RunStatus::Completed)
        throw Error(ErrorCode::Internal, "demo run '" + spec.name + "' failed: " + r.errorText());
    }
  }
  std::printf("%-5s %-10s %-28s %10s %10s\n", "run", "status", "name", "train", "val");
  for (const auto& r : store.listRuns()) {
    std::string train = "-", val = "-";
    if (!r.summaryJson.empty()) {
      auto j = nlohmann::json::parse(r.summaryJson);
      if (j.contains("final_train_loss")) train = std::to_string(j["final_train_loss"].get<double>()).substr(0, 6);
      if (j.contains("final_val_loss")) val = std::to_string(j["final_val_loss"].get<double>()).substr(0, 6);
    }
    std::printf("%-5lld %-10s %-28s %10s %10s\n", static_cast<long long>(r.id), runStatusName(r.status), r.name.c_str(),
                train.c_str(), val.c_str());
  }
  std::printf("workspace: %s (runs.db, models/, cache/, runs/)\n", ws.string().c_str());
  return 0;
}

}  // namespace latentlab::cli
