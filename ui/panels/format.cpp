// Numbers as the panels show them; see format.h.
#include "panels/format.h"

namespace latentlab::ui {

QString humanCount(double n) {
  if (n >= 1e9) return QStringLiteral("%1 B").arg(n / 1e9, 0, 'f', 2);
  if (n >= 1e6) return QStringLiteral("%1 M").arg(n / 1e6, 0, 'f', 2);
  if (n >= 1e3) return QStringLiteral("%1 k").arg(n / 1e3, 0, 'f', 1);
  return QString::number(n, 'f', 0);
}

QString cacheDTypeName(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return QStringLiteral("bf16");
    case DType::F16:
      return QStringLiteral("fp16");
    case DType::F64:
      return QStringLiteral("fp64");
    default:
      return QStringLiteral("fp32");
  }
}

DType runDType(Precision precision, const QString& device) {
  switch (resolvePrecision(precision, device.startsWith(QLatin1String("cuda")))) {
    case Precision::Bf16:
    case Precision::Bf16Mixed:
      return DType::BF16;
    case Precision::Fp64:
      return DType::F64;
    default:
      return DType::F32;
  }
}

}  // namespace latentlab::ui
