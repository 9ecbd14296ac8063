// The Evaluate and Try it tabs with real mouse and keyboard events and the
// real engine: a trained run's checkpoint is chosen, a task file typed in and
// added, the passkey test set up, Evaluate clicked; the job runs, its figures
// land in the store under the run's step, in the results table, the heatmap
// and the compare table. Try it generates from two models side by side and
// shows the engine's own text and figures under each.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QTabBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "charts/passkey_heatmap.h"
#include "jobs/job_controller.h"
#include "latentlab/architectures.h"
#include "latentlab/memory_plan.h"
#include "latentlab/model_config.h"
#include "latentlab/run_store.h"
#include "main_window.h"
#include "models/compare_table_model.h"
#include "panels/compare_panel.h"
#include "panels/evaluate_panel.h"
#include "panels/try_panel.h"
#include "ui_test_support.h"
#include "workspace.h"

using namespace latentlab;
using namespace latentlab::ui;

namespace {

const char* kHaystack = "/usr/share/doc/python3.11/html/_sources/tutorial/controlflow.rst.txt";

void clickTab(QTabWidget* tabs, const QString& title) {
  QTabBar* bar = tabs->tabBar();
  for (int i = 0; i < bar->count(); ++i) {
    if (bar->tabText(i) == title) {
      QTest::mouseClick(bar, Qt::LeftButton, {}, bar->tabRect(i).center());
      return;
    }
  }
  QFAIL(qPrintable(QStringLiteral("no tab %1").arg(title)));
}

// Chooses the combo entry whose text contains `part` with the keyboard.
bool chooseWithKeys(QComboBox* box, const QString& part) {
  box->setFocus();
  QTest::keyClick(box, Qt::Key_Home);
  for (int i = 0; i < box->count(); ++i) {
    if (box->currentText().contains(part)) return true;
    QTest::keyClick(box, Qt::Key_Down);
  }
  return box->currentText().contains(part);
}

// The engine's own `generate --json --greedy` of `model` for `prompt` (and `extra` flags).
QJsonObject engineGreedy(const QString& engine, const QString& model, const QString& prompt, int tokens,
                         const QStringList& extra = {}) {
  QProcess p;
  p.start(engine, QStringList{QStringLiteral("generate"), QStringLiteral("--json"), QStringLiteral("--greedy"),
                              QStringLiteral("--model"), model, QStringLiteral("--prompt"), prompt,
                              QStringLiteral("--max-new-tokens"), QString::number(tokens)} +
                      extra);
  if (!p.waitForFinished(120000)) return {};
  return QJsonDocument::fromJson(p.readAllStandardOutput()).object();
}

// Shows the window and opens its Try it tab; false when either does not happen.
bool showTryIt(MainWindow& w) {
  w.show();
  if (!QTest::qWaitForWindowExposed(&w)) return false;
  clickTab(w.bottomTabs(), QStringLiteral("Try it"));
  return QTest::qWaitFor([&] { return w.tryPanel()->isVisible(); });
}

// Types `tokens` into Try it's token limit.
void setMaxTokens(TryPanel* t, int tokens) {
  t->maxTokensBox()->setFocus();
  t->maxTokensBox()->selectAll();
  QTest::keyClicks(t->maxTokensBox(), QString::number(tokens));
}

}  // namespace

