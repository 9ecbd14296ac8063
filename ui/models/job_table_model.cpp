// Job table over the job controller.
#include "models/job_table_model.h"

#include <cmath>

#include "charts/run_palette.h"
#include "jobs/job_controller.h"

namespace latentlab::ui {

QString formatDuration(double seconds) {
  if (seconds < 0 || !std::isfinite(seconds)) return QStringLiteral("–");
  const auto s = static_cast<qint64>(std::llround(seconds));
  if (s < 60) return QStringLiteral("%1 s").arg(s);
  if (s < 3600) return QStringLiteral("%1 min %2 s").arg(s / 60).arg(s % 60);
  return QStringLiteral("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60);
}

JobTableModel::JobTableModel(JobController* jobs, QObject* parent) : QAbstractTableModel(parent), m_jobs(jobs) {
  connect(m_jobs, &JobController::jobsChanged, this, [this] {
    beginResetModel();
    endResetModel();
  });
  connect(m_jobs, &JobController::jobUpdated, this, [this](qint64 runId) {
    const int row = rowOf(runId);
    if (row >= 0) Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
    // The runs that wait for it: their "waits for" ends with it.
    for (qint64 id : m_jobs->jobOrder()) {
      const JobInfo* j = m_jobs->job(id);
      const int waiting = j != nullptr && j->after == runId ? rowOf(id) : -1;
      if (waiting >= 0) Q_EMIT dataChanged(index(waiting, StatusColumn), index(waiting, StatusColumn));
    }
  });
}

qint64 JobTableModel::runIdAt(int row) const {
  const auto& order = m_jobs->jobOrder();
  return row >= 0 && row < order.size() ? order[row] : 0;
}

int JobTableModel::rowOf(qint64 runId) const {
  return static_cast<int>(m_jobs->jobOrder().indexOf(runId));
}

int JobTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_jobs->jobOrder().size());
}

int JobTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant JobTableModel::data(const QModelIndex& idx, int role) const {
  if (!idx.isValid() || idx.row() >= rowCount()) return {};
  const JobInfo* j = m_jobs->job(runIdAt(idx.row()));
  if (j == nullptr) return {};
  const int percent = j->steps > 0 ? static_cast<int>(100 * j->step / j->steps) : 0;
  switch (role) {
    case RunIdRole:
      return j->runId;
    case ProgressRole:
      return percent;
    case Qt::DisplayRole:
      switch (idx.column()) {
        case RunColumn:
          return QStringLiteral("#%1  %2").arg(j->runId).arg(j->name);
        case StatusColumn:
          if (j->cancelRequested && j->status == RunStatus::Running) return tr("stopping…");
          if (j->after != 0 && j->status == RunStatus::Queued) {
            // Only while the run it waits for has not ended; then it waits for a slot like any other.
            const JobInfo* before = m_jobs->job(j->after);
            if (before != nullptr && before->isActive()) return tr("waits for #%1").arg(j->after);
          }
          return QString::fromLatin1(runStatusName(j->status));
        case PlacementColumn:
          return j->placement();
        case ProgressColumn:
          return percent;
        case StepColumn:
          return j->steps > 0 ? QStringLiteral("%1 / %2").arg(j->step).arg(j->steps) : QStringLiteral("–");
        case SpeedColumn:
          return j->tokensPerSec > 0 ? QStringLiteral("%1 tok/s").arg(j->tokensPerSec, 0, 'f', 0) : QStringLiteral("–");
        case EtaColumn:
          return formatDuration(j->etaSeconds());
        case LossColumn:
          return j->hasLoss ? QString::number(j->loss, 'f', 4) : QStringLiteral("–");
        default:
          return {};
      }
    case Qt::ForegroundRole:
      return idx.column() == StatusColumn ? QVariant(statusColor(j->status)) : QVariant();
    case Qt::ToolTipRole:
      if (!j->error.isEmpty()) return j->error;
      if (j->onCluster()) {
        return tr("cluster profile %1, device %2; the batch script and Slurm's output are in the run's folder")
            .arg(j->cluster, j->device);
      }
      return j->device;
    case Qt::TextAlignmentRole:
      return idx.column() >= StepColumn ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter)) : QVariant();
    default:
      return {};
  }
}

QVariant JobTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kNames[] = {"Run", "Status", "Where", "Progress", "Step", "Speed", "ETA", "Loss"};
  return section >= 0 && section < ColumnCount ? tr(kNames[section]) : QVariant();
}

}  // namespace latentlab::ui
