// An inline, dismissable message strip (error / warning / info): a bold
// message, a hint below it, a close button. Replaces modal error boxes.
#pragma once

#include <QWidget>

class QLabel;
class QToolButton;

namespace latentlab {
class Error;
}

namespace latentlab::ui {

class MessageBanner : public QWidget {
  Q_OBJECT
 public:
  enum class Level { Error, Warning, Info };
  explicit MessageBanner(QWidget* parent = nullptr);

  void showMessage(Level level, const QString& message, const QString& hint = {});
  void showError(const latentlab::Error& error);
  void setDismissable(bool on);
  QString message() const;
  QString hint() const;

 Q_SIGNALS:
  void dismissed();

 private:
  QLabel* m_icon = nullptr;
  QLabel* m_message = nullptr;
  QLabel* m_hint = nullptr;
  QToolButton* m_close = nullptr;
};

}  // namespace latentlab::ui
