// Thinning a curve to the plot's pixel columns before Qt Charts draws it
// (QtCore only): within the visible x range each column keeps its lowest and
// highest point, in x order, so the drawn envelope is the same; outside it
// only the nearest point on each side stays, so lines still leave the plot.
// Qt Charts strokes every point of a series on each layout and paint.
#pragma once

#include <QList>
#include <QPointF>

namespace latentlab::ui {

// `points` in x order. At most 2 * columns + 2 points come back; a curve that
// has no more than that is returned as it is.
QList<QPointF> thinToColumns(const QList<QPointF>& points, double x0, double x1, int columns);

}  // namespace latentlab::ui
