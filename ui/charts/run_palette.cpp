// Run and status colours.
#include "charts/run_palette.h"

#include <array>

namespace latentlab::ui {

QColor runColor(qint64 runId) {
  static const std::array<QRgb, 10> kPalette = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                                0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};
  const auto i = static_cast<std::size_t>((runId < 0 ? -runId : runId) % static_cast<qint64>(kPalette.size()));
  return QColor(kPalette[i]);
}

QColor statusColor(const QString& status) {
  if (status == QLatin1String("running")) return QColor(0x1f77b4);
  if (status == QLatin1String("completed")) return QColor(0x2e7d32);
  if (status == QLatin1String("failed") || status == QLatin1String("crashed")) return QColor(0xc62828);
  if (status == QLatin1String("cancelled")) return QColor(0xef6c00);
  return QColor(0x757575);  // queued
}

} // namespace latentlab::ui
