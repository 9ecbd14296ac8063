// Per-layer d_kv bars of a KV budget.
#include "charts/kv_allocation_view.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QValueAxis>
#include <algorithm>

#include "charts/axis_ticks.h"
#include "charts/small_chart.h"

namespace latentlab::ui {

KvAllocationView::KvAllocationView(QWidget* parent) : QWidget(parent) {
  m_chart = new QChart;
  m_chart->setMargins(QMargins(0, 0, 0, 0));
  m_chart->setBackgroundRoundness(0);
  m_chart->legend()->setAlignment(Qt::AlignTop);
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.8);
  m_chart->legend()->setFont(small);
  m_allocated = new QBarSet(tr("own d_kv per layer"));
  m_allocated->setColor(QColor(0x1f77b4));
  m_allocated->setBorderColor(QColor(0x1f77b4));
  m_uniform = new QBarSet(tr("uniform d_kv"));
  m_uniform->setColor(QColor(0xb0b0b0));
  m_uniform->setBorderColor(QColor(0xb0b0b0));
  m_series = new QBarSeries;
  m_series->append(m_allocated);
  m_series->append(m_uniform);
  m_chart->addSeries(m_series);
  m_x = new QBarCategoryAxis;
  m_x->setTitleText(tr("layer"));
  m_y = new QValueAxis;
  m_y->setTitleText(QStringLiteral("d_kv"));
  m_y->setLabelFormat(QStringLiteral("%d"));
  m_y->setTickType(QValueAxis::TicksDynamic);
  m_y->setTickAnchor(0);
  for (auto* axis : {static_cast<QAbstractAxis*>(m_x), static_cast<QAbstractAxis*>(m_y)}) {
    axis->setLabelsFont(small);
    axis->setTitleFont(small);
  }
  embedChart(this, m_chart, m_series, m_x, m_y, 170);
}

void KvAllocationView::setAllocation(const KvAllocation& a) {
  std::vector<int> uniform;
  for (int d : a.layerDKv) uniform.push_back(d > 0 ? a.limits.uniformDKv : 0);
  setBars(a.layerDKv, uniform, a.limits.uniformDKv);
}

void KvAllocationView::setUniform(const std::vector<int>& uniformDKv) {
  int d = 0;
  for (int u : uniformDKv) d = std::max(d, u);
  setBars({}, uniformDKv, d);
}

void KvAllocationView::setBars(const std::vector<int>& allocated, const std::vector<int>& uniform, int uniformDKv) {
  m_allocated->remove(0, m_allocated->count());
  m_uniform->remove(0, m_uniform->count());
  QStringList layers;
  int top = 1;
  for (std::size_t l = 0; l < uniform.size(); ++l) {
    layers << QString::number(l);
    m_uniform->append(uniform[l]);
    top = std::max(top, uniform[l]);
    if (!allocated.empty()) {
      m_allocated->append(allocated[l]);
      top = std::max(top, allocated[l]);
    }
  }
  m_uniform->setLabel(tr("uniform d_kv %1").arg(uniformDKv));
  m_x->clear();
  m_x->append(layers);
  m_y->setRange(0, top * 1.15);
  m_y->setTickInterval(std::max(1.0, niceStep(0, top * 1.15, 4)));
}

std::vector<double> KvAllocationView::allocatedBars() const {
  std::vector<double> out;
  for (int i = 0; i < m_allocated->count(); ++i) out.push_back(m_allocated->at(i));
  return out;
}

std::vector<double> KvAllocationView::uniformBars() const {
  std::vector<double> out;
  for (int i = 0; i < m_uniform->count(); ++i) out.push_back(m_uniform->at(i));
  return out;
}

}  // namespace latentlab::ui
