// One colour per run, the same everywhere (tree, legend, curves): a fixed
// palette (Tableau 10 order) indexed by the run id.
#pragma once

#include <QColor>

namespace latentlab::ui {

QColor runColor(qint64 runId);
// Foreground colour of a status name (queued, running, completed, ...).
QColor statusColor(const QString& status);

} // namespace latentlab::ui
