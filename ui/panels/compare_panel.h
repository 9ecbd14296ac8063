// The compare view: the run chart over any selected runs (across
// experiments) with its compare mode (overlay, difference to a baseline run,
// or paired differences), and beneath it the compare table (one row per run:
// the config fields that differ, losses, tokens, KV cache, parameters,
// speed, status). A preset's experiment opens on the chart of its figure.
#pragma once

#include <QVector>
#include <QWidget>
#include <memory>

#include "charts/chart_view.h"

class QComboBox;
class QLabel;
class QSplitter;
class QTableView;

namespace latentlab {
class RunStore;
}

namespace latentlab::ui {

class CompareTableModel;
class CompareSortProxy;
struct PresetChart;

class ComparePanel : public QWidget {
  Q_OBJECT
 public:
  explicit ComparePanel(std::shared_ptr<RunStore> store, QWidget* parent = nullptr);

  void setRuns(const QVector<ChartRun>& runs);
  // The preset's figure: metric, x axis, compare mode, pairs; the baseline of
  // difference mode is the run called "... base ..." when there is one.
  void applyPresetChart(const PresetChart& chart);
  void setCompareMode(CompareMode mode);
  void setBaseline(qint64 runId);
  // Re-reads the table (statuses, newest rows, summaries).
  void refreshTable();

  ChartView* chart() const { return m_chart; }
  CompareTableModel* tableModel() const { return m_model; }
  QTableView* table() const { return m_table; }
  QString caption() const;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  // Each column to its title and values; growOnly: only where they no longer fit.
  void fitColumns(bool growOnly);
  CompareSortProxy* m_proxy = nullptr;
  void syncControls();

  std::shared_ptr<RunStore> m_store;
  ChartView* m_chart = nullptr;
  CompareTableModel* m_model = nullptr;
  QTableView* m_table = nullptr;
  QVector<qint64> m_shownRuns;  // the runs the table shows
  QComboBox* m_modeBox = nullptr;
  QComboBox* m_baselineBox = nullptr;
  QWidget* m_baselineGroup = nullptr;
  QLabel* m_caption = nullptr;
  QSplitter* m_splitter = nullptr;
  QString m_note;
};

}  // namespace latentlab::ui
