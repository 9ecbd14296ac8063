// Spec flattening and diff; see spec_diff.h.
#include "models/spec_diff.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonValue>
#include <QLocale>
#include <algorithm>
#include <optional>

namespace latentlab::ui {

namespace {

QString leafText(const QJsonValue& v) {
  switch (v.type()) {
    case QJsonValue::Null:
      return QStringLiteral("null");
    case QJsonValue::Bool:
      return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
    case QJsonValue::Double:
      return QString::number(v.toDouble(), 'g', QLocale::FloatingPointShortest);
    case QJsonValue::String:
      return QStringLiteral("\"%1\"").arg(v.toString());
    case QJsonValue::Array:
      return QStringLiteral("[]");
    case QJsonValue::Object:
      return QStringLiteral("{}");
    case QJsonValue::Undefined:
      break;
  }
  return QStringLiteral("null");
}

void flatten(const QJsonValue& v, const QString& path, QMap<QString, QString>& out) {
  if (v.isObject() && !v.toObject().isEmpty()) {
    const QJsonObject o = v.toObject();
    for (auto it = o.begin(); it != o.end(); ++it) {
      flatten(it.value(), path.isEmpty() ? it.key() : path + QLatin1Char('.') + it.key(), out);
    }
  } else if (v.isArray() && !v.toArray().isEmpty()) {
    const QJsonArray a = v.toArray();
    for (qsizetype i = 0; i < a.size(); ++i) flatten(a[i], QStringLiteral("%1[%2]").arg(path).arg(i), out);
  } else {
    out.insert(path, leafText(v));
  }
}

bool ignored(const QString& path, const QSet<QString>& ignore) {
  for (const QString& p : ignore) {
    if (path == p || path.startsWith(p + QLatin1Char('.')) || path.startsWith(p + QLatin1Char('['))) return true;
  }
  return false;
}

}  // namespace

QMap<QString, QString> flattenJson(const QString& json) {
  QMap<QString, QString> out;
  QJsonParseError err{};
  const QJsonDocument doc = QJsonDocument::fromJson(json.toUtf8(), &err);
  if (err.error != QJsonParseError::NoError || !doc.isObject()) {
    out.insert(QString(), json);
    return out;
  }
  flatten(doc.object(), QString(), out);
  return out;
}

namespace {

// The container a path sits in: "a.b[2].c" -> "a.b[2]", "a.b[2]" -> "a.b", "a" -> "".
QString parentOf(const QString& path) {
  const qsizetype cut = std::max(path.lastIndexOf(QLatin1Char('.')), path.lastIndexOf(QLatin1Char('[')));
  return cut < 0 ? QString() : path.left(cut);
}

// Every container present in a flattened spec (the root is "").
QSet<QString> containersOf(const QMap<QString, QString>& spec) {
  QSet<QString> out{QString()};
  for (auto it = spec.keyBegin(); it != spec.keyEnd(); ++it) {
    for (QString p = parentOf(*it); !p.isEmpty() && !out.contains(p); p = parentOf(p)) out.insert(p);
  }
  return out;
}

}  // namespace

QStringList differingFields(const QVector<QMap<QString, QString>>& specs, const QSet<QString>& ignore) {
  QSet<QString> paths;
  QVector<QSet<QString>> containers;
  for (const auto& s : specs) {
    for (auto it = s.keyBegin(); it != s.keyEnd(); ++it) paths.insert(*it);
    containers.push_back(containersOf(s));
  }
  QStringList out;
  for (const QString& path : paths) {
    if (ignored(path, ignore)) continue;
    const QString parent = parentOf(path);
    std::optional<QString> seen;
    bool differs = false, absentBesideSiblings = false, present = false;
    for (qsizetype i = 0; i < specs.size() && !differs; ++i) {
      const auto it = specs[i].constFind(path);
      if (it == specs[i].constEnd()) {
        // Missing beside its siblings is a difference; a run without the
        // whole container (no conversion block at all) is told by the field
        // that chose it (kind), not by every leaf of the container.
        absentBesideSiblings = absentBesideSiblings || containers[i].contains(parent);
        continue;
      }
      present = true;
      if (seen && *seen != *it) differs = true;
      seen = *it;
    }
    if (differs || (present && absentBesideSiblings)) out << path;
  }
  out.sort();
  return out;
}

qint64 specSteps(const QString& specJson) {
  const QJsonValue steps = QJsonDocument::fromJson(specJson.toUtf8()).object().value(QLatin1String("steps"));
  return steps.isDouble() ? std::max<qint64>(0, steps.toInteger()) : 0;
}

}  // namespace latentlab::ui
