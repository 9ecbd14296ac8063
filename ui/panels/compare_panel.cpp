// Compare view: chart with compare modes, and the compare table.
#include "panels/compare_panel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QScrollBar>
#include <QTableView>
#include <QVBoxLayout>

#include "models/compare_table_model.h"
#include "preset_loader.h"

namespace latentlab::ui {

ComparePanel::ComparePanel(std::shared_ptr<RunStore> store, QWidget* parent) : QWidget(parent) {
  m_chart = new ChartView(store);
  m_model = new CompareTableModel(store, this);
  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(m_model);
  proxy->setSortRole(CompareTableModel::SortRole);
  m_table = new QTableView;
  m_table->setModel(proxy);
  m_table->setSortingEnabled(true);
  m_table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);  // run order until a header is clicked
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setAlternatingRowColors(true);
  // The run names as row headers: they stay in view while the table scrolls
  // right (the model's Run column would scroll away, so it is hidden).
  m_table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->verticalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  m_table->setColumnHidden(0, true);
  connect(proxy, &QAbstractItemModel::modelReset, m_table, [this] { m_table->setColumnHidden(0, true); });
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setStretchLastSection(true);

  m_modeBox = new QComboBox;
  m_modeBox->addItem(tr("Overlay"));
  m_modeBox->addItem(tr("Difference to baseline"));
  m_modeBox->addItem(tr("Paired (no scale − scaled)"));
  m_modeBox->setMinimumContentsLength(12);  // the long entries show in the open list
  m_modeBox->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_modeBox->setToolTip(tr("Overlay the runs, plot each run minus a baseline run, or the difference within each "
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

void ComparePanel::setRuns(const QVector<ChartRun>& runs) {
  m_note.clear();  // a preset's note comes back with applyPresetChart
  m_chart->setRuns(runs);
  // A compare mode with nothing to draw for this selection falls back to the overlay.
  const CompareMode mode = m_chart->compareMode();
  if ((mode == CompareMode::Paired && m_chart->pairs().empty()) || (mode == CompareMode::Difference && runs.size() < 2)) {
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
  m_chart->setXAxis(chart.x == QLatin1String("tokens")       ? ChartView::XAxis::Tokens
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
  setCompareMode(!difference ? CompareMode::Curves : chart.pairs.isEmpty() ? CompareMode::Difference : CompareMode::Paired);
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

void ComparePanel::refreshTable() { m_model->refresh(); }

QString ComparePanel::caption() const { return m_caption->text(); }

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

} // namespace latentlab::ui
