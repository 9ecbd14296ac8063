// The config fields that differ between runs (QtCore only): a run's spec JSON
// flattened to "path = value" leaves ("optimizer.lr", "layers[2].d_kv"), then
// the paths whose value is not the same in every run that has them, or that a
// run lacks while it has the object around them (a run without the whole
// object, e.g. no "conversion" block, does not list every leaf of it).
#pragma once

#include <QMap>
#include <QSet>
#include <QString>
#include <QStringList>
#include <QVector>

namespace latentlab::ui {

// Leaves of a JSON object as path -> compact JSON text of the value ("0.001",
// "\"demo\"", "true", "null"); an empty object or array is a leaf ("{}", "[]").
// Text that is not a JSON object flattens to {"": <the text>}.
QMap<QString, QString> flattenJson(const QString& json);

// Paths, sorted, that differ across `specs` as above, leaving out `ignore`
// (and every path under an ignored prefix "x." / "x[").
QStringList differingFields(const QVector<QMap<QString, QString>>& specs, const QSet<QString>& ignore = {});

// The steps a stored run spec asks for (its "steps"), without validating the
// rest of it; 0 when it names none.
qint64 specSteps(const QString& specJson);

}  // namespace latentlab::ui
