// The models a workbench user can evaluate or try: every checkpoint of every
// run that still has its model folder, the workspace's model folders, and
// folders the user added.
#pragma once

#include <QString>
#include <QVector>
#include <memory>

namespace latentlab {
class RunStore;
}

namespace latentlab::ui {

struct ModelChoice {
  QString label;   // "#3 convert d_kv 8 · step 60", "models/demo-gqa"
  QString dir;     // the HF folder
  qint64 run = 0;  // the run whose checkpoint it is (0: a plain folder)
  qint64 step = 0;
};

// Newest runs first, each run's newest checkpoint first; then the folders of
// <workspace>/models that hold a config.json. Evaluation jobs are not listed.
QVector<ModelChoice> listModelChoices(const RunStore& store, const QString& workspaceDir);

}  // namespace latentlab::ui
