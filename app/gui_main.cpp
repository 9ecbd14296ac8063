// `latentlab`: the Qt workbench. Opens the last workspace (or the demo
// workspace, whose base-model pre-training is queued and starts by itself on
// first launch) and shows the main window. Composition only.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QIcon>
#include <QMessageBox>
#include <QSettings>

#include "latentlab/error.h"
#include "latentlab/run_store.h"
#include "main_window.h"
#include "preset_loader.h"
#include "workspace.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("latentlab"));
  QApplication::setApplicationName(QStringLiteral("latentlab"));
  QApplication::setApplicationDisplayName(QStringLiteral("LatentLab"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
  latentlab::ui::ensureResourcesLoaded();
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/latentlab.svg")));
  QApplication::setDesktopFileName(QStringLiteral("latentlab"));

  QCommandLineParser cli;
  cli.setApplicationDescription(QStringLiteral("LatentLab: MHA/GQA -> MLA conversion and latent-attention workbench"));
  cli.addHelpOption();
  cli.addVersionOption();
  QCommandLineOption wsOption(QStringLiteral("workspace"), QStringLiteral("Open this workspace folder."),
                              QStringLiteral("DIR"));
  QCommandLineOption noStart(QStringLiteral("no-autostart"), QStringLiteral("Do not start queued runs."));
  cli.addOption(wsOption);
  cli.addOption(noStart);
  cli.process(app);

  QSettings settings;
  QString dir = cli.value(wsOption);
  if (dir.isEmpty()) dir = settings.value(QStringLiteral("workspace/last")).toString();
  if (dir.isEmpty() || !QFileInfo(dir).isDir()) dir = latentlab::ui::defaultDemoWorkspaceDir();

  latentlab::ui::Workspace ws;
  try {
    ws = latentlab::ui::openWorkspace(dir);
    if (QDir(ws.dir) == QDir(latentlab::ui::defaultDemoWorkspaceDir())) {
      latentlab::RunStore store(ws.dbPath().toStdString());
      latentlab::ui::ensureDemoPretrainQueued(store, ws);
    }
  } catch (const latentlab::Error& e) {
    // No window exists yet to hold an inline banner: this is the one place a box is right.
    QMessageBox::critical(
        nullptr, QStringLiteral("LatentLab"),
        QString::fromStdString(e.message()) + QStringLiteral("\n\n") + QString::fromStdString(e.hint()));
    return 1;
  }
  settings.setValue(QStringLiteral("workspace/last"), ws.dir);

  latentlab::ui::MainWindowOptions options;
  options.startQueuedRuns = !cli.isSet(noStart);
  auto* window = new latentlab::ui::MainWindow(ws, options);
  window->setAttribute(Qt::WA_DeleteOnClose);
  window->show();
  return QApplication::exec();
}
