// Numbers as the panels show them.
#pragma once

#include <QComboBox>
#include <QString>
#include <optional>
#include <string_view>

#include "latentlab/model_config.h"
#include "latentlab/run_spec.h"

namespace latentlab::ui {

// 1.26 M, 7.00 B, 512 k, 96: a parameter or token count.
QString humanCount(double n);

// The name a KV cache's dtype goes by in the panels and the compare table
// ("bf16", "fp32", "fp16", "fp64").
QString cacheDTypeName(DType dtype);

// The dtype a run with this precision on this device trains in, which its KV
// cache is counted in (auto: bf16-mixed on a GPU, fp32 on the CPU).
DType runDType(Precision precision, const QString& device);

// A vocabulary choice in a combo: the entry's data is the name written (its
// text when it has no data).
template <typename E>
std::optional<E> comboChoice(const QComboBox* box) {
  const QVariant data = box->currentData();
  return findChoice<E>((data.isValid() ? data.toString() : box->currentText()).toStdString());
}

// The name a choice is written with, as a QString (a combo entry's data).
template <typename E>
QString choiceText(E value) {
  const std::string_view name = choiceName(value);
  return QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
}

}  // namespace latentlab::ui