class TestEvaluatePanel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { uitest::isolateSettings(); }

  // The passkey lengths on offer fit the chosen model's context (the demo
  // model's 1,024 tokens with the answer's 8), and a length typed past it is
  // refused inline before anything is queued.
  void passkeyLengthsFollowTheChosenModelsContext() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    const QString folder = ws.dir + QStringLiteral("/models/demo-gqa");
    QVERIFY(QDir().mkpath(folder));
    writeHfConfig(builtinArchitecture("demo-gqa"), (folder + QStringLiteral("/config.json")).toStdString());
    MainWindow w(ws, uitest::quietWindowOptions());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    clickTab(w.rightTabs(), QStringLiteral("Evaluate"));
    EvaluatePanel* p = w.evaluatePanel();
    QTRY_VERIFY(p->isVisible());
    QVERIFY2(chooseWithKeys(p->modelBox(), QStringLiteral("demo-gqa")), qPrintable(p->modelBox()->currentText()));
    QCOMPARE(p->lengthsEdit()->text(), QStringLiteral("256, 512, 1016"));
    uitest::reveal(p->passkeyBox());
    QTest::mouseClick(p->passkeyBox(), Qt::LeftButton, {}, QPoint(8, p->passkeyBox()->height() / 2));
    uitest::typeInto(p->haystackEdit(), QString::fromLatin1(kHaystack));
    QVERIFY2(p->evaluateButton()->isEnabled(), qPrintable(p->statusLabel()->text()));
    uitest::typeInto(p->lengthsEdit(), QStringLiteral("256, 1k"));
    QVERIFY(!p->evaluateButton()->isEnabled());
    QVERIFY2(p->statusLabel()->text().contains(QStringLiteral("exceed the model's context of 1024")),
             qPrintable(p->statusLabel()->text()));
    QVERIFY2(p->statusLabel()->text().contains(QStringLiteral("at most 1016")), qPrintable(p->statusLabel()->text()));
    // What the user typed stays when the model list refreshes.
    p->refresh();
    QCOMPARE(p->lengthsEdit()->text(), QStringLiteral("256, 1k"));
    uitest::typeInto(p->lengthsEdit(), QStringLiteral("256, 1016"));
    QVERIFY2(p->evaluateButton()->isEnabled(), qPrintable(p->statusLabel()->text()));
    RunStore store(ws.dbPath().toStdString());
    QVERIFY(store.listRuns().empty());  // nothing was queued by the refused lengths
  }

  void evaluatingACheckpointFillsTheTableTheHeatmapAndTheCompareTable() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    QString out;
    RunSpec base = uitest::tinySpec("tiny base", 12);
    QVERIFY2(uitest::runEngineBlocking(ws.dir, base, &out), qPrintable(out));
    // A task file of 12 items.
    const QString task = dir.filePath(QStringLiteral("toy.jsonl"));
    {
      QFile f(task);
      QVERIFY(f.open(QIODevice::WriteOnly));
      for (int i = 0; i < 12; ++i)
        f.write(QStringLiteral("{\"context\": \"The for statement %1\", \"choices\": [\" loops\", \" is a function\"], "
                               "\"gold\": %2}\n")
                    .arg(i)
                    .arg(i % 2)
                    .toUtf8());
    }
    MainWindow w(ws, uitest::quietWindowOptions());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    clickTab(w.rightTabs(), QStringLiteral("Evaluate"));
    EvaluatePanel* p = w.evaluatePanel();
    QTRY_VERIFY(p->isVisible());
    QVERIFY(!p->evaluateButton()->isEnabled());  // nothing to evaluate on yet
    QVERIFY2(chooseWithKeys(p->modelBox(), QStringLiteral("tiny base · step 12")),
             qPrintable(p->modelBox()->currentText()));

    uitest::typeInto(p->taskFileEdit(), task);
    uitest::reveal(p->addTaskButton());
    QTest::mouseClick(p->addTaskButton(), Qt::LeftButton);
    QCOMPARE(p->taskList()->count(), 1);
    QCOMPARE(p->taskList()->item(0)->text(), QStringLiteral("toy"));
    QVERIFY(p->evaluateButton()->isEnabled());

    uitest::reveal(p->passkeyBox());
    // On its box (the widget spans the form's width; its middle is empty space).
    QTest::mouseClick(p->passkeyBox(), Qt::LeftButton, {}, QPoint(8, p->passkeyBox()->height() / 2));
    QVERIFY(p->passkeyBox()->isChecked());
    QVERIFY(!p->evaluateButton()->isEnabled());  // no haystack yet
    QVERIFY(p->statusLabel()->text().contains(QStringLiteral("haystack")));
    uitest::typeInto(p->haystackEdit(), QString::fromLatin1(kHaystack));
    uitest::typeInto(p->lengthsEdit(), QStringLiteral("128, 192"));
    uitest::typeInto(p->depthsEdit(), QStringLiteral("0, 1"));
    p->trialsBox()->setFocus();
    p->trialsBox()->selectAll();
    QTest::keyClicks(p->trialsBox(), QStringLiteral("2"));
    QCOMPARE(p->trialsBox()->value(), 2);
    QVERIFY2(p->evaluateButton()->isEnabled(), qPrintable(p->statusLabel()->text()));

    QSignalSpy finished(w.jobs(), &JobController::finished);
    uitest::reveal(p->evaluateButton());
    QTest::mouseClick(p->evaluateButton(), Qt::LeftButton);
    QVERIFY(finished.wait(120000));
    RunStore store(ws.dbPath().toStdString());
    const auto runs = store.listRuns();
    QCOMPARE(static_cast<int>(runs.size()), 2);
    QCOMPARE(QString::fromStdString(runs[1].kind), QStringLiteral("eval"));
    QCOMPARE(static_cast<int>(store.run(runs[1].id).status), static_cast<int>(RunStatus::Completed));

    // The figures are the trained run's at step 12.
    double acc = -1;
    int cells = 0;
    for (const EvaluationRecord& e : store.listEvaluations(runs[0].id)) {
      QCOMPARE(e.step, std::int64_t{12});
      if (e.task == "toy" && e.metric == "acc") acc = e.value;
      if (e.task == "passkey") ++cells;
    }
    QVERIFY(acc >= 0);
    QCOMPARE(cells, 4);
    QTRY_COMPARE(p->resultsTable()->rowCount(), 1);
    QCOMPARE(p->resultsTable()->item(0, 0)->text(), QStringLiteral("toy"));
    QCOMPARE(p->resultsTable()->item(0, 1)->text(), QStringLiteral("full"));
    QVERIFY(p->resultsTable()->item(0, 2)->text().startsWith(QString::number(acc, 'f', 3)));
    QCOMPARE(p->resultsTable()->item(0, 4)->text(), QStringLiteral("12"));
    // The heatmap: 2 lengths x 2 depths, each cell drawn in its share's colour.
    PasskeyHeatmap* map = p->heatmap();
    QCOMPARE(map->cells().size(), 4);
    QCOMPARE(map->lengths(), (QVector<int>{128, 192}));
    const QImage img = map->grab().toImage();
    for (const PasskeyCellView& c : map->cells()) {
      const QRect r = map->cellRect(c.length, c.depth);
      QVERIFY(!r.isEmpty());
      const QColor seen = img.pixelColor(r.topLeft() + QPoint(3, 3));
      const QColor want = PasskeyHeatmap::colorOf(c.share);
      QVERIFY2(std::abs(seen.red() - want.red()) < 3 && std::abs(seen.green() - want.green()) < 3,
               qPrintable(QStringLiteral("%1 vs %2").arg(seen.name(), want.name())));
    }
    QCOMPARE(PasskeyHeatmap::colorOf(0.0).name(), QStringLiteral("#d73027"));
    QCOMPARE(PasskeyHeatmap::colorOf(1.0).name(), QStringLiteral("#1a9850"));

    // The same again over an int4 cache (chosen with the keyboard): its
    // figures stand beside the first ones under their own names, and the
    // heatmap shows the grid of the cache chosen.
    QCOMPARE(p->kvCacheBox()->currentText(), QStringLiteral("full precision"));
    QVERIFY(chooseWithKeys(p->kvCacheBox(), QStringLiteral("int4")));
    QCOMPARE(p->heatmap()->cells().size(), 0);  // nothing scored over int4 yet
    uitest::reveal(p->evaluateButton());
    QTest::mouseClick(p->evaluateButton(), Qt::LeftButton);
    QVERIFY(finished.wait(120000));
    QCOMPARE(static_cast<int>(store.listRuns().size()), 3);
    int quantizedCells = 0;
    double quantizedAcc = -1;
    for (const EvaluationRecord& e : store.listEvaluations(runs[0].id)) {
      if (e.task == "passkey (int4 cache)") ++quantizedCells;
      if (e.task == "toy (int4 cache)" && e.metric == "acc") quantizedAcc = e.value;
    }
    QCOMPARE(quantizedCells, 4);
    QVERIFY(quantizedAcc >= 0);
    QTRY_COMPARE(p->resultsTable()->rowCount(), 2);
    QCOMPARE(p->resultsTable()->item(0, 0)->text(), QStringLiteral("toy"));
    QCOMPARE(p->resultsTable()->item(0, 1)->text(), QStringLiteral("full"));
    QCOMPARE(p->resultsTable()->item(1, 0)->text(), QStringLiteral("toy"));
    QCOMPARE(p->resultsTable()->item(1, 1)->text(), QStringLiteral("int4"));
    QVERIFY(p->resultsTable()->item(1, 2)->text().startsWith(QString::number(quantizedAcc, 'f', 3)));
    QCOMPARE(p->heatmap()->cells().size(), 4);
    QVERIFY2(p->heatmap()->title().contains(QStringLiteral("over the int4 cache")), qPrintable(p->heatmap()->title()));
    QVERIFY(chooseWithKeys(p->kvCacheBox(), QStringLiteral("full precision")));
    QCOMPARE(p->heatmap()->cells().size(), 4);
    QVERIFY(!p->heatmap()->title().contains(QStringLiteral("cache")));

    // The compare table of the trained run has a column for the task with its acc.
    w.comparePanel()->refreshTable();
    QAbstractItemModel* table = w.comparePanel()->findChild<QTableView*>() != nullptr
                                    ? w.comparePanel()->findChild<QTableView*>()->model()
                                    : nullptr;
    QVERIFY(table != nullptr);
    bool column = false;
    for (int c = 0; c < table->columnCount(); ++c)
      column = column || table->headerData(c, Qt::Horizontal).toString().contains(QStringLiteral("toy"));
    QVERIFY2(column, "no compare-table column for the task");
  }

  void tryItGeneratesFromTwoModelsSideBySide() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    QString out;
    QVERIFY2(uitest::runEngineBlocking(ws.dir, uitest::tinySpec("first", 8), &out), qPrintable(out));
    QVERIFY2(uitest::runEngineBlocking(ws.dir, uitest::tinySpec("second", 16), &out), qPrintable(out));
    MainWindow w(ws, uitest::quietWindowOptions());
    QVERIFY(showTryIt(w));
    TryPanel* t = w.tryPanel();
    QVERIFY(t->height() >= 250);  // the tab opened the bottom area
    QVERIFY(chooseWithKeys(t->modelBox(0), QStringLiteral("second")));
    QVERIFY(chooseWithKeys(t->modelBox(1), QStringLiteral("first")));
    t->promptEdit()->setFocus();
    t->promptEdit()->selectAll();
    QTest::keyClicks(t->promptEdit(), QStringLiteral("Lists are"));
    setMaxTokens(t, 12);
    QSignalSpy done(t, &TryPanel::finished);
    QTest::mouseClick(t->generateButton(), Qt::LeftButton);
    QVERIFY(t->running());
    QVERIFY(done.wait(60000));
    for (int side = 0; side < 2; ++side) {
      // The engine's own greedy text for the same model and prompt.
      const QJsonObject j = engineGreedy(w.jobs()->enginePath(), t->modelBox(side)->currentData().toString(),
                                         QStringLiteral("Lists are"), 12);
      QCOMPARE(t->output(side)->toPlainText(), j.value(QStringLiteral("text")).toString());
      const QString stats = t->statsLabel(side)->text();
      QVERIFY2(stats.contains(QStringLiteral("decode")) && stats.contains(QStringLiteral("KV cache")),
               qPrintable(stats));
      QVERIFY2(stats.startsWith(QString::number(j.value(QStringLiteral("generated_tokens")).toInt()) +
                                QStringLiteral(" tokens")),
               qPrintable(stats));
    }
    QVERIFY(t->output(0)->toPlainText() != t->output(1)->toPlainText());  // two different models
    QVERIFY(t->generateButton()->isEnabled());
  }

  // One model on both sides, side B over an int4 cache: 200 new tokens, so
  // all but the newest 128 of the cache's tokens are codes. Each side's text
  // and KV bytes are the engine's own for that cache, side B's fewer.
  void tryItComparesAModelWithItsQuantizedCache() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    QString out;
    QVERIFY2(uitest::runEngineBlocking(ws.dir, uitest::tinySpec("only", 8), &out), qPrintable(out));
    MainWindow w(ws, uitest::quietWindowOptions());
    QVERIFY(showTryIt(w));
    TryPanel* t = w.tryPanel();
    QVERIFY(chooseWithKeys(t->modelBox(0), QStringLiteral("only")));
    QVERIFY(chooseWithKeys(t->modelBox(1), QStringLiteral("only")));
    QCOMPARE(t->kvCacheBox(0)->currentText(), QStringLiteral("full precision"));
    QVERIFY(chooseWithKeys(t->kvCacheBox(1), QStringLiteral("int4")));
    setMaxTokens(t, 200);
    QSignalSpy done(t, &TryPanel::finished);
    QTest::mouseClick(t->generateButton(), Qt::LeftButton);
    QVERIFY(done.wait(120000));
    std::int64_t bytes[2] = {0, 0};
    for (int side = 0; side < 2; ++side) {
      const QJsonObject j = engineGreedy(
          w.jobs()->enginePath(), t->modelBox(side)->currentData().toString(), t->promptEdit()->toPlainText(), 200,
          side == 1 ? QStringList{QStringLiteral("--kv-quant"), QStringLiteral("int4")} : QStringList{});
      QCOMPARE(t->output(side)->toPlainText(), j.value(QStringLiteral("text")).toString());
      bytes[side] = static_cast<std::int64_t>(j.value(QStringLiteral("kv_cache_bytes")).toDouble());
      const QString stats = t->statsLabel(side)->text();
      QVERIFY2(stats.endsWith(QStringLiteral("KV cache ") + QString::fromStdString(formatBytes(bytes[side]))),
               qPrintable(stats));
    }
    QVERIFY2(bytes[1] > 0 && bytes[1] < bytes[0],
             qPrintable(QStringLiteral("%1 vs %2 bytes").arg(bytes[1]).arg(bytes[0])));
  }
};

QTEST_MAIN(TestEvaluatePanel)
#include "test_evaluate_panel.moc"
