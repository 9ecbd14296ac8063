// Experiments and runs pane.
#include "panels/runs_panel.h"

#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMenu>
#include <QSet>
#include <QTreeView>
#include <QVBoxLayout>

#include "models/run_tree_model.h"

namespace latentlab::ui {

RunsPanel::RunsPanel(RunTreeModel* model, QWidget* parent) : QWidget(parent), m_model(model) {
  m_view = new QTreeView;
  m_view->setModel(m_model);
  m_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_view->setUniformRowHeights(true);
  m_view->setAlternatingRowColors(true);
  m_view->setContextMenuPolicy(Qt::CustomContextMenu);
  m_view->header()->setStretchLastSection(false);
  m_view->setTextElideMode(Qt::ElideMiddle);                // the tooltip has the whole name
  m_view->setColumnHidden(RunTreeModel::StepColumn, true);  // steps: the jobs table and the compare table
  m_view->header()->setSectionResizeMode(RunTreeModel::NameColumn, QHeaderView::Stretch);
  for (int c = RunTreeModel::StatusColumn; c < RunTreeModel::ColumnCount; ++c) {
    m_view->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
  }
  m_view->expandAll();
  auto* title = new QLabel(tr("Experiments and runs"));
  QFont f = title->font();
  f.setBold(true);
  title->setFont(f);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 0, 6);
  layout->addWidget(title);
  layout->addWidget(m_view, 1);

  connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          [this] { Q_EMIT selectionChanged(selectedRuns()); });
  // An experiment's row spans the status and loss columns: its name (and run
  // count) gets the pane's whole width.
  const auto spanExperiments = [this] {
    for (int r = 0; r < m_model->rowCount(); ++r) m_view->setFirstColumnSpanned(r, QModelIndex(), true);
  };
  connect(m_model, &QAbstractItemModel::rowsInserted, this, [this, spanExperiments](const QModelIndex& parent) {
    if (!parent.isValid()) {
      spanExperiments();
      m_view->expandAll();
    } else {
      m_view->expand(parent);
    }
  });
  connect(m_model, &QAbstractItemModel::modelReset, this, [this, spanExperiments] {
    spanExperiments();
    m_view->expandAll();
  });
  spanExperiments();
  connect(m_view, &QTreeView::customContextMenuRequested, this, [this](const QPoint& pos) {
    const qint64 id = currentRunId();
    if (id == 0) return;
    const auto status = m_model->indexOfRun(id).data(RunTreeModel::StatusRole).value<RunStatus>();
    QMenu menu(this);
    QAction* retry = menu.addAction(status == RunStatus::Queued ? tr("Start") : tr("Retry / resume"));
    retry->setEnabled(status != RunStatus::Running && status != RunStatus::Completed);
    QAction* cancel = menu.addAction(tr("Cancel"));
    cancel->setEnabled(status == RunStatus::Running || status == RunStatus::Queued);
    QAction* exportCsv = menu.addAction(tr("Export metrics as CSV…"));
    QAction* exportModel = menu.addAction(tr("Export checkpoint as DeepSeek-V3…"));
    QAction* colour = menu.addAction(tr("Colour…"));
    menu.addSeparator();
    QAction* del = menu.addAction(tr("Delete run"));
    del->setEnabled(status != RunStatus::Running);
    QAction* chosen = menu.exec(m_view->viewport()->mapToGlobal(pos));
    if (chosen == retry)
      Q_EMIT retryRequested(id);
    else if (chosen == cancel)
      Q_EMIT cancelRequested(id);
    else if (chosen == exportCsv)
      Q_EMIT exportRequested(id);
    else if (chosen == exportModel)
      Q_EMIT exportModelRequested(id);
    else if (chosen == colour)
      Q_EMIT colorRequested(id);
    else if (chosen == del)
      Q_EMIT deleteRequested(id);
  });
}

qint64 RunsPanel::currentRunId() const {
  const QModelIndex idx = m_view->currentIndex();
  return idx.isValid() && idx.data(RunTreeModel::IsRunRole).toBool()
             ? idx.siblingAtColumn(0).data(RunTreeModel::RunIdRole).toLongLong()
             : 0;
}

QVector<ChartRun> RunsPanel::selectedRuns() const {
  QVector<ChartRun> out;
  QSet<qint64> seen;
  auto add = [&](const QModelIndex& idx) {
    const qint64 id = idx.data(RunTreeModel::RunIdRole).toLongLong();
    if (seen.contains(id)) return;
    seen.insert(id);
    out.push_back({id, idx.data().toString()});
  };
  for (const QModelIndex& idx : m_view->selectionModel()->selectedRows(0)) {
    if (idx.data(RunTreeModel::IsRunRole).toBool()) {
      add(idx);
    } else {
      for (int r = 0; r < m_model->rowCount(idx); ++r) add(m_model->index(r, 0, idx));
    }
  }
  std::sort(out.begin(), out.end(), [](const ChartRun& a, const ChartRun& b) { return a.id < b.id; });
  return out;
}

void RunsPanel::selectRun(qint64 runId) {
  const QModelIndex idx = m_model->indexOfRun(runId);
  if (!idx.isValid()) return;
  m_view->selectionModel()->select(idx, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  m_view->setCurrentIndex(idx);
}

}  // namespace latentlab::ui
