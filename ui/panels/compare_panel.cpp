// Compare view: chart with compare modes, and the compare table.
#include "panels/compare_panel.h"

#include <QComboBox>
#include <QEvent>
#include <QFontMetrics>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStyle>
#include <QTableView>
#include <QVBoxLayout>

#include "models/compare_table_model.h"
#include "preset_loader.h"

#include <algorithm>

namespace latentlab::ui {

// The table's sorting proxy, which also elides the run names of its row
// headers to the header's width (QHeaderView cuts a row header's text at the
// cells rather than eliding it); the tooltip keeps the whole name.
class CompareSortProxy : public QSortFilterProxyModel {
 public:
  using QSortFilterProxyModel::QSortFilterProxyModel;
  void setRowNameWidth(int pixels, const QFont& font) {
    if (pixels == m_width && font == m_font) return;
    m_width = pixels;
    m_font = font;
    if (rowCount() > 0) Q_EMIT headerDataChanged(Qt::Vertical, 0, rowCount() - 1);
  }
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override {
    const QVariant v = QSortFilterProxyModel::headerData(section, orientation, role);
    if (orientation != Qt::Vertical || role != Qt::DisplayRole || m_width <= 0) return v;
    return QFontMetrics(m_font).elidedText(v.toString(), Qt::ElideRight, m_width);
  }

 private:
  int m_width = 0;
  QFont m_font;
};

ComparePanel::ComparePanel(std::shared_ptr<RunStore> store, QWidget* parent) : QWidget(parent), m_store(store) {
  m_chart = new ChartView(store);
  m_model = new CompareTableModel(store, this);
  auto* proxy = new CompareSortProxy(this);
  m_proxy = proxy;
  proxy->setSourceModel(m_model);
  proxy->setSortRole(CompareTableModel::SortRole);
  m_table = new QTableView;
  m_table->setModel(proxy);
  m_table->setSortingEnabled(true);
  m_table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);  // run order until a header is clicked
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setAlternatingRowColors(true);
  m_table->setWordWrap(false);  // one line a run: a long value is elided, its tooltip whole
  // The run names as row headers: they stay in view while the table scrolls
  // right (the model's Run column would scroll away, so it is hidden).
  m_table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->verticalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  // At most a third of the table's width (at least 120 px): a longer name is
  // elided (by the proxy), whole in its tooltip, so the metric columns keep
  // their room.
  m_table->installEventFilter(this);
  m_table->setColumnHidden(0, true);
  connect(proxy, &QAbstractItemModel::modelReset, m_table, [this] {
    m_table->setColumnHidden(0, true);
    fitColumns(false);
  });
  // A refresh (every few seconds while runs train) only widens a column whose
  // values outgrew it: a width the user dragged stays.
  connect(proxy, &QAbstractItemModel::dataChanged, m_table, [this] { fitColumns(true); });
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  m_table->horizontalHeader()->setStretchLastSection(true);

  m_modeBox = new QComboBox;
  m_modeBox->addItem(tr("Overlay"));
  m_modeBox->addItem(tr("Difference to baseline"));
  m_modeBox->addItem(tr("Paired (no scale − scaled)"));
  // As wide as its longest entry: a chosen mode is never cut ("Paired (no
  // scale − s"); the chart's bar wraps where the pane is narrow.
  m_modeBox->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  m_modeBox->setToolTip(
      tr("Overlay the runs, plot each run minus a baseline run, or the difference within each "
         "pair of the preset; differences are aligned by tokens with linear interpolation"));
  m_baselineBox = new QComboBox;
  m_baselineBox->setMinimumContentsLength(16);
  m_baselineBox->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_caption = new QLabel;
  m_caption->setStyleSheet(QStringLiteral("color: palette(mid);"));
  // A long caption wraps (its tooltip holds it whole) instead of widening the
  // centre pane at the expense of the run list.
  m_caption->setWordWrap(true);
  m_caption->setMinimumWidth(0);
  m_caption->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  connect(m_modeBox, &QComboBox::currentIndexChanged, this, [this](int i) {
    setCompareMode(i == 1 ? CompareMode::Difference : i == 2 ? CompareMode::Paired : CompareMode::Curves);
  });
  connect(m_baselineBox, &QComboBox::currentIndexChanged, this, [this](int i) {
    if (i >= 0) setBaseline(m_baselineBox->itemData(i).toLongLong());
  });

  // The compare controls lead the chart's own (wrapping) bar; the preset's
  // caption gets a line of its own under it.
  m_chart->insertBarWidget(0, labelled(tr("Compare"), m_modeBox));
  m_baselineGroup = labelled(tr("Baseline"), m_baselineBox);
  m_chart->insertBarWidget(1, m_baselineGroup);
  m_caption->setContentsMargins(10, 2, 10, 0);

  auto* top = new QWidget;
  auto* tl = new QVBoxLayout(top);
  tl->setContentsMargins(0, 0, 0, 0);
  tl->setSpacing(0);
  tl->addWidget(m_chart, 1);
  m_chart->insertCaption(m_caption);
  m_splitter = new QSplitter(Qt::Vertical);
  m_splitter->addWidget(top);
  m_splitter->addWidget(m_table);
  m_splitter->setStretchFactor(0, 3);
  m_splitter->setStretchFactor(1, 1);
  m_splitter->setChildrenCollapsible(false);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_splitter);
  syncControls();
}

