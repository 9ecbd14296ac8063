// The run chart's bar of controls (metric, x, log y, outliers, smoothing,
// grouping, grid, reset, export) and its export dialog; see chart_view.h.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSlider>

#include "charts/chart_view.h"
#include "charts/flow_layout.h"

namespace latentlab::ui {

QWidget* ChartView::buildBar() {
  m_metricBox = new QComboBox;
  m_metricBox->addItem(tr("Loss (train, val)"), QStringLiteral("loss"));
  m_metricBox->addItem(tr("Validation loss"), QStringLiteral("val/loss"));
  m_metricBox->addItem(tr("Learning rate"), QStringLiteral("lr"));
  m_metricBox->addItem(tr("Gradient norm"), QStringLiteral("grad_norm"));
  m_metricBox->addItem(tr("Tokens per second"), QStringLiteral("tokens_per_s"));
  m_xBox = new QComboBox;
  m_xBox->addItem(tr("Step"));
  m_xBox->addItem(tr("Tokens"));
  m_xBox->addItem(tr("Wall time"));
  m_logBox = new QCheckBox(tr("Log y"));
  m_outlierBox = new QCheckBox(tr("Ignore outliers"));
  m_outlierBox->setChecked(m_ignoreOutliers);
  m_outlierBox->setToolTip(tr("Fit y to the 5th-95th percentile of the visible values (early spikes stay off-scale)"));
  connect(m_outlierBox, &QCheckBox::toggled, this, [this](bool on) { setIgnoreOutliers(on); });
  connect(m_metricBox, &QComboBox::currentIndexChanged, this,
          [this](int i) { setMetric(m_metricBox->itemData(i).toString()); });
  connect(m_xBox, &QComboBox::currentIndexChanged, this, [this](int i) {
    setXAxis(i == 1 ? XAxis::Tokens : i == 2 ? XAxis::WallTime : XAxis::Step);
  });
  connect(m_logBox, &QCheckBox::toggled, this, [this](bool on) { setLogY(on); });
  m_smoothSlider = new QSlider(Qt::Horizontal);
  m_smoothSlider->setRange(0, 99);
  m_smoothSlider->setValue(static_cast<int>(m_smoothing * 100));
  m_smoothSlider->setFixedWidth(90);
  m_smoothSlider->setToolTip(tr("Smoothing of train curves (TensorBoard's debiased moving average)"));
  m_smoothLabel = new QLabel(QString::number(m_smoothing, 'f', 2));
  connect(m_smoothSlider, &QSlider::valueChanged, this, [this](int v) { setSmoothing(v / 100.0); });

  // The controls wrap onto a second row in a narrow pane instead of
  // widening the window.
  auto* barHost = new QWidget;
  m_bar = new FlowLayout(barHost, 10, 4);
  m_bar->setContentsMargins(8, 6, 8, 0);
  m_bar->addWidget(labelled(tr("Metric"), m_metricBox));
  m_bar->addWidget(labelled(tr("x"), m_xBox));
  m_bar->addWidget(m_logBox);
  m_bar->addWidget(m_outlierBox);
  m_bar->addWidget(labelled(tr("Smoothing"), m_smoothSlider, m_smoothLabel));
  m_groupBox = new QComboBox;
  m_groupBox->setMinimumContentsLength(10);
  m_groupBox->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_groupBox->setToolTip(
      tr("Group the runs by a config field that differs between them: each group's mean, with its "
         "min-max band (e.g. average over seeds)"));
  connect(m_groupBox, &QComboBox::currentIndexChanged, this,
          [this](int i) { setGroupBy(m_groupBox->itemData(i).toString()); });
  m_bar->addWidget(labelled(tr("Group"), m_groupBox));
  m_gridBox = new QCheckBox(tr("Grid"));
  m_gridBox->setToolTip(
      tr("Small multiples: one linked chart per metric (loss, validation loss, learning rate, "
         "gradient norm, tokens/s, ...), shared x axis and crosshair"));
  connect(m_gridBox, &QCheckBox::toggled, this, &ChartView::setGrid);
  m_bar->addWidget(m_gridBox);
  auto* resetButton = new QPushButton(tr("Reset"));
  resetButton->setToolTip(
      tr("Show every curve whole again (also: double click, right click or Home).\n"
         "Zoom x: drag across the plot, or the wheel; y follows the visible data.\n"
         "Zoom y: Ctrl+wheel. Pan: middle drag, Shift+drag or the arrow keys."));
  connect(resetButton, &QPushButton::clicked, this, &ChartView::resetView);
  auto* exportButton = new QPushButton(tr("Export…"));
  exportButton->setToolTip(tr("Save the chart as PNG or SVG, or its data as CSV"));
  connect(exportButton, &QPushButton::clicked, this, &ChartView::exportFromDialog);
  m_bar->addWidget(labelled({}, resetButton, exportButton));
  m_exportLabel = new QLabel;
  m_exportLabel->setMaximumWidth(320);
  m_exportLabel->hide();
  m_bar->addWidget(m_exportLabel);
  return barHost;
}

void ChartView::exportFromDialog() {
  QString filter;
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Export chart"), exportFolder() + QLatin1Char('/') + defaultExportName() + QStringLiteral(".png"),
      tr("PNG image, 2x (*.png);;PNG image, 4x for print (*.png);;"
         "SVG image (*.svg);;CSV data (*.csv)"),
      &filter);
  if (path.isEmpty()) return;
  const double scale = filter.contains(QLatin1String("4x")) ? 4.0 : 2.0;
  const bool ok = path.endsWith(QLatin1String(".svg"), Qt::CaseInsensitive)   ? exportSvg(path)
                  : path.endsWith(QLatin1String(".csv"), Qt::CaseInsensitive) ? exportCsv(path)
                                                                              : exportPng(path, scale);
  if (ok) QSettings().setValue(QStringLiteral("export/lastFolder"), QFileInfo(path).absolutePath());
  m_exportMessage = ok ? tr("Saved %1").arg(path) : tr("Could not write %1").arg(path);
  m_exportLabel->setText(m_exportMessage);
  m_exportLabel->setToolTip(m_exportMessage);
  m_exportLabel->setStyleSheet(ok ? QStringLiteral("color: #2e7d32;") : QStringLiteral("color: #c62828;"));
  m_exportLabel->show();
}

QString ChartView::exportFolder() const {
  const QString last = QSettings().value(QStringLiteral("export/lastFolder")).toString();
  if (!last.isEmpty() && QFileInfo(last).isDir()) return last;
  return !m_exportFolder.isEmpty() ? m_exportFolder : QDir::homePath();
}

QString ChartView::defaultExportName() const {
  // The words all selected runs share (their experiment, usually), then the metric.
  std::vector<std::string> names;
  for (const ChartRun& r : m_runs) names.push_back(r.name.toStdString());
  const std::vector<std::string> brief = withoutCommonWords(names);
  QString common;
  if (names.size() >= 2 && brief.front().size() < names.front().size()) {
    common = QString::fromStdString(names.front().substr(0, names.front().size() - brief.front().size())).trimmed();
  } else if (names.size() == 1) {
    common = m_runs.front().name;
  }
  QString name = (common.isEmpty() ? QStringLiteral("runs") : common) + QLatin1Char('-') + m_metric;
  name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9._-]+")), QStringLiteral("-"));
  return name;
}

QString ChartView::exportMessage() const {
  return m_exportMessage;
}

}  // namespace latentlab::ui
