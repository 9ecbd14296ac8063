// Numbers as the panels show them.
#pragma once

#include <QString>

namespace latentlab::ui {

// 1.26 M, 7.00 B, 512 k, 96: a parameter or token count.
QString humanCount(double n);

} // namespace latentlab::ui
