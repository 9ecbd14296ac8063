// Experiments and their runs from the run store, as a two-level tree:
// name (with the run's chart colour), status (coloured), step, last loss.
#pragma once

#include <QAbstractItemModel>
#include <QColor>
#include <QString>
#include <memory>
#include <vector>

#include "latentlab/run_store.h"

namespace latentlab::ui {

class RunTreeModel : public QAbstractItemModel {
  Q_OBJECT
 public:
  enum Column { NameColumn, StatusColumn, StepColumn, LossColumn, ColumnCount };
  // NameRole: the experiment's or run's name alone (an experiment's display
  // adds its run count); StatusRole: a run's RunStatus.
  enum Role { RunIdRole = Qt::UserRole + 1, ExperimentIdRole, IsRunRole, StatusRole, NameRole };

  explicit RunTreeModel(std::shared_ptr<RunStore> store, QObject* parent = nullptr);

  // Re-reads the store; appended experiments/runs are inserted (selection
  // survives), anything else resets the model.
  void refresh();
  QModelIndex indexOfRun(qint64 runId) const;
  QString runName(qint64 runId) const;
  // A colour the user chose for a run: stored with the run, shown everywhere.
  void changeRunColor(qint64 runId, const QColor& color);

 Q_SIGNALS:
  void runColorChanged(qint64 runId);

 public:
  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;

 private:
  struct RunRow {
    qint64 id = 0;
    QString name;
    QString kind;
    RunStatus status = RunStatus::Queued;
    QString error;
    qint64 step = -1;
    double loss = 0;
    bool hasLoss = false;
  };
  struct ExperimentRow {
    qint64 id = 0;  // -1: runs outside any experiment
    QString name;
    QString preset;
    std::vector<RunRow> runs;
  };
  std::vector<ExperimentRow> load() const;
  // Gives each run without a stored colour one distinct from those before it.
  void assignColors(const std::vector<RunRecord>& runs) const;

  std::shared_ptr<RunStore> m_store;
  std::vector<ExperimentRow> m_rows;
};

}  // namespace latentlab::ui
