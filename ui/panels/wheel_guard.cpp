// Wheel events of unfocused fields go to the panel that holds them.
#include "panels/wheel_guard.h"

#include <QAbstractScrollArea>
#include <QAbstractSpinBox>
#include <QApplication>
#include <QComboBox>
#include <QPointer>
#include <QWheelEvent>

namespace latentlab::ui {

namespace {
bool guarded(QObject* o) {
  return qobject_cast<QAbstractSpinBox*>(o) != nullptr || qobject_cast<QComboBox*>(o) != nullptr;
}
}  // namespace

void WheelGuard::install() {
  static QPointer<WheelGuard> guard;
  if (guard || qApp == nullptr) return;
  guard = new WheelGuard(qApp);
  qApp->installEventFilter(guard);
}

bool WheelGuard::eventFilter(QObject* watched, QEvent* event) {
  if (!guarded(watched)) return false;
  auto* field = static_cast<QWidget*>(watched);
  if (event->type() == QEvent::Polish) {
    // Wheel focus would hand the field the focus (and the wheel) on the first turn.
    if (field->focusPolicy() == Qt::WheelFocus) field->setFocusPolicy(Qt::StrongFocus);
    return false;
  }
  if (event->type() != QEvent::Wheel || field->hasFocus()) return false;
  // Not this field's: the scroll area around it scrolls instead. (Delivered
  // to its viewport directly: Qt does not pass a forwarded wheel event on to
  // parents.)
  QWidget* target = field->parentWidget();
  for (QWidget* up = target; up != nullptr; up = up->parentWidget()) {
    if (auto* area = qobject_cast<QAbstractScrollArea*>(up)) {
      target = area->viewport();
      break;
    }
  }
  if (target != nullptr) {
    auto* wheel = static_cast<QWheelEvent*>(event);
    const QPointF at = target->mapFromGlobal(wheel->globalPosition());
    QWheelEvent forwarded(at, wheel->globalPosition(), wheel->pixelDelta(), wheel->angleDelta(), wheel->buttons(),
                          wheel->modifiers(), wheel->phase(), wheel->inverted());
    QCoreApplication::sendEvent(target, &forwarded);
  }
  return true;
}

}  // namespace latentlab::ui
