// Left pane: experiments and runs (RunTreeModel) with multi-selection; the
// selected runs (an experiment selects all of its runs) go to the chart.
#pragma once

#include <QVector>
#include <QWidget>

#include "charts/chart_view.h"

class QTreeView;

namespace latentlab::ui {

class RunTreeModel;

class RunsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RunsPanel(RunTreeModel* model, QWidget* parent = nullptr);

  QVector<ChartRun> selectedRuns() const;
  void selectRun(qint64 runId);
  QTreeView* view() const { return m_view; }

 Q_SIGNALS:
  void selectionChanged(const QVector<latentlab::ui::ChartRun>& runs);
  void retryRequested(qint64 runId);
  void cancelRequested(qint64 runId);
  void exportRequested(qint64 runId);
  // Export the run's newest checkpoint as a DeepSeek-V3 model folder.
  void exportModelRequested(qint64 runId);
  void deleteRequested(qint64 runId);
  void colorRequested(qint64 runId);

 private:
  qint64 currentRunId() const;

  RunTreeModel* m_model;
  QTreeView* m_view = nullptr;
};

}  // namespace latentlab::ui
