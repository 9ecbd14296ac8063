// Shared helpers of the workbench tests: temporary workspaces and the tiny
// real-engine spec (30 steps on the Python tutorial's reST sources).
#pragma once

#include <QObject>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <QTimer>

class QFileDialog;
class QLineEdit;
class QWidget;

#include "charts/chart_view.h"
#include "latentlab/run_spec.h"
#include "main_window.h"

namespace latentlab::uitest {

// pretrain demo-gqa, corpus = the Python tutorial, vocab 512, seq 32, micro-batch 4.
RunSpec tinySpec(const std::string& name, int steps = 30);
// Runs the real engine on `spec` into <dir>/runs.db, blocking; true on exit 0.
bool runEngineBlocking(const QString& workspaceDir, const RunSpec& spec, QString* output = nullptr);
// Isolates QSettings/QStandardPaths from the user's own.
void isolateSettings();
// A main window for a test: the store's queued runs not started, no saved
// layout, no question on closing.
ui::MainWindowOptions quietWindowOptions();
// A Hugging Face folder of a built-in shape with zero weights (config.json
// and one safetensors file in fp32): a model the Model tab opens, untrained.
QString writeZeroModelFolder(const QString& dir, const std::string& architecture);
// Scrolls the tab's scroll area to a widget, as a user does before clicking it.
void reveal(QWidget* w);
// Reveals the field, clicks it and replaces its text by typing.
void typeInto(QLineEdit* edit, const QString& text);
// Shows a chart at a size and waits until it is on screen (false: it never was).
bool showChart(ui::ChartView& chart, int width = 900, int height = 500);

// Answers the file dialogs the window opens, in order: each path into the
// dialog's file name field, then a click on its accept button; an empty or
// missing answer rejects the dialog. Counts the dialogs it saw and keeps the
// path each one offered before it was answered.
class DialogAnswerer : public QObject {
 public:
  explicit DialogAnswerer(QStringList answers);
  int seen() const { return m_seen; }
  const QStringList& offered() const { return m_offered; }

 private:
  void poll();
  QStringList m_answers, m_offered;
  QTimer m_timer;
  QPointer<QFileDialog> m_current;
  int m_seen = 0;
  int m_polls = 0;
};

}  // namespace latentlab::uitest
