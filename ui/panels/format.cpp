// Numbers as the panels show them; see format.h.
#include "panels/format.h"

namespace latentlab::ui {

QString humanCount(double n) {
  if (n >= 1e9) return QStringLiteral("%1 B").arg(n / 1e9, 0, 'f', 2);
  if (n >= 1e6) return QStringLiteral("%1 M").arg(n / 1e6, 0, 'f', 2);
  if (n >= 1e3) return QStringLiteral("%1 k").arg(n / 1e3, 0, 'f', 1);
  return QString::number(n, 'f', 0);
}

} // namespace latentlab::ui
