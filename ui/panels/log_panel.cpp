// Log pane.
#include "panels/log_panel.h"

#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QVBoxLayout>

#include "jobs/job_controller.h"

namespace latentlab::ui {

LogPanel::LogPanel(JobController* jobs, QWidget* parent) : QWidget(parent), m_jobs(jobs) {
  m_title = new QLabel;
  auto* all = new QPushButton(tr("All jobs"));
  all->setFlat(true);
  m_text = new QPlainTextEdit;
  m_text->setReadOnly(true);
  m_text->setMaximumBlockCount(5000);
  m_text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  m_text->setLineWrapMode(QPlainTextEdit::NoWrap);
  auto* top = new QHBoxLayout;
  top->addWidget(m_title, 1);
  top->addWidget(all);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 4, 6, 4);
  layout->addLayout(top);
  layout->addWidget(m_text, 1);
  connect(all, &QPushButton::clicked, this, [this] { showRun(0); });
  connect(m_jobs, &JobController::logLine, this, [this](qint64 runId, const QString& line) {
    if (m_runId == 0)
      m_text->appendPlainText(QStringLiteral("#%1  %2").arg(runId).arg(line));
    else if (runId == m_runId)
      m_text->appendPlainText(line);
  });
  showRun(0);
}

void LogPanel::showRun(qint64 runId) {
  m_runId = runId;
  m_text->clear();
  const JobInfo* j = m_jobs->job(runId);
  if (runId == 0 || j == nullptr) {
    m_runId = 0;
    m_title->setText(tr("Log of all jobs"));
    for (qint64 id : m_jobs->jobOrder()) {
      for (const QString& line : m_jobs->job(id)->log)
        m_text->appendPlainText(QStringLiteral("#%1  %2").arg(id).arg(line));
    }
    return;
  }
  m_title->setText(tr("Log of run #%1 %2").arg(runId).arg(j->name));
  for (const QString& line : j->log) m_text->appendPlainText(line);
}

QString LogPanel::text() const {
  return m_text->toPlainText();
}

}  // namespace latentlab::ui
