// Numbers as the panels show them.
#pragma once

#include <QString>

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

}  // namespace latentlab::ui
