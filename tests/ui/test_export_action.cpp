// The runs list's Export action with real mouse events and the real engine: a
// run converted to DeepSeek-V3 attention and fine-tuned is right-clicked,
// "Export checkpoint as DeepSeek-V3…" clicked in the menu, the folder typed
// into the file dialog; the engine writes a DeepSeek-V3 folder. An MHA2MLA
// run is refused in the banner with the reason, and nothing is asked.
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMenu>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTreeView>
#include <QtTest>

#include "latentlab/run_store.h"
#include "main_window.h"
#include "models/run_tree_model.h"
#include "panels/message_banner.h"
#include "panels/model_choices.h"
#include "panels/runs_panel.h"
#include "ui_test_support.h"
#include "workspace.h"

using namespace latentlab;
using namespace latentlab::ui;

namespace {

// Clicks the menu entry whose text starts with `text` once the run's context menu is open.
class MenuClicker : public QObject {
 public:
  explicit MenuClicker(QString text) : m_text(std::move(text)) {
    connect(&m_timer, &QTimer::timeout, this, [this] {
      auto* menu = qobject_cast<QMenu*>(QApplication::activePopupWidget());
      if (menu == nullptr) return;
      for (QAction* a : menu->actions()) {
        if (a->text().startsWith(m_text)) {
          m_timer.stop();
          m_clicked = true;
          QTest::mouseClick(menu, Qt::LeftButton, {}, menu->actionGeometry(a).center());
          return;
        }
      }
    });
    m_timer.start(50);
  }
  bool clicked() const { return m_clicked; }

 private:
  QString m_text;
  QTimer m_timer;
  bool m_clicked = false;
};

RunSpec convertSpec(const std::string& name, const QString& baseDir, ConversionTarget target) {
  RunSpec s = uitest::tinySpec(name, 4);
  s.kind = RunKind::ConvertFinetune;
  s.architecture.clear();
  s.modelDir = baseDir.toStdString();
  s.conversion.enabled = true;
  s.conversion.target = target;
  s.conversion.ropeStrategy = RopeStrategy::High;
  s.conversion.ropePairs = 2;
  s.conversion.dKv = 4;
  s.conversion.calibSequences = 4;
  s.conversion.calibSeqLen = 32;
  return s;
}

void rightClickRun(MainWindow& w, qint64 id) {
  QTreeView* view = w.runsPanel()->view();
  const QModelIndex idx = w.runModel()->indexOfRun(id);
  view->scrollTo(idx);
  const QPoint at = view->visualRect(idx).center();
  QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, at);
  // Through the window, as the platform delivers it: the window turns a
  // right press into the context-menu event.
  QTest::mouseClick(w.windowHandle(), Qt::RightButton, {}, view->viewport()->mapTo(&w, at));
}

}  // namespace

class TestExportAction : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { uitest::isolateSettings(); }

  void exportingADeepSeekRunWritesAFolderAndAnMha2MlaRunIsRefused() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    QString out;
    QVERIFY2(uitest::runEngineBlocking(ws.dir, uitest::tinySpec("tiny base", 12), &out), qPrintable(out));
    QString baseDir;
    {
      RunStore store(ws.dbPath().toStdString());
      for (const ModelChoice& c : listModelChoices(store, ws.dir))
        if (c.label.contains(QStringLiteral("tiny base"))) baseDir = c.dir;
    }
    QVERIFY(!baseDir.isEmpty());
    QVERIFY2(uitest::runEngineBlocking(ws.dir, convertSpec("tiny deepseek", baseDir, ConversionTarget::DeepSeek), &out),
             qPrintable(out));
    QVERIFY2(uitest::runEngineBlocking(ws.dir, convertSpec("tiny mha2mla", baseDir, ConversionTarget::Mha2Mla), &out),
             qPrintable(out));
    qint64 deepseek = 0, mha2mla = 0;
    {
      RunStore store(ws.dbPath().toStdString());
      for (const RunRecord& r : store.listRuns()) {
        if (r.name == "tiny deepseek") deepseek = r.id;
        if (r.name == "tiny mha2mla") mha2mla = r.id;
      }
    }
    QVERIFY(deepseek != 0 && mha2mla != 0);

    MainWindow w(ws, uitest::quietWindowOptions());
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QSignalSpy finished(&w, &MainWindow::exportFinished);

    // An earlier export took the suggested folder: the dialog offers the next free name.
    int step = -1;
    {
      RunStore store(ws.dbPath().toStdString());
      for (const ModelChoice& c : listModelChoices(store, ws.dir))
        if (c.run == deepseek && step < 0) step = c.step;
    }
    QVERIFY(step > 0);
    const QString taken =
        QDir(ws.dir).filePath(QStringLiteral("exports/run-%1-step-%2-deepseek-v3").arg(deepseek).arg(step));
    QVERIFY(QDir().mkpath(taken));
    const QString target = dir.filePath(QStringLiteral("exported-deepseek"));
    {
      uitest::DialogAnswerer answers({target});
      MenuClicker click(QStringLiteral("Export checkpoint as DeepSeek-V3"));
      rightClickRun(w, deepseek);
      QTRY_VERIFY_WITH_TIMEOUT(click.clicked(), 5000);
      QTRY_COMPARE_WITH_TIMEOUT(answers.seen(), 1, 5000);
      QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
      QCOMPARE(QDir::cleanPath(answers.offered().value(0)), QDir::cleanPath(taken + QStringLiteral("-2")));
    }
    QVERIFY2(finished.first().at(0).toBool(), qPrintable(w.lastExportMessage()));
    QCOMPARE(finished.first().at(1).toString(), target);
    QFile config(target + QStringLiteral("/config.json"));
    QVERIFY(config.open(QIODevice::ReadOnly));
    const QJsonObject c = QJsonDocument::fromJson(config.readAll()).object();
    QCOMPARE(c.value(QStringLiteral("model_type")).toString(), QStringLiteral("deepseek_v3"));
    QCOMPARE(c.value(QStringLiteral("architectures")).toArray().first().toString(),
             QStringLiteral("DeepseekV3ForCausalLM"));
    QCOMPARE(c.value(QStringLiteral("first_k_dense_replace")).toInt(),
             c.value(QStringLiteral("num_hidden_layers")).toInt());
    QVERIFY(c.value(QStringLiteral("rope_interleave")).toBool());
    QVERIFY(QFile::exists(target + QStringLiteral("/model.safetensors")));
    QVERIFY(QFile::exists(target + QStringLiteral("/tokenizer.json")));
    QVERIFY2(w.statusBar()->currentMessage().contains(QStringLiteral("Exported as DeepSeek-V3")),
             qPrintable(w.statusBar()->currentMessage()));

    // The MHA2MLA run: refused in the banner with the reason; no dialog, no folder.
    {
      uitest::DialogAnswerer none({});
      MenuClicker click(QStringLiteral("Export checkpoint as DeepSeek-V3"));
      rightClickRun(w, mha2mla);
      QTRY_VERIFY_WITH_TIMEOUT(click.clicked(), 5000);
      QTRY_VERIFY_WITH_TIMEOUT(w.banner()->message().contains(QStringLiteral("cannot be exported")), 5000);
      QTest::qWait(300);
      QCOMPARE(none.seen(), 0);
    }
    QVERIFY2(w.banner()->message().contains(QStringLiteral("--target deepseek")), qPrintable(w.banner()->message()));
    QVERIFY(w.banner()->isVisible());
    QCOMPARE(finished.count(), 1);
  }
};

QTEST_MAIN(TestExportAction)
#include "test_export_action.moc"
