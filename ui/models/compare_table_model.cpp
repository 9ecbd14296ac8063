// Compare table over the run store; see compare_table_model.h.
#include "models/compare_table_model.h"

#include <QSet>

#include <QColor>
#include <QFont>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <algorithm>
#include <cmath>
#include <iterator>

#include "charts/chart_view.h"
#include "charts/run_palette.h"
#include "latentlab/error.h"
#include "latentlab/kv_quant.h"
#include "latentlab/run_store.h"
#include "models/spec_diff.h"

namespace latentlab::ui {

namespace {

// The fixed columns, the losses and the KV figures first so that they are in
// view together at the common window sizes.
const QStringList& fixedKeys() {
  static const QStringList keys = {
      QStringLiteral("final_val_loss"),     QStringLiteral("matched_val_loss"), QStringLiteral("kv_saving"),
      QStringLiteral("kv_bytes_per_token"), QStringLiteral("best_val_loss"),    QStringLiteral("tokens"),
      QStringLiteral("parameters"),         QStringLiteral("tokens_per_s"),     QStringLiteral("status")};
  return keys;
}

// Which way is better for a fixed column (-1 lower, +1 higher, 0 neither).
int betterDirection(int fixed) {
  static const QStringList lower = {QStringLiteral("final_val_loss"), QStringLiteral("best_val_loss"),
                                    QStringLiteral("matched_val_loss"), QStringLiteral("kv_bytes_per_token")};
  static const QStringList higher = {QStringLiteral("kv_saving"), QStringLiteral("tokens_per_s")};
  const QString& key = fixedKeys()[fixed];
  return lower.contains(key) ? -1 : higher.contains(key) ? +1 : 0;
}

QString compactCount(double v) {
  if (v >= 1e9) return QStringLiteral("%1G").arg(v / 1e9, 0, 'g', 3);
  if (v >= 1e6) return QStringLiteral("%1M").arg(v / 1e6, 0, 'g', 3);
  if (v >= 1e3) return QStringLiteral("%1k").arg(v / 1e3, 0, 'g', 3);
  return QString::number(v, 'g', 3);
}

std::optional<double> numberAt(const QJsonObject& o, const char* key) {
  const QJsonValue v = o.value(QLatin1String(key));
  if (!v.isDouble()) return std::nullopt;
  return v.toDouble();
}

// The run's newest row of a metric, if any.
std::optional<MetricPoint> newestRow(const RunStore& store, qint64 id, const char* name) {
  const auto last = store.lastStep(id, name);
  if (!last) return std::nullopt;
  const auto rows = store.rowsSince(id, name, *last - 1);
  if (rows.empty()) return std::nullopt;
  return rows.back();
}

}  // namespace

QVector<ChartRun> withoutEvaluationsOfListed(const RunStore& store, const QVector<ChartRun>& runs) {
  QSet<qint64> ids;
  for (const ChartRun& r : runs) ids.insert(r.id);
  QVector<ChartRun> out;
  for (const ChartRun& r : runs) {
    try {
      const RunRecord rec = store.run(r.id);
      if (rec.kind == "eval") {
        const QMap<QString, QString> spec = flattenJson(QString::fromStdString(rec.specJson));
        const auto it = spec.constFind(QStringLiteral("evaluates.run"));
        if (it != spec.constEnd() && it->toLongLong() != r.id && ids.contains(it->toLongLong())) continue;
      }
    } catch (const Error&) {
      // deleted meanwhile: the table and chart leave it out themselves
    }
    out.push_back(r);
  }
  return out;
}

CompareTableModel::CompareTableModel(std::shared_ptr<RunStore> store, QObject* parent)
    : QAbstractTableModel(parent), m_store(std::move(store)) {}

CompareTableModel::Row CompareTableModel::load(qint64 id) const {
  Row r;
  r.id = id;
  const RunRecord rec = m_store->run(id);
  r.name = QString::fromStdString(rec.name);
  r.status = rec.status;
  r.spec = flattenJson(QString::fromStdString(rec.specJson));
  const QJsonObject summary = QJsonDocument::fromJson(QByteArray::fromStdString(rec.summaryJson)).object();
  // Validation loss from the stored rows (live and finished alike); they are few.
  for (const MetricPoint& p : m_store->rowsSince(id, "val/loss", -1)) {
    if (!std::isfinite(p.value)) continue;
    r.finalVal = p.value;
    r.bestVal = r.bestVal ? std::min(*r.bestVal, p.value) : p.value;
    r.val.push_back({static_cast<double>(p.tokens), p.value});
  }
  // A live run (or one resumed after it finished once) reads its newest rows:
  // the summary is that of its last finish.
  const bool live = rec.status == RunStatus::Running || rec.status == RunStatus::Queued;
  if (const auto t = numberAt(summary, "tokens"); t && !live)
    r.tokens = static_cast<qint64>(*t);
  else if (const auto row = newestRow(*m_store, id, "train/loss"))
    r.tokens = row->tokens;
  if (const auto v = numberAt(summary, "tokens_per_s"); v && !live)
    r.tokensPerS = *v;
  else if (const auto row = newestRow(*m_store, id, "tokens_per_s"))
    r.tokensPerS = row->value;
  // Each eval task's figures at the newest step it was scored; a passkey
  // grid's cells averaged at its newest step.
  struct Grid {
    double sum = 0;
    int cells = 0;
    std::int64_t trials = 0;
    bool partial = false;
  };
  QMap<QString, QMap<std::int64_t, Grid>> grids;
  for (const EvaluationRecord& e : m_store->listEvaluations(id)) {
    const QString task = QString::fromStdString(e.task);
    if (e.metric.rfind("len=", 0) == 0) {  // a passkey cell (passkeyMetricName)
      Grid& g = grids[task][e.step];
      g.sum += e.value;
      g.cells += 1;
      g.trials += e.items;
      g.partial = g.partial || e.partial;
      continue;
    }
    Row::TaskScore& t = r.tasks[task];
    if (e.step < t.step) continue;
    t.step = e.step;
    t.items = e.items;
    t.partial = e.partial;
    if (e.metric == "acc") {
      t.acc = e.value;
      t.accStderr = e.stderrValue;
    } else if (e.metric == "acc_norm") {
      t.accNorm = e.value;
    } else if (e.metric == "loss") {
      t.loss = e.value;
    }
  }
  for (auto it = grids.cbegin(); it != grids.cend(); ++it) {
    const auto newest = std::prev(it.value().cend());
    Row::TaskScore& t = r.tasks[it.key()];
    t.step = newest.key();
    t.passkey = newest.value().sum / newest.value().cells;
    t.cells = newest.value().cells;
    t.items = newest.value().trials;
    t.partial = newest.value().partial;
  }
  if (const auto v = numberAt(summary, "kv_bytes_per_token")) r.kvBytes = static_cast<qint64>(*v);
  r.kvDtype = summary.value(QStringLiteral("kv_dtype")).toString();
  // The summary's kv_saving is the cache's relative change (negative: smaller);
  // the table shows the saving, positive for a smaller cache.
  if (const auto v = numberAt(summary, "kv_saving")) r.kvSaving = *v == 0.0 ? 0.0 : -*v;
  if (const auto v = numberAt(summary, "parameters")) r.parameters = static_cast<qint64>(*v);
  return r;
}

void CompareTableModel::setRuns(const QVector<qint64>& runIds) {
  m_ids = runIds;
  beginResetModel();
  m_rows.clear();
  m_fields.clear();
  m_best.clear();
  endResetModel();
  refresh();
}

void CompareTableModel::refresh() {
  QVector<Row> rows;
  for (qint64 id : m_ids) {
    try {
      rows.push_back(load(id));
    } catch (const Error& e) {
      qWarning("compare table: %s", e.message().c_str());  // deleted meanwhile: left out
    }
  }

  // Validation loss at the same tokens for every run: the fewest tokens any
  // of them reached, each run's curve interpolated there.
  m_matchedTokens.reset();
  for (const Row& r : rows) {
    if (r.val.empty()) continue;
    m_matchedTokens = m_matchedTokens ? std::min(*m_matchedTokens, r.val.back().x) : r.val.back().x;
  }
  if (m_matchedTokens && *m_matchedTokens <= 0) m_matchedTokens.reset();  // only the untrained start: nothing to match
  for (Row& r : rows) {
    if (m_matchedTokens) r.matchedVal = interpolateAt(r.val, *m_matchedTokens);
  }
  QStringList tasks;
  m_lossTasks.clear();
  for (const Row& r : rows) {
    for (auto it = r.tasks.cbegin(); it != r.tasks.cend(); ++it) {
      if (!tasks.contains(it.key())) tasks << it.key();
      if (it->loss) m_lossTasks.insert(it.key());
    }
  }
  // By task, each task's caches from full precision down (int8, int4, int2).
  std::sort(tasks.begin(), tasks.end(), [](const QString& a, const QString& b) {
    const auto [ta, qa] = splitKvQuantTaskName(a.toStdString());
    const auto [tb, qb] = splitKvQuantTaskName(b.toStdString());
    const auto rank = [](const KvQuantSettings& q) { return q.on() ? 16 - q.bits : 0; };
    if (ta != tb) return ta < tb;
    if (rank(qa) != rank(qb)) return rank(qa) < rank(qb);
    return a < b;
  });
  QVector<QMap<QString, QString>> specs;
  for (const Row& r : rows) specs.push_back(r.spec);
  const QStringList fields =
      rows.size() > 1 ? latentlab::ui::differingFields(specs, {QStringLiteral("name")}) : QStringList{};
  bool sameShape = fields == m_fields && tasks == m_tasks && rows.size() == m_rows.size();
  for (qsizetype i = 0; sameShape && i < rows.size(); ++i) sameShape = rows[i].id == m_rows[i].id;
  if (!sameShape) {
    beginResetModel();
    m_rows = std::move(rows);
    m_fields = fields;
    m_tasks = tasks;
    updateBest();
    endResetModel();
    return;
  }
  m_rows = std::move(rows);
  updateBest();
  if (!m_rows.isEmpty()) Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
}

void CompareTableModel::updateBest() {
  // Once per refresh, not per painted cell.
  m_best.clear();
  for (int c = 0; c < columnCount(); ++c) m_best.push_back(computeBest(c));
  QSet<QString> dtypes;
  for (const Row& r : m_rows)
    if (r.kvBytes) dtypes.insert(r.kvDtype);
  m_sharedKvDtype = dtypes.size() == 1 ? *dtypes.begin() : QString();
}

int CompareTableModel::columnOf(const QString& key) const {
  if (key == QLatin1String("run")) return 0;
  const qsizetype k = fixedKeys().indexOf(key);
  if (k >= 0) return 1 + static_cast<int>(k);
  if (key.startsWith(QLatin1String("task:"))) {
    const qsizetype t = m_tasks.indexOf(key.mid(5));
    return t >= 0 ? 1 + static_cast<int>(fixedKeys().size() + t) : -1;
  }
  const qsizetype f = m_fields.indexOf(key);
  return f >= 0 ? 1 + static_cast<int>(fixedKeys().size() + m_tasks.size() + f) : -1;
}

std::optional<double> CompareTableModel::bestOf(int column) const {
  return column >= 0 && column < m_best.size() ? m_best[column] : std::nullopt;
}

std::optional<double> CompareTableModel::computeBest(int column) const {
  const int fixed = column - 1;
  const int nFixed = static_cast<int>(fixedKeys().size());
  // Fixed metrics rank as betterDirection says; task accuracies and passkey
  // shares higher is better, held-out losses lower.
  const int direction = fixed < 0                         ? 0
                        : fixed < nFixed                  ? betterDirection(fixed)
                        : fixed < nFixed + m_tasks.size() ? (m_lossTasks.contains(m_tasks[fixed - nFixed]) ? -1 : +1)
                                                          : 0;
  if (direction == 0 || m_rows.size() < 2) return std::nullopt;
  std::optional<double> best, worst;
  for (const Row& r : m_rows) {
    const QVariant v = value(r, column, true);
    if (!v.isValid() || v.isNull()) continue;
    const double d = v.toDouble();
    if (!best || (direction < 0 ? d < *best : d > *best)) best = d;
    if (!worst || (direction < 0 ? d > *worst : d < *worst)) worst = d;
  }
  if (best && worst && *best == *worst) return std::nullopt;  // all alike: nothing stands out
  return best;
}

int CompareTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int CompareTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 1 + static_cast<int>(fixedKeys().size() + m_tasks.size() + m_fields.size());
}

