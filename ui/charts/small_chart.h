// The small fixed charts of the panels (the learning-rate schedule, the KV
// budget per layer): one series on two axes, shown in the panel's widget.
#pragma once

#include <QAbstractAxis>
#include <QAbstractSeries>
#include <QChart>
#include <QChartView>
#include <QVBoxLayout>
#include <QWidget>

namespace latentlab::ui {

// Attaches `series` to x (bottom) and y (left) of `chart` and fills `host`
// with an antialiased view of it at least `minimumHeight` pixels tall.
inline void embedChart(QWidget* host, QChart* chart, QAbstractSeries* series, QAbstractAxis* x, QAbstractAxis* y,
                       int minimumHeight) {
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  auto* view = new QChartView(chart);
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumHeight(minimumHeight);
  auto* layout = new QVBoxLayout(host);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view);
}

}  // namespace latentlab::ui
