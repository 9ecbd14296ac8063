// The compare table: one row per selected run (its name also the row header,
// so it stays in view), its columns the run, final and best validation loss,
// validation loss at matched tokens (the fewest any selected run reached),
// tokens trained, KV bytes per token and saving against the original,
// parameters, tokens/s and status, each eval task's accuracy (at the newest
// step it was scored), then the config fields that differ between the
// selected runs (flattened spec paths). The best value of each metric is
// highlighted. Values of running or queued runs come from their
// newest metric rows, of finished ones from the summary.
#pragma once

#include <QAbstractTableModel>
#include <QMap>
#include <QSet>
#include <QStringList>
#include <QVector>
#include <memory>
#include <optional>
#include <vector>

#include "charts/compare_math.h"

namespace latentlab {
class RunStore;
}

namespace latentlab::ui {

struct ChartRun;

// `runs` less the evaluation jobs whose figures are stored under another run
// of the list (they have no rows or curves of their own to show).
QVector<ChartRun> withoutEvaluationsOfListed(const RunStore& store, const QVector<ChartRun>& runs);

class CompareTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Role { RunIdRole = Qt::UserRole + 1, SortRole };

  explicit CompareTableModel(std::shared_ptr<RunStore> store, QObject* parent = nullptr);

  void setRuns(const QVector<qint64>& runIds);
  // Re-reads the runs (statuses, newest rows, summaries).
  void refresh();
  QStringList differingFields() const { return m_fields; }
  // The column of a fixed field ("final_val_loss", "best_val_loss",
  // "matched_val_loss", "tokens", "kv_bytes_per_token", "kv_saving",
  // "parameters", "tokens_per_s", "status"), of an eval task ("task:<name>"),
  // or of a config path; -1 when absent.
  int columnOf(const QString& key) const;
  std::optional<double> matchedTokens() const { return m_matchedTokens; }
  // The best value of a metric column among the rows (none: no ranking).
  std::optional<double> bestOf(int column) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // The dtype every run's KV bytes are counted in, empty when they differ or are not said.
  QString sharedKvDtype() const { return m_sharedKvDtype; }

 private:
  struct Row {
    qint64 id = 0;
    QString name;
    RunStatus status = RunStatus::Queued;
    QMap<QString, QString> spec;  // flattened
    std::optional<double> finalVal, bestVal, matchedVal, kvSaving, tokensPerS;
    std::vector<CurvePoint> val;  // (tokens, validation loss)
    // A multiple-choice task's acc, a held-out text's loss ("loss"), or the
    // passkey grid's share of trials answered over all its cells.
    struct TaskScore {
      std::int64_t step = -1;
      std::optional<double> acc, accNorm, loss, passkey;
      double accStderr = 0;
      std::int64_t items = 0;
      int cells = 0;  // passkey: the grid's cells at that step
      bool partial = false;
      // The figure the column shows, and whether lower is better.
      std::optional<double> shown() const { return acc ? acc : loss ? loss : passkey; }
    };
    QMap<QString, TaskScore> tasks;  // eval task -> its figures at the newest step scored
    std::optional<qint64> tokens, kvBytes, parameters;
    QString kvDtype;  // the dtype the run trains in, which its KV bytes are counted in
  };
  Row load(qint64 id) const;
  QVariant value(const Row& r, int column, bool forSort) const;
  std::optional<double> computeBest(int column) const;
  void updateBest();

  std::shared_ptr<RunStore> m_store;
  QVector<qint64> m_ids;
  QVector<Row> m_rows;
  QStringList m_fields;
  QStringList m_tasks;        // eval tasks any selected run was scored on
  QSet<QString> m_lossTasks;  // those whose figure is a loss (lower is better)
  std::optional<double> m_matchedTokens;
  QVector<std::optional<double>> m_best;  // per column, from the last refresh
  QString m_sharedKvDtype;                // computed with the best marks, once per refresh
};

}  // namespace latentlab::ui
