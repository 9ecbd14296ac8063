// Evaluate tab: pick a model (a run's checkpoint or a model folder), the
// multiple-choice task files and the passkey grid, and queue the evaluation
// as a job (run spec kind "eval"). Below, the chosen model's stored results:
// each task's acc and acc_norm with their standard errors, and the passkey
// heatmap.
#pragma once

#include <QWidget>
#include <memory>

#include "latentlab/run_spec.h"
#include "panels/model_choices.h"

class QCheckBox;
class QComboBox;
class QGroupBox;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace latentlab {
class RunStore;
}

namespace latentlab::ui {

class PasskeyHeatmap;

class EvaluatePanel : public QWidget {
  Q_OBJECT
 public:
  EvaluatePanel(std::shared_ptr<RunStore> store, QString workspaceDir, QWidget* parent = nullptr);

  // Re-reads the model list (keeping the choice) and the results shown.
  void refresh();
  // Re-reads only the chosen model's stored figures (cheap; while a job scores).
  void refreshResults() { showResults(); }
  // The evaluation job of the current choices; an empty name when incomplete
  // (blockedReason() says why).
  RunSpec spec() const;
  QString blockedReason() const;
  void setDevices(const QStringList& devices);

  QComboBox* modelBox() const { return m_model; }
  QPushButton* folderButton() const { return m_folder; }
  QLineEdit* taskFileEdit() const { return m_taskFile; }
  QComboBox* formatBox() const { return m_format; }
  QPushButton* addTaskButton() const { return m_addTask; }
  QListWidget* taskList() const { return m_tasks; }
  QSpinBox* limitBox() const { return m_limit; }
  QCheckBox* passkeyBox() const { return m_passkey; }
  QLineEdit* haystackEdit() const { return m_haystack; }
  QLineEdit* lengthsEdit() const { return m_lengths; }
  QLineEdit* depthsEdit() const { return m_depths; }
  QSpinBox* trialsBox() const { return m_trials; }
  QPushButton* evaluateButton() const { return m_evaluate; }
  QComboBox* kvCacheBox() const { return m_kvCache; }
  QLabel* statusLabel() const { return m_status; }
  QTableWidget* resultsTable() const { return m_results; }
  PasskeyHeatmap* heatmap() const { return m_heatmap; }
  // Adds a model folder to the choices and selects it.
  void addFolder(const QString& dir);

 Q_SIGNALS:
  void evaluateRequested(const RunSpec& spec);

 private:
  // The constructor's parts: the layout (one builder per group box), the connections.
  void buildLayout();
  QGroupBox* buildModelBox();
  QGroupBox* buildResultsBox();
  QGroupBox* buildTasksBox();
  QGroupBox* buildPasskeyBox();
  QHBoxLayout* buildRunRow();
  void connectSignals();
  void addTask();
  void updateState();
  void followContext();  // the passkey lengths the chosen model's context allows
  void showResults();
  const ModelChoice* current() const;

  std::shared_ptr<RunStore> m_store;
  QString m_workspace;
  // The chosen model's context (max_position_embeddings; 0 when unreadable),
  // and whether the user has typed the passkey lengths (else they follow it).
  int m_context = 0;
  QString m_contextDir;  // the model folder m_context was read from
  bool m_lengthsTyped = false;
  QVector<ModelChoice> m_choices;
  QVector<ModelChoice> m_extraFolders;
  QComboBox* m_model = nullptr;
  QPushButton* m_folder = nullptr;
  QLineEdit* m_taskFile = nullptr;
  QPushButton* m_browse = nullptr;  // picks m_taskFile
  QComboBox* m_format = nullptr;
  QLineEdit* m_extra = nullptr;  // piqa labels / mmlu dev CSV
  QPushButton* m_addTask = nullptr;
  QListWidget* m_tasks = nullptr;
  QSpinBox* m_limit = nullptr;
  QCheckBox* m_passkey = nullptr;
  QLineEdit* m_haystack = nullptr;
  QLineEdit* m_lengths = nullptr;
  QLineEdit* m_depths = nullptr;
  QSpinBox* m_trials = nullptr;
  QComboBox* m_device = nullptr;
  QComboBox* m_kvCache = nullptr;  // the cache scored over (docs/kv_quant.md)
  QPushButton* m_evaluate = nullptr;
  QLabel* m_status = nullptr;
  QTableWidget* m_results = nullptr;
  PasskeyHeatmap* m_heatmap = nullptr;
};

}  // namespace latentlab::ui
