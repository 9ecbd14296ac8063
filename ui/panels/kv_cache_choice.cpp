// The Evaluate and Try it tabs' KV-cache choice.
#include "panels/kv_cache_choice.h"

namespace latentlab::ui {

QComboBox* newKvCacheBox(QWidget* parent) {
  auto* box = new QComboBox(parent);
  box->addItem(QObject::tr("full precision"), 0);
  for (const int bits : {8, 4, 2}) box->addItem(QString::fromLatin1(kvQuantName(bits)), bits);
  const KvQuantSettings defaults;
  box->setToolTip(QObject::tr("The decode cache: as computed, or quantized per token in groups of %1 values, "
                              "the newest %2 tokens kept exact (docs/kv_quant.md)")
                      .arg(defaults.group)
                      .arg(defaults.residual));
  return box;
}

KvQuantSettings kvCacheChoice(const QComboBox* box) {
  KvQuantSettings s;
  s.bits = box->currentData().toInt();
  return s;
}

QStringList kvCacheArgs(const QComboBox* box) {
  const KvQuantSettings s = kvCacheChoice(box);
  if (!s.on()) return {};
  return {QStringLiteral("--kv-quant"), QString::fromLatin1(kvQuantName(s.bits))};
}

}  // namespace latentlab::ui
