// One colour per run, the same everywhere (tree, legend, curves, table) and
// in every session: each run gets, when the workbench first lists it, the
// colour farthest (CIELAB distance) from the colours of the runs listed
// before it, and keeps it in the store (runs.color); the user can change it
// from the run's context menu. Runs never listed yet (a bare chart in a test)
// fall back to a fixed palette by id.
#pragma once

#include <QColor>
#include <QHash>
#include <vector>

#include "latentlab/run_store.h"

namespace latentlab::ui {

QColor runColor(qint64 runId);
// The palette's colour number `index` (cycling): what groups of runs are drawn in.
QColor paletteColor(int index);
// Records a run's colour for runColor (what the run list read or chose).
void setRunColor(qint64 runId, const QColor& color);
void forgetRunColors();  // a new workspace

// CIE76 colour difference (Euclidean distance in CIELAB, D65) of two sRGB colours.
double labDistance(const QColor& a, const QColor& b);

// The candidate colour with the largest smallest distance to `taken`
// (readable on a white background: CIELAB lightness 35-72); among
// near-ties the earlier candidate (Tableau 10 first), so early runs get the
// familiar colours.
QColor distinctColor(const std::vector<QColor>& taken);

// Foreground colour of a run's status.
QColor statusColor(RunStatus status);

}  // namespace latentlab::ui