QVariant CompareTableModel::value(const Row& r, int column, bool forSort) const {
  if (column == 0) return r.name;
  const int nFixed = static_cast<int>(fixedKeys().size());
  const int nTasks = static_cast<int>(m_tasks.size());
  if (column > nFixed && column <= nFixed + nTasks) {
    // An eval task: its acc (loss, passkey share) at the newest step scored.
    const auto it = r.tasks.constFind(m_tasks[column - 1 - nFixed]);
    const std::optional<double> v = it == r.tasks.constEnd() ? std::nullopt : it->shown();
    if (!v) return forSort ? QVariant() : QVariant(QStringLiteral("—"));
    if (forSort) return *v;
    const QString text = it->loss      ? QString::number(*v, 'f', 4)
                         : it->passkey ? QStringLiteral("%1%").arg(*v * 100.0, 0, 'f', 0)
                                       : QString::number(*v, 'f', 3);
    return text + (it->partial ? QStringLiteral("*") : QString());
  }
  if (column > nFixed + nTasks) {
    const auto it = r.spec.constFind(m_fields[column - 1 - nFixed - nTasks]);
    if (it == r.spec.constEnd()) return forSort ? QVariant(QString()) : QVariant(QStringLiteral("—"));
    QString v = *it;
    if (v.size() >= 2 && v.startsWith(QLatin1Char('"')) && v.endsWith(QLatin1Char('"'))) v = v.mid(1, v.size() - 2);
    if (forSort) {
      bool ok = false;
      const double d = v.toDouble(&ok);
      if (ok) return d;
    }
    return v;
  }
  const QLocale loc;
  auto num = [&](const auto& opt, auto format) -> QVariant {
    if (!opt) return forSort ? QVariant() : QVariant(QStringLiteral("—"));
    if (forSort) return QVariant::fromValue(static_cast<double>(*opt));
    return format(*opt);
  };
  const QString& key = fixedKeys()[column - 1];
  const auto loss = [](double v) { return QString::number(v, 'f', 4); };
  if (key == QLatin1String("final_val_loss")) return num(r.finalVal, loss);
  if (key == QLatin1String("best_val_loss")) return num(r.bestVal, loss);
  if (key == QLatin1String("matched_val_loss")) return num(r.matchedVal, loss);
  if (key == QLatin1String("tokens")) return num(r.tokens, [&](qint64 v) { return loc.toString(v); });
  if (key == QLatin1String("kv_bytes_per_token")) {
    // The dtype in the header when the runs share it, else beside each figure.
    return num(r.kvBytes, [&](qint64 v) {
      return r.kvDtype.isEmpty() || !sharedKvDtype().isEmpty()
                 ? loc.toString(v)
                 : QStringLiteral("%1 (%2)").arg(loc.toString(v), r.kvDtype);
    });
  }
  if (key == QLatin1String("kv_saving"))
    return num(r.kvSaving, [](double v) { return QStringLiteral("%1%").arg(v * 100.0, 0, 'f', 1); });
  if (key == QLatin1String("parameters")) return num(r.parameters, [&](qint64 v) { return loc.toString(v); });
  if (key == QLatin1String("tokens_per_s")) return num(r.tokensPerS, [&](double v) { return loc.toString(v, 'f', 0); });
  if (key == QLatin1String("status")) return QString::fromLatin1(runStatusName(r.status));
  return {};
}

