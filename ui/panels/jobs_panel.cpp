// Jobs pane.
#include "panels/jobs_panel.h"

#include <QApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QPainter>
#include <QPushButton>
#include <QScrollBar>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include "jobs/job_controller.h"
#include "models/job_table_model.h"

namespace latentlab::ui {

namespace {

// Draws the progress column as a progress bar.
class ProgressDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    QStyleOptionViewItem bg = option;
    initStyleOption(&bg, index);
    bg.text.clear();
    const QWidget* w = option.widget;
    QStyle* style = w != nullptr ? w->style() : QApplication::style();
    style->drawControl(QStyle::CE_ItemViewItem, &bg, painter, w);
    QStyleOptionProgressBar bar;
    bar.rect = option.rect.adjusted(4, 4, -4, -4);
    bar.minimum = 0;
    bar.maximum = 100;
    bar.progress = index.data(JobTableModel::ProgressRole).toInt();
    bar.text = QStringLiteral("%1%").arg(bar.progress);
    bar.textVisible = true;
    bar.state = option.state | QStyle::State_Horizontal;
    bar.palette = option.palette;
    style->drawControl(QStyle::CE_ProgressBar, &bar, painter, w);
  }
};

}  // namespace

JobsPanel::JobsPanel(JobController* jobs, JobTableModel* model, QWidget* parent)
    : QWidget(parent), m_jobs(jobs), m_model(model) {
  m_view = new QTableView;
  m_view->setModel(m_model);
  m_view->setItemDelegateForColumn(JobTableModel::ProgressColumn, new ProgressDelegate(m_view));
  m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_view->setSelectionMode(QAbstractItemView::SingleSelection);
  m_view->verticalHeader()->hide();
  m_view->setShowGrid(false);
  m_view->setAlternatingRowColors(true);
  m_view->horizontalHeader()->setSectionResizeMode(JobTableModel::RunColumn, QHeaderView::Stretch);
  m_view->horizontalHeader()->setSectionResizeMode(JobTableModel::ProgressColumn, QHeaderView::Fixed);
  m_view->setColumnWidth(JobTableModel::ProgressColumn, 180);
  for (int c : {JobTableModel::StatusColumn, JobTableModel::PlacementColumn, JobTableModel::StepColumn,
                JobTableModel::SpeedColumn, JobTableModel::EtaColumn, JobTableModel::LossColumn}) {
    m_view->horizontalHeader()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
  }
  m_cancel = new QPushButton(tr("Cancel"));
  m_retry = new QPushButton(tr("Retry / resume"));
  m_log = new QPushButton(tr("Open log"));
  auto* clear = new QPushButton(tr("Clear finished"));
  auto* buttons = new QVBoxLayout;
  for (QPushButton* b : {m_cancel, m_retry, m_log, clear}) buttons->addWidget(b);
  buttons->addStretch(1);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(6, 4, 6, 4);
  layout->addWidget(m_view, 1);
  layout->addLayout(buttons);

  connect(m_cancel, &QPushButton::clicked, this, [this] { m_jobs->cancel(selectedRunId()); });
  connect(m_retry, &QPushButton::clicked, this, [this] { m_jobs->retry(selectedRunId()); });
  connect(m_log, &QPushButton::clicked, this, [this] { Q_EMIT logRequested(selectedRunId()); });
  connect(clear, &QPushButton::clicked, m_jobs, &JobController::clearFinished);
  connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] { updateButtons(); });
  connect(m_jobs, &JobController::jobUpdated, this, [this] { updateButtons(); });
  // The table follows the job that starts running (a long queue scrolls to it),
  // once the view has laid out the rows the job's queue added.
  connect(m_jobs, &JobController::statusChanged, this, [this](qint64 runId, RunStatus status) {
    if (status != RunStatus::Running) return;
    QTimer::singleShot(0, m_view, [this, runId] {
      const int row = m_model->rowOf(runId);
      if (row < 0) return;
      const QModelIndex at = m_model->index(row, JobTableModel::RunColumn);
      m_view->scrollTo(at, QAbstractItemView::EnsureVisible);
      if (m_view->viewport()->rect().intersects(m_view->visualRect(at))) return;
      // scrollTo can leave a table whose rows were just added where it was.
      const bool perItem = m_view->verticalScrollMode() == QAbstractItemView::ScrollPerItem;
      m_view->verticalScrollBar()->setValue(perItem ? m_view->verticalHeader()->visualIndex(row)
                                                    : m_view->verticalHeader()->sectionPosition(row));
    });
  });
  connect(m_model, &QAbstractItemModel::modelReset, this, [this] { updateButtons(); });
  connect(m_view, &QTableView::doubleClicked, this,
          [this](const QModelIndex& idx) { Q_EMIT logRequested(m_model->runIdAt(idx.row())); });
  updateButtons();
}

qint64 JobsPanel::selectedRunId() const {
  const auto rows = m_view->selectionModel()->selectedRows();
  return rows.isEmpty() ? 0 : m_model->runIdAt(rows.first().row());
}

void JobsPanel::updateButtons() {
  const JobInfo* j = m_jobs->job(selectedRunId());
  m_cancel->setEnabled(j != nullptr && j->isActive());
  m_retry->setEnabled(j != nullptr && !j->isActive() && j->status != RunStatus::Completed);
  m_log->setEnabled(j != nullptr);
}

}  // namespace latentlab::ui
