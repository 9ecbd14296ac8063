// The window's layout across sessions: the geometry, the splitters and the
// chosen tab saved on close and restored to fit the current screen, with the
// plot kept at least two fifths of the height.
#include <QGuiApplication>
#include <QScreen>
#include <QSettings>
#include <QSplitter>
#include <QTabWidget>
#include <QTimer>

#include "main_window.h"

namespace latentlab::ui {

void MainWindow::saveLayout() {
  QSettings s;
  if (!m_sizesBeforeTry.isEmpty()) m_vertical->setSizes(m_sizesBeforeTry);  // Try it's room is not the layout
  s.setValue(QStringLiteral("window/geometry"), saveGeometry());
  s.setValue(QStringLiteral("window/state"), saveState());
  s.setValue(QStringLiteral("window/horizontal"), m_horizontal->saveState());
  s.setValue(QStringLiteral("window/vertical"), m_vertical->saveState());
  s.setValue(QStringLiteral("window/rightTab"), m_rightTabs->currentIndex());
}

void MainWindow::restoreLayout() {
  QSettings s;
  if (s.contains(QStringLiteral("window/geometry")))
    restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
  // A geometry saved on a larger screen is not restored past this one (the
  // right panel, the Run button and the status bar would be cut off).
  if (const QScreen* screen = QGuiApplication::primaryScreen()) {
    const QRect free = screen->availableGeometry();
    if (geometry().width() > free.width() || geometry().height() > free.height() || !free.intersects(geometry())) {
      setGeometry(QRect(free.topLeft(), QSize(1440, 900).boundedTo(free.size())));
    }
  }
  restoreState(s.value(QStringLiteral("window/state")).toByteArray());
  m_horizontal->restoreState(s.value(QStringLiteral("window/horizontal")).toByteArray());
  m_vertical->restoreState(s.value(QStringLiteral("window/vertical")).toByteArray());
  m_rightTabs->setCurrentIndex(s.value(QStringLiteral("window/rightTab"), 0).toInt());
  QTimer::singleShot(0, this, &MainWindow::keepPlotShare);  // once the splitter has its real height
}

void MainWindow::keepPlotShare() {
  const QList<int> sizes = m_vertical->sizes();
  if (sizes.size() != 2) return;
  const int total = sizes[0] + sizes[1];
  if (total > 0 && sizes[0] < total * 2 / 5) m_vertical->setSizes({total * 3 / 5, total - total * 3 / 5});
}

}  // namespace latentlab::ui