QVariant CompareTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
  const Row& r = m_rows[index.row()];
  switch (role) {
    case Qt::DisplayRole:
      return value(r, index.column(), false);
    case SortRole:
      return value(r, index.column(), true);
    case RunIdRole:
      return r.id;
    case Qt::DecorationRole:
      if (index.column() == 0) return runColor(r.id);
      break;
    case Qt::ForegroundRole:
      if (index.column() == columnOf(QStringLiteral("status"))) return statusColor(r.status);
      break;
    case Qt::FontRole:
    case Qt::BackgroundRole:
      if (const auto best = bestOf(index.column())) {
        const QVariant v = value(r, index.column(), true);
        if (v.isValid() && !v.isNull() && v.toDouble() == *best) {
          if (role == Qt::BackgroundRole) return QColor(46, 125, 50, 40);
          QFont f;
          f.setBold(true);
          return f;
        }
      }
      break;
    case Qt::TextAlignmentRole:
      // Figures right-aligned: the fixed metrics before the status and the eval tasks after it.
      if (index.column() > 0 && index.column() != columnOf(QStringLiteral("status")) &&
          index.column() <= static_cast<int>(fixedKeys().size() + m_tasks.size()))
        return QVariant(static_cast<int>(Qt::AlignRight | Qt::AlignVCenter));
      break;
    case Qt::ToolTipRole: {
      if (index.column() == 0) return tr("%1 (run #%2)").arg(r.name).arg(r.id);
      const int task = index.column() - 1 - static_cast<int>(fixedKeys().size());
      if (task >= 0 && task < m_tasks.size()) {
        const auto it = r.tasks.constFind(m_tasks[task]);
        if (it != r.tasks.constEnd() && it->loss) {
          return tr("%1 at step %2: mean next-token loss %3 over %4 tokens")
              .arg(m_tasks[task])
              .arg(it->step)
              .arg(*it->loss, 0, 'f', 6)
              .arg(QLocale().toString(it->items));
        }
        if (it != r.tasks.constEnd() && it->passkey) {
          return tr("%1 at step %2: %3% of %4 trials over %5 cells (length x depth)%6")
              .arg(m_tasks[task])
              .arg(it->step)
              .arg(*it->passkey * 100.0, 0, 'f', 1)
              .arg(it->items)
              .arg(it->cells)
              .arg(it->partial ? tr(" (cut short)") : QString());
        }
        if (it != r.tasks.constEnd() && it->acc) {
          return tr("%1 at step %2: acc %3 ± %4, acc_norm %5, %6 items%7")
              .arg(m_tasks[task])
              .arg(it->step)
              .arg(*it->acc, 0, 'f', 4)
              .arg(it->accStderr, 0, 'f', 4)
              .arg(it->accNorm ? QString::number(*it->accNorm, 'f', 4) : QStringLiteral("—"))
              .arg(it->items)
              .arg(it->partial ? tr(" (a subset)") : QString());
        }
      }
      return value(r, index.column(), false);
    }
    default:
      break;
  }
  return {};
}