void ComparePanel::setRuns(const QVector<ChartRun>& selected) {
  // An evaluation job of a selected run: its figures are in that run's row.
  const QVector<ChartRun> runs = withoutEvaluationsOfListed(*m_store, selected);
  m_note.clear();  // a preset's note comes back with applyPresetChart
  m_chart->setRuns(runs);
  // A compare mode with nothing to draw for this selection falls back to the overlay.
  const CompareMode mode = m_chart->compareMode();
  if ((mode == CompareMode::Paired && m_chart->pairs().empty()) ||
      (mode == CompareMode::Difference && runs.size() < 2)) {
    m_chart->setCompareMode(CompareMode::Curves);
  }
  QVector<qint64> ids;
  for (const ChartRun& r : runs) ids << r.id;
  const bool otherRuns = ids != m_shownRuns;
  m_shownRuns = ids;
  m_model->setRuns(ids);
  // Another set of runs starts at the table's first columns (run and losses),
  // not where the last experiment's sideways scroll left it.
  if (otherRuns) m_table->horizontalScrollBar()->setValue(0);
  syncControls();
}

void ComparePanel::applyPresetChart(const PresetChart& chart) {
  m_note = chart.note;
  m_chart->setMetric(chart.metric);
  if (chart.smoothing >= 0) m_chart->setSmoothing(chart.smoothing);
  m_chart->setXAxis(chart.x == QLatin1String("tokens")      ? ChartView::XAxis::Tokens
                    : chart.x == QLatin1String("wall_time") ? ChartView::XAxis::WallTime
                                                            : ChartView::XAxis::Step);
  std::vector<std::pair<std::string, std::string>> labels;
  for (const auto& [a, b] : chart.pairs) labels.emplace_back(a.toStdString(), b.toStdString());
  m_chart->setPairLabels(labels);
  for (const ChartRun& r : m_chart->runs()) {
    if (r.name.contains(QLatin1String(" base"))) {
      m_chart->setBaseline(r.id);
      break;
    }
  }
  const bool difference = chart.compare == QLatin1String("difference");
  setCompareMode(!difference             ? CompareMode::Curves
                 : chart.pairs.isEmpty() ? CompareMode::Difference
                                         : CompareMode::Paired);
  syncControls();
}

void ComparePanel::setCompareMode(CompareMode mode) {
  m_chart->setCompareMode(mode);
  syncControls();
}

void ComparePanel::setBaseline(qint64 runId) {
  m_chart->setBaseline(runId);
  syncControls();
}

void ComparePanel::refreshTable() {
  m_model->refresh();
}

void ComparePanel::fitColumns(bool growOnly) {
  // Each column as wide as its widest cell or its (two-line) title plus room
  // for the sort arrow. Qt's own fit reserves the title's whole height for
  // the arrow, which makes two-line titles wider than one-line ones.
  QHeaderView* header = m_table->horizontalHeader();
  const QFontMetrics fm(header->font());
  const int margin = header->style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, header);
  const int arrow = header->style()->pixelMetric(QStyle::PM_HeaderMarkSize, nullptr, header);
  auto* view = static_cast<QAbstractItemView*>(m_table);
  for (int c = 1; c < m_table->model()->columnCount(); ++c) {
    const QString title = m_table->model()->headerData(c, Qt::Horizontal).toString();
    const int titleWidth = fm.size(0, title).width() + 4 * margin + arrow;
    const int fit = std::max(titleWidth, view->sizeHintForColumn(c));
    if (!growOnly || fit > header->sectionSize(c)) header->resizeSection(c, fit);
  }
}

bool ComparePanel::eventFilter(QObject* watched, QEvent* event) {
  if (watched == m_table && event->type() == QEvent::Resize) {
    QHeaderView* rows = m_table->verticalHeader();
    const int cap = std::max(120, m_table->width() / 3);
    if (rows->maximumWidth() != cap) {
      rows->setMaximumWidth(cap);
      Q_EMIT rows->geometriesChanged();  // the table lays its header out again at the new cap
    }
    // The room for a name: the cap less the section's margins and the colour mark.
    const int margin = rows->style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, rows);
    m_proxy->setRowNameWidth(cap - 4 * margin - rows->style()->pixelMetric(QStyle::PM_SmallIconSize, nullptr, rows),
                             rows->font());
  }
  return QWidget::eventFilter(watched, event);
}

QString ComparePanel::caption() const {
  return m_caption->text();
}

void ComparePanel::syncControls() {
  const QSignalBlocker blockMode(m_modeBox), blockBase(m_baselineBox);
  const CompareMode mode = m_chart->compareMode();
  m_modeBox->setCurrentIndex(mode == CompareMode::Difference ? 1 : mode == CompareMode::Paired ? 2 : 0);
  m_baselineBox->clear();
  for (const ChartRun& r : m_chart->runs()) m_baselineBox->addItem(r.name, r.id);
  m_baselineBox->setCurrentIndex(m_baselineBox->findData(m_chart->baseline()));
  m_baselineGroup->setVisible(mode == CompareMode::Difference);
  QString text = m_note;
  if (mode == CompareMode::Paired) {
    const auto pairs = m_chart->pairs();
    QString line = tr("%n pair(s) among the selected runs", nullptr, static_cast<int>(pairs.size()));
    const auto missing = m_chart->unmatchedPairLabels();
    if (!missing.empty()) {
      QStringList names;
      for (const auto& n : missing) names << QString::fromStdString(n);
      line += tr("; not selected or not unique: %1").arg(names.join(QStringLiteral(", ")));
    }
    text = text.isEmpty() ? line : text + QStringLiteral(" — ") + line;
  }
  m_caption->setText(text);
  m_caption->setToolTip(text);
  m_caption->setVisible(!text.isEmpty());
}

}  // namespace latentlab::ui
