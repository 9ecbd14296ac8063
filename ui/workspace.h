// A workspace folder (runs.db, models/, cache/, runs/) and the demo workspace
// a new user starts in: its experiment and queued pre-training run.
#pragma once

#include <QString>
#include <cstdint>
#include <optional>

namespace latentlab {
class RunStore;
}

namespace latentlab::ui {

struct Workspace {
  QString dir;

  QString dbPath() const { return dir + QStringLiteral("/runs.db"); }
  QString modelsDir() const { return dir + QStringLiteral("/models"); }
  QString demoBaseDir() const { return modelsDir() + QStringLiteral("/demo-gqa"); }
  bool isValid() const { return !dir.isEmpty(); }
};

inline constexpr const char* kDemoBasesExperiment = "demo bases";
inline constexpr const char* kDemoArch = "demo-gqa";

// Creates the folders and the database (migrated). Throws latentlab::Error.
Workspace openWorkspace(const QString& dir);

// The default demo workspace folder: <XDG data>/latentlab/demo.
QString defaultDemoWorkspaceDir();

// When the demo base is neither published nor being trained, registers the
// queued run "pretrain demo-gqa" in experiment "demo bases" and returns its
// id; an existing unfinished run of that name is returned as it is.
std::optional<std::int64_t> ensureDemoPretrainQueued(RunStore& store, const Workspace& ws);

// After the demo pre-training run completed: copies its final model and the
// trained tokenizer to models/demo-gqa (what `latentlab-engine demo` does).
// Returns false (and why) when something is missing.
bool publishDemoBase(RunStore& store, const Workspace& ws, std::int64_t runId, QString* why = nullptr);

// True when `runId` is the demo base pre-training run of the workspace.
bool isDemoPretrainRun(RunStore& store, std::int64_t runId);

}  // namespace latentlab::ui
