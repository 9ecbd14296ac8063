// The Conversion tab's per-layer chart of a KV budget (docs/conversion.md,
// "A KV budget spread over layers"): each layer's own d_kv beside the one
// d_kv the same budget allows everywhere, as grouped bars.
#pragma once

#include <QWidget>

#include <vector>

#include "latentlab/kv_budget.h"

class QBarCategoryAxis;
class QBarSeries;
class QBarSet;
class QChart;
class QValueAxis;

namespace latentlab::ui {

class KvAllocationView : public QWidget {
  Q_OBJECT
 public:
  explicit KvAllocationView(QWidget* parent = nullptr);
  // Both bars of every layer (an unconverted layer: none).
  void setAllocation(const KvAllocation& a);
  // Only the uniform bars, while the layers' own are being computed.
  void setUniform(const std::vector<int>& uniformDKv);
  // The bars as drawn, one value per layer (tests read them).
  std::vector<double> allocatedBars() const;
  std::vector<double> uniformBars() const;

 private:
  void setBars(const std::vector<int>& allocated, const std::vector<int>& uniform, int uniformDKv);
  QChart* m_chart = nullptr;
  QBarSeries* m_series = nullptr;
  QBarSet* m_allocated = nullptr;
  QBarSet* m_uniform = nullptr;
  QBarCategoryAxis* m_x = nullptr;
  QValueAxis* m_y = nullptr;
};

}  // namespace latentlab::ui
