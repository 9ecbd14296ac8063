// The compare table: one row per selected run, its columns the config fields
// that differ between the selected runs (flattened spec paths), then final
// and best validation loss, tokens trained, KV bytes per token and saving
// against the original, parameters, tokens/s and status. Values of running
// runs come from their newest metric rows, of finished ones from the summary.
#pragma once

#include <QAbstractTableModel>
#include <QMap>
#include <QStringList>
#include <QVector>
#include <memory>
#include <optional>

namespace latentlab {
class RunStore;
}

namespace latentlab::ui {

class CompareTableModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Role { RunIdRole = Qt::UserRole + 1, SortRole };

  explicit CompareTableModel(std::shared_ptr<RunStore> store, QObject* parent = nullptr);

  void setRuns(const QVector<qint64>& runIds);
  // Re-reads the runs (statuses, newest rows, summaries).
  void refresh();
  QStringList differingFields() const { return m_fields; }
  // The column of a fixed field ("final_val_loss", "best_val_loss", "tokens",
  // "kv_bytes_per_token", "kv_saving", "parameters", "tokens_per_s", "status"),
  // or of a config path; -1 when absent.
  int columnOf(const QString& key) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
  struct Row {
    qint64 id = 0;
    QString name;
    QString status;
    QMap<QString, QString> spec;  // flattened
    std::optional<double> finalVal, bestVal, kvSaving, tokensPerS;
    std::optional<qint64> tokens, kvBytes, parameters;
  };
  Row load(qint64 id) const;
  QVariant value(const Row& r, int column, bool forSort) const;

  std::shared_ptr<RunStore> m_store;
  QVector<qint64> m_ids;
  QVector<Row> m_rows;
  QStringList m_fields;
};

} // namespace latentlab::ui
