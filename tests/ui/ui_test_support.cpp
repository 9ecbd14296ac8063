// Helpers for the workbench tests.
#include "ui_test_support.h"

#include <QAbstractButton>
#include <QApplication>
#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QFile>
#include <QFileDialog>
#include <QLineEdit>
#include <QProcess>
#include <QScrollArea>
#include <QStandardPaths>
#include <QTest>

#include <algorithm>
#include <filesystem>

#include "io/safetensors.h"
#include "io/weight_table.h"
#include "jobs/engine_path.h"
#include "latentlab/architectures.h"

namespace latentlab::uitest {

RunSpec tinySpec(const std::string& name, int steps) {
  RunSpec s;
  s.name = name;
  s.kind = RunKind::Pretrain;
  s.architecture = "demo-gqa";
  s.data.corpus = "/usr/share/doc/python3.11/html/_sources/tutorial";
  s.data.tokenizerVocab = 512;
  s.data.seqLen = 32;
  s.microBatch = 4;
  s.steps = steps;
  s.evalEvery = 0;
  s.checkpointEvery = 0;
  s.optimizer.lr = 3e-3;
  return s;
}

QString writeZeroModelFolder(const QString& dir, const std::string& architecture) {
  namespace fs = std::filesystem;
  const fs::path folder = dir.toStdString();
  fs::create_directories(folder);
  const ModelConfig cfg = builtinArchitecture(architecture);
  writeHfConfig(cfg, folder / "config.json");
  const std::vector<ExpectedTensor> expected = expectedTensors(cfg);
  std::int64_t largest = 0;
  for (const ExpectedTensor& t : expected) {
    std::int64_t n = 1;
    for (std::int64_t d : t.shape) n *= d;
    largest = std::max(largest, n);
  }
  const std::vector<float> zeros(static_cast<std::size_t>(largest), 0.0f);
  std::vector<TensorWrite> tensors;
  for (const ExpectedTensor& t : expected) tensors.push_back({t.name, DType::F32, t.shape, zeros.data()});
  writeSafetensors(folder / "model.safetensors", tensors);
  return dir;
}

bool runEngineBlocking(const QString& workspaceDir, const RunSpec& spec, QString* output) {
  const QString specPath = workspaceDir + QStringLiteral("/tiny-spec.json");
  QFile f(specPath);
  if (!f.open(QIODevice::WriteOnly)) return false;
  f.write(QByteArray::fromStdString(runSpecToJson(spec)));
  f.close();
  QProcess p;
  p.setProcessChannelMode(QProcess::MergedChannels);
  p.start(ui::engineExecutablePath(), {QStringLiteral("run"), specPath, QStringLiteral("--db"),
                                       workspaceDir + QStringLiteral("/runs.db"), QStringLiteral("--quiet")});
  const bool ok = p.waitForFinished(120000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
  if (output != nullptr) *output = QString::fromUtf8(p.readAll());
  return ok;
}

void isolateSettings() {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName(QStringLiteral("latentlab-tests"));
  QCoreApplication::setApplicationName(QStringLiteral("latentlab-tests"));
}

ui::MainWindowOptions quietWindowOptions() {
  ui::MainWindowOptions options;
  options.startQueuedRuns = false;
  options.restoreLayout = false;
  options.askBeforeClosing = false;
  return options;
}

bool showChart(ui::ChartView& chart, int width, int height) {
  chart.resize(width, height);
  chart.show();
  return QTest::qWaitForWindowExposed(&chart);
}

DialogAnswerer::DialogAnswerer(QStringList answers) : m_answers(std::move(answers)) {
  connect(&m_timer, &QTimer::timeout, this, [this] { poll(); });
  m_timer.start(50);
}

void DialogAnswerer::poll() {
  auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget());
  if (dialog == nullptr) return;
  if (dialog == m_current) {
    // The path is typed: press the accept button once it is enabled (a
    // completion popup may take the first click), until the dialog closes.
    if (++m_polls < 2) return;
    auto* box = dialog->findChild<QDialogButtonBox*>();
    if (box == nullptr) return;
    for (QAbstractButton* b : box->buttons())
      if (box->buttonRole(b) == QDialogButtonBox::AcceptRole && b->isEnabled()) QTest::mouseClick(b, Qt::LeftButton);
    return;
  }
  m_current = dialog;
  m_polls = 0;
  ++m_seen;
  m_offered.push_back(dialog->selectedFiles().value(0));
  const QString answer = m_answers.isEmpty() ? QString() : m_answers.takeFirst();
  auto* name = dialog->findChild<QLineEdit*>(QStringLiteral("fileNameEdit"));
  if (name == nullptr || answer.isEmpty()) {
    dialog->reject();
    return;
  }
  // The path goes in whole: typed key by key, Qt's dialog navigates (and
  // completes) at every "/" on its own schedule. The accept button is then
  // clicked with the mouse.
  name->setText(answer);
}

// Scrolls the tab's scroll area to a widget, as a user does before clicking it.
void reveal(QWidget* w) {
  for (QWidget* up = w->parentWidget(); up != nullptr; up = up->parentWidget()) {
    if (auto* area = qobject_cast<QScrollArea*>(up)) {
      area->ensureWidgetVisible(w);
      QApplication::processEvents();
      return;
    }
  }
}

void typeInto(QLineEdit* edit, const QString& text) {
  reveal(edit);
  QTest::mouseClick(edit, Qt::LeftButton);
  edit->selectAll();
  QTest::keyClick(edit, Qt::Key_Delete);
  QTest::keyClicks(edit, text);
}

}  // namespace latentlab::uitest
