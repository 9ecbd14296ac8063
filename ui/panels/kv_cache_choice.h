// The KV-cache choice the Evaluate and Try it tabs offer: the cache as the
// model computes it, or quantized (docs/kv_quant.md) to int8, int4 or int2
// codes with the default group of 64 values and the newest 128 tokens exact.
#pragma once

#include <QComboBox>

#include "latentlab/kv_quant.h"

namespace latentlab::ui {

QComboBox* newKvCacheBox(QWidget* parent = nullptr);
KvQuantSettings kvCacheChoice(const QComboBox* box);
// The engine's flags for the choice: none, or {"--kv-quant", "int4"}.
QStringList kvCacheArgs(const QComboBox* box);

}  // namespace latentlab::ui
