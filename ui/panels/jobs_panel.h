// Bottom pane, jobs: the job table (progress bar, step, tokens/s, ETA) with
// cancel, retry/resume, open log and clear-finished actions.
#pragma once

#include <QWidget>

class QTableView;
class QPushButton;

namespace latentlab::ui {

class JobController;
class JobTableModel;

class JobsPanel : public QWidget {
  Q_OBJECT
 public:
  JobsPanel(JobController* jobs, JobTableModel* model, QWidget* parent = nullptr);
  QTableView* view() const { return m_view; }

 Q_SIGNALS:
  void logRequested(qint64 runId);

 private:
  qint64 selectedRunId() const;
  void updateButtons();

  JobController* m_jobs;
  JobTableModel* m_model;
  QTableView* m_view = nullptr;
  QPushButton* m_cancel = nullptr;
  QPushButton* m_retry = nullptr;
  QPushButton* m_log = nullptr;
};

}  // namespace latentlab::ui
