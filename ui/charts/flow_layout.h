// A layout that places its items left to right and wraps to a new row when
// the width runs out (a toolbar that fits any pane width instead of forcing
// the window wider). Items keep their size hints; rows are as tall as their
// tallest item.
#pragma once

#include <QLayout>
#include <QList>

namespace latentlab::ui {

class FlowLayout : public QLayout {
 public:
  explicit FlowLayout(QWidget* parent = nullptr, int hSpacing = 6, int vSpacing = 4);
  ~FlowLayout() override;

  void addItem(QLayoutItem* item) override;
  void insertWidget(int index, QWidget* widget);
  int count() const override { return static_cast<int>(m_items.size()); }
  QLayoutItem* itemAt(int index) const override { return m_items.value(index); }
  QLayoutItem* takeAt(int index) override;
  Qt::Orientations expandingDirections() const override { return {}; }
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override { return place(QRect(0, 0, width, 0), /*apply=*/false); }
  QSize minimumSize() const override;
  QSize sizeHint() const override { return minimumSize(); }
  void setGeometry(const QRect& rect) override;

 private:
  // Lays the items out in `rect` (moving them when `apply`); returns the height used.
  int place(const QRect& rect, bool apply) const;

  QList<QLayoutItem*> m_items;
  int m_hSpacing;
  int m_vSpacing;
};

}  // namespace latentlab::ui
