// The jobs of this session (queued, running, finished) as a table over the
// job controller: run, status, where it runs (device, or Slurm job, state and
// nodes), progress (0-100, drawn as a bar), step, tokens/s, ETA, loss.
#pragma once

#include <QAbstractTableModel>

namespace latentlab::ui {

class JobController;

class JobTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    RunColumn,
    StatusColumn,
    PlacementColumn,
    ProgressColumn,
    StepColumn,
    SpeedColumn,
    EtaColumn,
    LossColumn,
    ColumnCount
  };
  enum Role { RunIdRole = Qt::UserRole + 1, ProgressRole };

  explicit JobTableModel(JobController* jobs, QObject* parent = nullptr);

  qint64 runIdAt(int row) const;
  int rowOf(qint64 runId) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  JobController* m_jobs;
};

QString formatDuration(double seconds);

}  // namespace latentlab::ui
