// Inline message banner.
#include "panels/message_banner.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>

#include "latentlab/error.h"

namespace latentlab::ui {

MessageBanner::MessageBanner(QWidget* parent) : QWidget(parent) {
  setAttribute(Qt::WA_StyledBackground, true);
  setObjectName(QStringLiteral("messageBanner"));
  m_icon = new QLabel;
  m_message = new QLabel;
  m_message->setWordWrap(true);
  m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont bold = m_message->font();
  bold.setBold(true);
  m_message->setFont(bold);
  m_hint = new QLabel;
  m_hint->setWordWrap(true);
  m_hint->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_close = new QToolButton;
  m_close->setAutoRaise(true);
  m_close->setText(QStringLiteral("✕"));
  m_close->setToolTip(tr("Dismiss"));
  connect(m_close, &QToolButton::clicked, this, [this] {
    hide();
    Q_EMIT dismissed();
  });
  auto* text = new QVBoxLayout;
  text->setSpacing(2);
  text->addWidget(m_message);
  text->addWidget(m_hint);
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(10, 8, 6, 8);
  row->addWidget(m_icon, 0, Qt::AlignTop);
  row->addLayout(text, 1);
  row->addWidget(m_close, 0, Qt::AlignTop);
  hide();
}

void MessageBanner::showMessage(Level level, const QString& message, const QString& hint) {
  const char* bg = level == Level::Error ? "#fdecea" : level == Level::Warning ? "#fff4e5" : "#e8f1fb";
  const char* border = level == Level::Error ? "#e57373" : level == Level::Warning ? "#ffb74d" : "#64b5f6";
  setStyleSheet(QStringLiteral("#messageBanner { background: %1; border: 1px solid %2; border-radius: 4px; }"
                               "#messageBanner QLabel { color: #202020; background: transparent; }")
                    .arg(QLatin1String(bg), QLatin1String(border)));
  const QStyle::StandardPixmap px = level == Level::Error     ? QStyle::SP_MessageBoxCritical
                                    : level == Level::Warning ? QStyle::SP_MessageBoxWarning
                                                              : QStyle::SP_MessageBoxInformation;
  m_icon->setPixmap(style()->standardIcon(px).pixmap(18, 18));
  m_message->setText(message);
  m_hint->setText(hint);
  m_hint->setVisible(!hint.isEmpty());
  show();
}

void MessageBanner::showError(const latentlab::Error& error) {
  showMessage(Level::Error, QString::fromStdString(error.message()), QString::fromStdString(error.hint()));
}

void MessageBanner::setDismissable(bool on) {
  m_close->setVisible(on);
}
QString MessageBanner::message() const {
  return m_message->text();
}
QString MessageBanner::hint() const {
  return m_hint->text();
}

}  // namespace latentlab::ui
