// Bottom pane, log: engine events and stderr of one job (or all jobs).
#pragma once

#include <QWidget>

class QPlainTextEdit;
class QLabel;

namespace latentlab::ui {

class JobController;

class LogPanel : public QWidget {
  Q_OBJECT
 public:
  explicit LogPanel(JobController* jobs, QWidget* parent = nullptr);
  // 0 = every job's lines as they come.
  void showRun(qint64 runId);
  qint64 run() const { return m_runId; }
  QString text() const;

 private:
  JobController* m_jobs;
  qint64 m_runId = 0;
  QLabel* m_title = nullptr;
  QPlainTextEdit* m_text = nullptr;
};

}  // namespace latentlab::ui
