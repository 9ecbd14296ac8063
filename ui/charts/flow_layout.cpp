// Wrapping layout; see flow_layout.h.
#include "charts/flow_layout.h"

#include <QWidget>
#include <algorithm>

namespace latentlab::ui {

FlowLayout::FlowLayout(QWidget* parent, int hSpacing, int vSpacing)
    : QLayout(parent), m_hSpacing(hSpacing), m_vSpacing(vSpacing) {}

FlowLayout::~FlowLayout() {
  while (QLayoutItem* item = takeAt(0)) delete item;
}

void FlowLayout::addItem(QLayoutItem* item) {
  m_items.append(item);
}

void FlowLayout::insertWidget(int index, QWidget* widget) {
  addChildWidget(widget);
  m_items.insert(std::clamp(index, 0, count()), new QWidgetItem(widget));
  invalidate();
}

QLayoutItem* FlowLayout::takeAt(int index) {
  return index >= 0 && index < m_items.size() ? m_items.takeAt(index) : nullptr;
}

QSize FlowLayout::minimumSize() const {
  // As narrow as the widest item; as tall as that width needs.
  QSize size;
  for (const QLayoutItem* item : m_items) size = size.expandedTo(item->minimumSize());
  const QMargins m = contentsMargins();
  size += QSize(m.left() + m.right(), m.top() + m.bottom());
  return {size.width(), std::max(size.height(), heightForWidth(size.width()))};
}

void FlowLayout::setGeometry(const QRect& rect) {
  QLayout::setGeometry(rect);
  place(rect, /*apply=*/true);
}

int FlowLayout::place(const QRect& rect, bool apply) const {
  const QRect area = rect.marginsRemoved(contentsMargins());
  int x = area.x(), y = area.y(), rowHeight = 0;
  QList<std::pair<QLayoutItem*, QRect>> row;
  auto flushRow = [&] {
    // Items of a row centred vertically on the row.
    if (apply) {
      for (auto& [item, r] : row)
        item->setGeometry(QRect(r.x(), r.y() + (rowHeight - r.height()) / 2, r.width(), r.height()));
    }
    row.clear();
  };
  for (QLayoutItem* item : m_items) {
    if (item->isEmpty()) continue;
    const QSize hint = item->sizeHint();
    if (x > area.x() && x + hint.width() > area.right() + 1) {
      flushRow();
      x = area.x();
      y += rowHeight + m_vSpacing;
      rowHeight = 0;
    }
    row.append({item, QRect(QPoint(x, y), hint)});
    x += hint.width() + m_hSpacing;
    rowHeight = std::max(rowHeight, hint.height());
  }
  flushRow();
  const QMargins m = contentsMargins();
  return y + rowHeight - rect.y() + m.bottom();
}

}  // namespace latentlab::ui
