// The experiments/runs tree over the store.
#include "models/run_tree_model.h"

#include <QIcon>
#include <QPainter>
#include <QPixmap>
#include <map>

#include "charts/run_palette.h"
#include "latentlab/error.h"
#include "latentlab/run_store.h"

namespace latentlab::ui {

namespace {

QIcon colorDot(const QColor& c) {
  QPixmap pm(12, 12);
  pm.fill(Qt::transparent);
  QPainter p(&pm);
  p.setRenderHint(QPainter::Antialiasing);
  p.setPen(Qt::NoPen);
  p.setBrush(c);
  p.drawEllipse(1, 1, 10, 10);
  return QIcon(pm);
}

}  // namespace

RunTreeModel::RunTreeModel(std::shared_ptr<RunStore> store, QObject* parent)
    : QAbstractItemModel(parent), m_store(std::move(store)) {
  forgetRunColors();  // run ids of another workspace's store
  m_rows = load();
}

std::vector<RunTreeModel::ExperimentRow> RunTreeModel::load() const {
  std::vector<ExperimentRow> rows;
  try {
    std::map<qint64, std::size_t> byId;
    for (const auto& e : m_store->listExperiments()) {
      byId[e.id] = rows.size();
      rows.push_back({e.id, QString::fromStdString(e.name), QString::fromStdString(e.preset), {}});
    }
    const std::vector<RunRecord> runs = m_store->listRuns();
    assignColors(runs);
    for (const auto& r : runs) {
      RunRow row;
      row.id = r.id;
      row.name = QString::fromStdString(r.name);
      row.kind = QString::fromStdString(r.kind);
      row.status = r.status;
      row.error = QString::fromStdString(r.error);
      if (auto last = m_store->lastStep(r.id, "train/loss")) {
        row.step = *last;
        auto pts = m_store->rowsSince(r.id, "train/loss", *last - 1);
        if (!pts.empty()) {
          row.loss = pts.back().value;
          row.hasLoss = true;
        }
      }
      const qint64 exp = r.experimentId ? *r.experimentId : -1;
      auto it = byId.find(exp);
      if (it == byId.end()) {
        it = byId.emplace(exp, rows.size()).first;
        rows.push_back({exp, tr("(no experiment)"), {}, {}});
      }
      rows[it->second].runs.push_back(row);
    }
  } catch (const Error& e) {
    qWarning("run list: %s", e.message().c_str());
  }
  return rows;
}

void RunTreeModel::assignColors(const std::vector<RunRecord>& runs) const {
  // Distinct from the colours of the runs listed before (the most recent
  // ones count: older runs are rarely shown next to new ones).
  constexpr std::size_t kRecent = 40;
  std::vector<QColor> taken;
  for (const RunRecord& r : runs) {
    QColor c(QString::fromStdString(r.color));
    if (!c.isValid()) {
      if (taken.size() > kRecent) taken.erase(taken.begin(), taken.end() - kRecent);
      c = distinctColor(taken);
      try {
        m_store->setRunColor(r.id, c.name().toStdString());
      } catch (const Error& e) {
        qWarning("run colour: %s", e.message().c_str());  // kept for this session only
      }
    }
    setRunColor(r.id, c);
    taken.push_back(c);
  }
}

void RunTreeModel::changeRunColor(qint64 runId, const QColor& color) {
  if (!color.isValid()) return;
  try {
    m_store->setRunColor(runId, color.name().toStdString());
  } catch (const Error& e) {
    qWarning("run colour: %s", e.message().c_str());
  }
  setRunColor(runId, color);
  const QModelIndex idx = indexOfRun(runId);
  if (idx.isValid()) Q_EMIT dataChanged(idx, idx, {Qt::DecorationRole});
  Q_EMIT runColorChanged(runId);
}

void RunTreeModel::refresh() {
  std::vector<ExperimentRow> fresh = load();
  bool prefix = fresh.size() >= m_rows.size();
  for (std::size_t i = 0; prefix && i < m_rows.size(); ++i) {
    prefix = fresh[i].id == m_rows[i].id && fresh[i].runs.size() >= m_rows[i].runs.size();
    for (std::size_t k = 0; prefix && k < m_rows[i].runs.size(); ++k)
      prefix = fresh[i].runs[k].id == m_rows[i].runs[k].id;
  }
  if (!prefix) {
    beginResetModel();
    m_rows = std::move(fresh);
    endResetModel();
    return;
  }
  for (std::size_t i = 0; i < m_rows.size(); ++i) {
    auto& mine = m_rows[i];
    const auto& theirs = fresh[i];
    const std::size_t old = mine.runs.size();
    mine.name = theirs.name;
    for (std::size_t k = 0; k < old; ++k) mine.runs[k] = theirs.runs[k];
    if (old > 0) {
      const QModelIndex parentIdx = index(static_cast<int>(i), 0);
      Q_EMIT dataChanged(index(0, 0, parentIdx), index(static_cast<int>(old) - 1, ColumnCount - 1, parentIdx));
    }
    if (theirs.runs.size() > old) {
      beginInsertRows(index(static_cast<int>(i), 0), static_cast<int>(old), static_cast<int>(theirs.runs.size()) - 1);
      mine.runs.assign(theirs.runs.begin(), theirs.runs.end());
      endInsertRows();
    }
  }
  if (!m_rows.empty()) Q_EMIT dataChanged(index(0, 0), index(static_cast<int>(m_rows.size()) - 1, ColumnCount - 1));
  if (fresh.size() > m_rows.size()) {
    beginInsertRows({}, static_cast<int>(m_rows.size()), static_cast<int>(fresh.size()) - 1);
    for (std::size_t i = m_rows.size(); i < fresh.size(); ++i) m_rows.push_back(fresh[i]);
    endInsertRows();
  }
}

QModelIndex RunTreeModel::indexOfRun(qint64 runId) const {
  for (std::size_t i = 0; i < m_rows.size(); ++i) {
    for (std::size_t k = 0; k < m_rows[i].runs.size(); ++k) {
      if (m_rows[i].runs[k].id == runId) return index(static_cast<int>(k), 0, index(static_cast<int>(i), 0));
    }
  }
  return {};
}

QString RunTreeModel::runName(qint64 runId) const {
  const QModelIndex idx = indexOfRun(runId);
  return idx.isValid() ? idx.data().toString() : QStringLiteral("run %1").arg(runId);
}

QModelIndex RunTreeModel::index(int row, int column, const QModelIndex& parent) const {
  if (row < 0 || column < 0 || column >= ColumnCount) return {};
  if (!parent.isValid()) {
    if (row >= static_cast<int>(m_rows.size())) return {};
    return createIndex(row, column, quintptr{0});
  }
  if (parent.internalId() != 0 || parent.row() >= static_cast<int>(m_rows.size())) return {};
  if (row >= static_cast<int>(m_rows[static_cast<std::size_t>(parent.row())].runs.size())) return {};
  return createIndex(row, column, static_cast<quintptr>(parent.row()) + 1);
}

QModelIndex RunTreeModel::parent(const QModelIndex& child) const {
  if (!child.isValid() || child.internalId() == 0) return {};
  return createIndex(static_cast<int>(child.internalId() - 1), 0, quintptr{0});
}

int RunTreeModel::rowCount(const QModelIndex& parent) const {
  if (!parent.isValid()) return static_cast<int>(m_rows.size());
  if (parent.column() != 0 || parent.internalId() != 0) return 0;
  return static_cast<int>(m_rows[static_cast<std::size_t>(parent.row())].runs.size());
}

int RunTreeModel::columnCount(const QModelIndex&) const {
  return ColumnCount;
}

QVariant RunTreeModel::data(const QModelIndex& idx, int role) const {
  if (!idx.isValid()) return {};
  if (idx.internalId() == 0) {
    const ExperimentRow& e = m_rows[static_cast<std::size_t>(idx.row())];
    if (role == ExperimentIdRole) return e.id;
    if (role == IsRunRole) return false;
    if (role == NameRole) return e.name;
    // The run count beside the name: the experiment's row spans the columns.
    if (role == Qt::DisplayRole && idx.column() == NameColumn)
      return tr("%1 · %n run(s)", nullptr, static_cast<int>(e.runs.size())).arg(e.name);
    if (role == Qt::DisplayRole && idx.column() == StatusColumn)
      return tr("%n run(s)", nullptr, static_cast<int>(e.runs.size()));
    if (role == Qt::ToolTipRole) return e.preset.isEmpty() ? e.name : tr("%1 (preset %2)").arg(e.name, e.preset);
    if (role == Qt::FontRole && idx.column() == NameColumn) {
      QFont f;
      f.setBold(true);
      return f;
    }
    return {};
  }
  const ExperimentRow& e = m_rows[static_cast<std::size_t>(idx.internalId() - 1)];
  const RunRow& r = e.runs[static_cast<std::size_t>(idx.row())];
  switch (role) {
    case RunIdRole:
      return r.id;
    case ExperimentIdRole:
      return e.id;
    case IsRunRole:
      return true;
    case NameRole:
      return r.name;
    case StatusRole:
      return QVariant::fromValue(r.status);
    case Qt::DisplayRole:
      switch (idx.column()) {
        case NameColumn:
          return r.name;
        case StatusColumn:
          return QString::fromLatin1(runStatusName(r.status));
        case StepColumn:
          return r.step >= 0 ? QVariant(r.step) : QVariant(QStringLiteral("–"));
        case LossColumn:
          return r.hasLoss ? QVariant(QString::number(r.loss, 'f', 3)) : QVariant(QStringLiteral("–"));
        default:
          return {};
      }
    case Qt::DecorationRole:
      return idx.column() == NameColumn ? QVariant(colorDot(runColor(r.id))) : QVariant();
    case Qt::ForegroundRole:
      return idx.column() == StatusColumn ? QVariant(statusColor(r.status)) : QVariant();
    case Qt::TextAlignmentRole:
      return idx.column() >= StepColumn ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter)) : QVariant();
    case Qt::ToolTipRole:
      return QStringLiteral("%1\nrun %2 · %3 · %4%5")
          .arg(r.name)
          .arg(r.id)
          .arg(r.kind, QString::fromLatin1(runStatusName(r.status)),
               r.error.isEmpty() ? QString() : QStringLiteral("\n") + r.error);
    default:
      return {};
  }
}

QVariant RunTreeModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case NameColumn:
      return tr("Experiment / run");
    case StatusColumn:
      return tr("Status");
    case StepColumn:
      return tr("Step");
    case LossColumn:
      return tr("Loss");
    default:
      return {};
  }
}

Qt::ItemFlags RunTreeModel::flags(const QModelIndex& idx) const {
  if (!idx.isValid()) return Qt::NoItemFlags;
  return Qt::ItemIsEnabled | Qt::ItemIsSelectable;
}

}  // namespace latentlab::ui
