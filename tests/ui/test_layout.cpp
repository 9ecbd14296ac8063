// The main window at the sizes users have (1440x900, 1280x800) over a
// workspace with runs: the window is not forced wider or taller than the
// screen, no panel needs a sideways scroll (nothing is cut off), the run tree
// shows whole run names, and the chart's controls all sit inside its pane.
#include <QAbstractButton>
#include <QAbstractScrollArea>
#include <QComboBox>
#include <QFontMetrics>
#include <QHeaderView>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabBar>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTreeView>
#include <QtTest>

#include "charts/chart_view.h"
#include "charts/compare_math.h"
#include "latentlab/run_store.h"
#include "main_window.h"
#include "models/compare_table_model.h"
#include "models/run_tree_model.h"
#include "panels/compare_panel.h"
#include "panels/runs_panel.h"
#include "ui_test_support.h"
#include "workspace.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestLayout : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { uitest::isolateSettings(); }

  void everyPanelFitsAtCommonWindowSizes_data() {
    QTest::addColumn<QSize>("size");
    QTest::newRow("1440x900") << QSize(1440, 900);
    QTest::newRow("1280x800") << QSize(1280, 800);
  }

  void everyPanelFitsAtCommonWindowSizes() {
    QFETCH(QSize, size);
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    {
      RunStore store(ws.dbPath().toStdString());
      const auto exp = store.createExperiment("demo: rope strategies", "rope-strategies");
      for (const char* name : {"demo 2-norm d_kv 8", "demo high d_kv 8", "demo uniform d_kv 8"}) {
        const auto id = store.createRun(exp, name, "convert-finetune", "{}", "cpu");
        MetricWriter w = store.metricWriter(id);
        for (int s = 1; s <= 20; ++s) w.add("train/loss", s, s * 1024, s, 5.0 - 0.01 * s);
      }
    }
    MainWindow w(ws, uitest::quietWindowOptions());
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTest::qWait(50);
    // The window's minimum fits: it was not widened past the screen.
    QVERIFY2(
        w.minimumSizeHint().width() <= size.width() && w.minimumSizeHint().height() <= size.height(),
        qPrintable(QStringLiteral("minimum %1x%2").arg(w.minimumSizeHint().width()).arg(w.minimumSizeHint().height())));
    QCOMPARE(w.size(), size);
    // Every tab on the right: no scroll area needs to scroll sideways.
    for (int tab = 0; tab < w.rightTabs()->count(); ++tab) {
      w.rightTabs()->setCurrentIndex(tab);
      QTest::qWait(20);
      for (QAbstractScrollArea* area : w.rightTabs()->currentWidget()->findChildren<QAbstractScrollArea*>()) {
        if (!area->isVisible() || qobject_cast<QAbstractItemView*>(area) != nullptr) continue;
        QVERIFY2(!area->horizontalScrollBar()->isVisible(),
                 qPrintable(QStringLiteral("tab %1 scrolls sideways at %2x%3")
                                .arg(w.rightTabs()->tabText(tab))
                                .arg(size.width())
                                .arg(size.height())));
        // Nor is its content wider than what shows (a hidden scroll bar would cut it off).
        if (auto* scroll = qobject_cast<QScrollArea*>(area); scroll != nullptr && scroll->widget() != nullptr) {
          QVERIFY2(scroll->widget()->minimumSizeHint().width() <= scroll->viewport()->width(),
                   qPrintable(QStringLiteral("tab %1: content %2 px in %3 px")
                                  .arg(w.rightTabs()->tabText(tab))
                                  .arg(scroll->widget()->minimumSizeHint().width())
                                  .arg(scroll->viewport()->width())));
        }
      }
    }
    // Whole run names in the tree.
    QTreeView* tree = w.runsPanel()->view();
    const QFontMetrics fm(tree->font());
    int runs = 0;
    for (int e = 0; e < w.runModel()->rowCount(); ++e) {
      const QModelIndex exp = w.runModel()->index(e, 0);
      for (int r = 0; r < w.runModel()->rowCount(exp); ++r) {
        const QModelIndex idx = w.runModel()->index(r, 0, exp);
        const QRect cell = tree->visualRect(idx);
        const int text = fm.horizontalAdvance(idx.data().toString());
        QVERIFY2(
            cell.width() >= text + tree->iconSize().width() + 12,
            qPrintable(
                QStringLiteral("'%1' needs %2 px, has %3").arg(idx.data().toString()).arg(text).arg(cell.width())));
        ++runs;
      }
    }
    QCOMPARE(runs, 3);
    // Every compare mode shows its whole name in the combo (not "Paired (no scale − s").
    w.comparePanel()->setCompareMode(CompareMode::Paired);
    for (QComboBox* combo : w.chart()->findChildren<QComboBox*>()) {
      if (!combo->isVisible()) continue;
      for (int i = 0; i < combo->count(); ++i) {
        const int text = QFontMetrics(combo->font()).horizontalAdvance(combo->itemText(i));
        QVERIFY2(combo->width() >= text + 20, qPrintable(QStringLiteral("'%1' needs %2 px, its combo has %3")
                                                             .arg(combo->itemText(i))
                                                             .arg(text + 20)
                                                             .arg(combo->width())));
      }
    }
    // The chart's controls inside the chart pane.
    ChartView* chart = w.chart();
    const QRect pane = chart->rect();
    for (QWidget* control : chart->findChildren<QWidget*>()) {
      if (!control->isVisible() || control->parentWidget() == nullptr) continue;
      if (qobject_cast<QAbstractButton*>(control) == nullptr && qobject_cast<QComboBox*>(control) == nullptr) continue;
      const QRect at(control->mapTo(chart, QPoint(0, 0)), control->size());
      QVERIFY2(pane.contains(at),
               qPrintable(QStringLiteral("%1 '%2' outside the chart pane")
                              .arg(QString::fromLatin1(control->metaObject()->className()), control->objectName())));
    }
  }

  // The compare table of a finished experiment at the common sizes: the
  // final and matched-token validation loss and the KV columns are in view
  // together, without
  // scrolling, and a run name longer than the row header allows is elided
  // with its whole name in the tooltip.
  void theCompareTableShowsLossAndKvColumnsTogether_data() {
    QTest::addColumn<QSize>("size");
    QTest::newRow("1440x900") << QSize(1440, 900);
    QTest::newRow("1280x800") << QSize(1280, 800);
  }

  void theCompareTableShowsLossAndKvColumnsTogether() {
    QFETCH(QSize, size);
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    const QString longName =
        QStringLiteral("demo-gqa rope RoRoPE (DeepSeek-V3) with a note the user added to tell it apart");
    {
      RunStore store(ws.dbPath().toStdString());
      const auto exp = store.createExperiment("demo: Partial-RoPE strategies", "rope-strategies");
      int i = 0;
      for (const QString& name : {QStringLiteral("demo-gqa rope S_low"), QStringLiteral("demo-gqa rope S_2-norm"),
                                  QStringLiteral("demo-gqa rope full-rope"), longName}) {
        // The last run's corpus differs: a long value in a config column.
        const std::string spec =
            name == longName
                ? R"({"conversion":{"d_kv":8},"data":{"corpus":"/srv/corpora/the-pile/a long folder name/with several words/train.jsonl"}})"
                : R"({"conversion":{"d_kv":8},"data":{"corpus":"demo"}})";
        const auto id = store.createRun(exp, name.toStdString(), "convert-finetune", spec, "cpu");
        MetricWriter wr = store.metricWriter(id);
        for (int s = 1; s <= 20; ++s) {
          wr.add("train/loss", s, s * 1024, s, 5.0 - 0.01 * s - 0.1 * i);
          if (s % 5 == 0) wr.add("val/loss", s, s * 1024, s, 5.1 - 0.01 * s - 0.1 * i);
        }
        store.setStatus(id, RunStatus::Running);
        store.setStatus(id, RunStatus::Completed);
        store.setSummary(id, QStringLiteral(R"({"tokens":20480,"tokens_per_s":1234,"parameters":1234567,)"
                                            R"("kv_bytes_per_token":%1,"kv_dtype":"bf16","kv_saving":%2})")
                                 .arg(1536 - 256 * i)
                                 .arg(-(256.0 * i) / 1536.0)
                                 .toStdString());
        ++i;
      }
    }
    MainWindow w(ws, uitest::quietWindowOptions());
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    // Select the experiment with the mouse, as a user does.
    QTreeView* tree = w.runsPanel()->view();
    const QModelIndex exp = w.runModel()->index(0, 0);
    QTest::mouseClick(tree->viewport(), Qt::LeftButton, {}, tree->visualRect(exp).center());
    QTableView* table = w.comparePanel()->table();
    QTRY_COMPARE(table->model()->rowCount(), 4);
    QTest::qWait(50);
    auto* model = qobject_cast<CompareTableModel*>(qobject_cast<QSortFilterProxyModel*>(table->model())->sourceModel());
    QVERIFY(model != nullptr);
    for (const char* key : {"final_val_loss", "matched_val_loss", "kv_saving", "kv_bytes_per_token"}) {
      const int column = model->columnOf(QLatin1String(key));
      QVERIFY(column > 0);
      const int x = table->columnViewportPosition(column);
      QVERIFY2(x >= 0 && x + table->columnWidth(column) <= table->viewport()->width(),
               qPrintable(QStringLiteral("%1 at %2..%3 in a %4 px table at %5x%6")
                              .arg(QLatin1String(key))
                              .arg(x)
                              .arg(x + table->columnWidth(column))
                              .arg(table->viewport()->width())
                              .arg(size.width())
                              .arg(size.height())));
    }
    // A column the user widens by dragging its header's edge keeps its width
    // when the table refreshes (as it does every few seconds during training).
    QHeaderView* columns = table->horizontalHeader();
    const int finalColumn = model->columnOf(QStringLiteral("final_val_loss"));
    const int before = columns->sectionSize(finalColumn);
    const int edge = columns->sectionViewportPosition(finalColumn) + before - 1;
    const int y = columns->height() / 2;
    QTest::mousePress(columns->viewport(), Qt::LeftButton, {}, QPoint(edge, y));
    QTest::mouseMove(columns->viewport(), QPoint(edge + 20, y));
    QTest::mouseMove(columns->viewport(), QPoint(edge + 40, y));
    QTest::mouseRelease(columns->viewport(), Qt::LeftButton, {}, QPoint(edge + 40, y));
    QVERIFY2(columns->sectionSize(finalColumn) >= before + 30,
             qPrintable(QStringLiteral("dragged %1 -> %2").arg(before).arg(columns->sectionSize(finalColumn))));
    const int dragged = columns->sectionSize(finalColumn);
    w.comparePanel()->refreshTable();
    QTest::qWait(20);
    QCOMPARE(columns->sectionSize(finalColumn), dragged);
    // Every run one line high (a value wider than its column is not wrapped onto a second line).
    for (int r = 1; r < table->model()->rowCount(); ++r) QCOMPARE(table->rowHeight(r), table->rowHeight(0));
    // The long name is elided in the row header and whole in its tooltip.
    QHeaderView* rows = table->verticalHeader();
    const int longRow = 3;
    QVERIFY2(rows->width() < QFontMetrics(rows->font()).horizontalAdvance(longName),
             qPrintable(QStringLiteral("row header %1 px").arg(rows->width())));
    // What the header draws is the name elided to fit, not the name cut at the cells.
    const QString shown = table->model()->headerData(longRow, Qt::Vertical, Qt::DisplayRole).toString();
    QVERIFY2(shown.endsWith(QChar(0x2026)) && QFontMetrics(rows->font()).horizontalAdvance(shown) < rows->width(),
             qPrintable(QStringLiteral("'%1' in %2 px").arg(shown).arg(rows->width())));
    QVERIFY(table->model()->headerData(longRow, Qt::Vertical, Qt::ToolTipRole).toString().contains(longName));
  }

  // Try it opens the bottom area while it is shown and gives the room back
  // when another tab is chosen; a layout saved on a larger screen with the
  // plot dragged down to 120 px comes back fitting this screen with the plot
  // at least 40% of the height.
  void aSavedLayoutFitsThisScreenAndKeepsThePlotsShare() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    const QRect free = QGuiApplication::primaryScreen()->availableGeometry();
    ui::MainWindowOptions options = uitest::quietWindowOptions();
    options.restoreLayout = true;
    auto clickTab = [](QTabWidget* tabs, const QString& title) {
      QTabBar* bar = tabs->tabBar();
      for (int i = 0; i < bar->count(); ++i)
        if (bar->tabText(i) == title) QTest::mouseClick(bar, Qt::LeftButton, {}, bar->tabRect(i).center());
    };
    {
      MainWindow w(ws, options);
      w.resize(free.width() + 400, free.height() + 300);
      w.show();
      QVERIFY(QTest::qWaitForWindowExposed(&w));
      QSplitter* split = w.verticalSplitter();
      const int total = split->sizes()[0] + split->sizes()[1];
      split->setSizes({total - 150, 150});
      const QList<int> before = split->sizes();
      clickTab(w.bottomTabs(), QStringLiteral("Try it"));
      QTRY_VERIFY(split->sizes()[1] >= 320);
      clickTab(w.bottomTabs(), QStringLiteral("Log"));
      QTRY_COMPARE(split->sizes(), before);
      split->setSizes({120, total - 120});
      w.close();
    }
    MainWindow again(ws, options);
    again.show();
    QVERIFY(QTest::qWaitForWindowExposed(&again));
    // No larger than the screen (or than the window's own minimum, where the
    // test screen is smaller than any real one).
    const QSize least = again.minimumSizeHint();
    QVERIFY2(again.width() <= std::max(free.width(), least.width()) &&
                 again.height() <= std::max(free.height(), least.height()),
             qPrintable(QStringLiteral("%1x%2 on a %3x%4 screen")
                            .arg(again.width())
                            .arg(again.height())
                            .arg(free.width())
                            .arg(free.height())));
    QSplitter* split = again.verticalSplitter();
    QTRY_VERIFY2(
        split->sizes()[0] >= 0.4 * (split->sizes()[0] + split->sizes()[1]),
        qPrintable(QStringLiteral("plot %1 of %2").arg(split->sizes()[0]).arg(split->sizes()[0] + split->sizes()[1])));
  }
};

QTEST_MAIN(TestLayout)
#include "test_layout.moc"
