// The mouse wheel over a spin box or combo box that does not have the keyboard
// focus scrolls the panel around it instead of changing its value: a user
// scrolling a form never changes a setting by accident (Tensor parallel 2 -> 1).
// Clicking or tabbing into the field gives it the wheel as before.
#pragma once

#include <QObject>

namespace latentlab::ui {

class WheelGuard : public QObject {
  Q_OBJECT
 public:
  // Installs one guard on the application (idempotent).
  static void install();

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  using QObject::QObject;
};

}  // namespace latentlab::ui