QVariant CompareTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation == Qt::Vertical) {
    // The run's name as the row header: it stays in view however far the
    // table scrolls to the right (a frozen Run column).
    if (section < 0 || section >= rowCount()) return {};
    const Row& r = m_rows[section];
    if (role == Qt::DisplayRole) return r.name;
    if (role == Qt::DecorationRole) return runColor(r.id);
    if (role == Qt::ToolTipRole) return tr("%1 (run #%2)").arg(r.name).arg(r.id);
    return {};
  }
  if (section < 0 || section >= columnCount()) return {};
  const int nFixed = static_cast<int>(fixedKeys().size());
  const int nTasks = static_cast<int>(m_tasks.size());
  if (role == Qt::DisplayRole) {
    if (section == 0) return tr("Run");
    if (section > nFixed + nTasks) return m_fields[section - 1 - nFixed - nTasks];
    if (section > nFixed) {
      // "arc acc", "held-out loss", "passkey"; a quantized cache on a second line.
      const QString& stored = m_tasks[section - 1 - nFixed];
      const auto [task, cache] = splitKvQuantTaskName(stored.toStdString());
      const QString name = QString::fromStdString(task);
      const bool passkey = name == QLatin1String("passkey");
      const QString title = passkey                        ? name
                            : m_lossTasks.contains(stored) ? tr("%1 loss").arg(name)
                                                           : tr("%1 acc").arg(name);
      // "int4 cache" on the second line, a group or window other than the default on a third.
      QString label = QString::fromStdString(kvQuantLabel(cache));
      if (const qsizetype cut = label.indexOf(QStringLiteral(", ")); cut >= 0) label.replace(cut, 2, QLatin1Char('\n'));
      return cache.on() ? title + QLatin1Char('\n') + label : title;
    }
    // Two-line titles keep the columns narrow (the losses and the KV figures
    // fit beside each other at 1280 px).
    const QString& key = fixedKeys()[section - 1];
    if (key == QLatin1String("final_val_loss")) return tr("Final\nval loss");
    if (key == QLatin1String("best_val_loss")) return tr("Best\nval loss");
    if (key == QLatin1String("matched_val_loss")) {
      return m_matchedTokens ? tr("Val loss\n@ %1 tok").arg(compactCount(*m_matchedTokens)) : tr("Val loss\n@ tokens");
    }
    if (key == QLatin1String("kv_saving")) return tr("KV\nsaving");
    if (key == QLatin1String("kv_bytes_per_token")) {
      // In the dtype the runs train in: said once when they share it.
      const QString dtype = sharedKvDtype();
      return dtype.isEmpty() ? tr("KV bytes/token") : tr("KV bytes/tok\n(%1)").arg(dtype);
    }
    if (key == QLatin1String("tokens")) return tr("Tokens");
    if (key == QLatin1String("parameters")) return tr("Parameters");
    if (key == QLatin1String("tokens_per_s")) return tr("Tokens/s");
    return tr("Status");
  }
  if (role == Qt::ToolTipRole) {
    if (section > nFixed + nTasks) {
      return tr("%1: a config field that differs between the selected runs")
          .arg(m_fields[section - 1 - nFixed - nTasks]);
    }
    if (section > nFixed) {
      const QString& task = m_tasks[section - 1 - nFixed];
      if (m_lossTasks.contains(task))
        return tr("%1: the mean next-token loss over the held-out text at the newest step it was scored").arg(task);
      if (splitKvQuantTaskName(task.toStdString()).first == "passkey")
        return tr("%1: the share of passkey trials answered over the whole grid at the newest step it was scored")
            .arg(task);
      return tr("Accuracy on the eval task %1 at the newest step it was scored (* : a --limit subset)").arg(task);
    }
    if (section == columnOf(QStringLiteral("kv_saving"))) {
      return tr(
          "How much smaller the run's KV cache is than its reference (positive: smaller): the source model's "
          "cache for a conversion, multi-head attention with the same heads for a model trained from scratch");
    }
    if (section == columnOf(QStringLiteral("kv_bytes_per_token")) && !sharedKvDtype().isEmpty()) {
      return tr("KV bytes/token (%1)").arg(sharedKvDtype());
    }
    if (section == columnOf(QStringLiteral("matched_val_loss")) && m_matchedTokens) {
      return tr("Validation loss of every run at %1 tokens (the fewest any selected run reached), interpolated on its "
                "validation curve")
          .arg(QLocale().toString(*m_matchedTokens, 'f', 0));
    }
    return headerData(section, orientation, Qt::DisplayRole).toString().replace(QLatin1Char('\n'), QLatin1Char(' '));
  }
  return {};
}

}  // namespace latentlab::ui
