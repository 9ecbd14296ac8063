// The conversion tab previews the paper's KV-cache savings for the SmolLM-135M
// shape, and impossible r / d_kv disable Run with the reason shown; the
// DeepSeek-V3 target chosen and set with the keyboard; a KV budget typed into
// the window charts each layer's d_kv from the real engine and refuses an
// impossible budget or layer list inline.
#include <QComboBox>
#include <QDirIterator>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QTabBar>
#include <QTemporaryDir>
#include <QtTest>
#include <numeric>

#include "charts/kv_allocation_view.h"
#include "latentlab/architectures.h"
#include "latentlab/kv_budget.h"
#include "latentlab/run_spec.h"
#include "main_window.h"
#include "panels/conversion_panel.h"
#include "panels/message_banner.h"
#include "panels/training_panel.h"
#include "ui_test_support.h"
#include "workspace.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestConversionPanel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void previewMatchesThePaperForSmolLm135m_data() {
    QTest::addColumn<int>("dKv");
    QTest::addColumn<QString>("saving");
    QTest::newRow("d_kv 32") << 32 << QStringLiteral("68.75%");
    QTest::newRow("d_kv 16") << 16 << QStringLiteral("81.25%");
    QTest::newRow("d_kv 8") << 8 << QStringLiteral("87.50%");
  }
  void previewMatchesThePaperForSmolLm135m() {
    QFETCH(int, dKv);
    QFETCH(QString, saving);
    ConversionPanel panel;
    panel.setModelConfig(builtinArchitecture("smollm-135m"));
    panel.setMethod(true);
    panel.setRopeStrategy(QStringLiteral("2-norm"));
    panel.setRopePairs(4);
    panel.setDKv(dKv);
    QVERIFY2(panel.blockReason().isEmpty(), qPrintable(panel.blockReason()));
    QVERIFY(panel.budget().has_value());
    QCOMPARE(panel.savingText(), saving);
    QCOMPARE(panel.findChild<QLabel*>(QStringLiteral("kvSaving"))->text(), saving);
    // 30 layers x 2 x 3 KV heads x 64 dims x 2 bytes (bf16) before conversion.
    QCOMPARE(panel.budget()->originalBytesPerToken, 30 * 2 * 3 * 64 * 2);
    const qint64 after = panel.budget()->bytesPerToken;
    QCOMPARE(after, static_cast<qint64>(30 * (2 * 4 * 3 + dKv * 3) * 2));
    QVERIFY(panel.findChild<QLabel*>(QStringLiteral("kvTotal"))->text().contains(QStringLiteral("4,096")) ||
            panel.findChild<QLabel*>(QStringLiteral("kvTotal"))->text().contains(QStringLiteral("4096")));
    // With int4 codes: per layer 3 RoPE keys of 8 values (4 bytes of codes, a bf16 scale and zero-point each)
    // and a latent of 3 d_kv values in groups of 64, of 32 where 64 does not divide it (d_kv 32: 96 values).
    const int latent = 3 * dKv, group = dKv == 32 ? 32 : 64, groups = latent <= group ? 1 : latent / group;
    const qint64 int4 = 30 * (3 * (4 + 4) + (latent / 2 + groups * 4));
    const QString quantized = panel.findChild<QLabel*>(QStringLiteral("kvQuantized"))->text();
    QVERIFY2(
        quantized.startsWith(QLocale().formattedDataSize(int4, 2) + QStringLiteral(" per token past the newest 128")),
        qPrintable(quantized));
    QVERIFY2(quantized.contains(QStringLiteral("(groups of %1)").arg(group)), qPrintable(quantized));
  }

  void impossibleSettingsDisableRunWithTheReason() {
    QWidget host;
    auto* conversion = new ConversionPanel(&host);
    auto* training = new TrainingPanel(&host);
    connect(conversion, &ConversionPanel::validityChanged, training, &TrainingPanel::setBlockedReason);
    conversion->setModelConfig(builtinArchitecture("smollm-135m"));
    conversion->setMethod(true);
    conversion->setRopePairs(4);
    conversion->setDKv(16);
    QVERIFY(training->runButton()->isEnabled());
    QVERIFY(!training->blockedLabel()->isVisibleTo(&host));

    conversion->setRopePairs(40);  // d_h/2 = 32 pairs
    QVERIFY(!conversion->blockReason().isEmpty());
    QVERIFY2(conversion->blockReason().contains(QStringLiteral("exceeds d_h/2")),
             qPrintable(conversion->blockReason()));
    QVERIFY(!training->runButton()->isEnabled());
    QVERIFY(training->blockedLabel()->isVisibleTo(&host));
    QVERIFY(training->blockedLabel()->text().contains(conversion->blockReason()));
    auto* banner = conversion->findChild<MessageBanner*>(QStringLiteral("conversionBanner"));
    QVERIFY(banner->isVisibleTo(conversion));
    QCOMPARE(banner->hint(), conversion->blockReason());

    conversion->setRopePairs(4);
    conversion->setDKv(4000);  // beyond the rank of [K_nope, V]
    QVERIFY(conversion->blockReason().contains(QStringLiteral("d_kv")));
    QVERIFY(!training->runButton()->isEnabled());

    conversion->setRopeStrategy(QStringLiteral("uniform"));
    conversion->setDKv(16);
    conversion->setRopePairs(5);  // 32 % 5 != 0
    QVERIFY(conversion->blockReason().contains(QStringLiteral("S_uniform")));
    conversion->setRopePairs(4);
    QVERIFY(conversion->blockReason().isEmpty());
    QVERIFY(training->runButton()->isEnabled());
    QVERIFY(!training->blockedLabel()->isVisibleTo(&host));
  }

  // The DeepSeek target's RoPE key follows r (d_R = 2 r n_kv), whatever the
  // greyed MHA2MLA strategy was left at (Full RoPE here).
  void theDeepSeekTargetFollowsRNotTheGreyedStrategy() {
    QWidget host;
    auto* conversion = new ConversionPanel(&host);
    host.show();
    QVERIFY(QTest::qWaitForWindowExposed(&host));
    conversion->setModelConfig(builtinArchitecture("smollm-135m"));
    conversion->setMethod(true);
    conversion->setRopeStrategy(QStringLiteral("full"));
    conversion->setDKv(16);
    QComboBox* method = conversion->methodBox();
    method->setFocus();
    QTest::keyClick(method, Qt::Key_Down);
    QCOMPARE(conversion->target(), QStringLiteral("deepseek"));
    QSpinBox* r = nullptr;
    for (QSpinBox* b : conversion->findChildren<QSpinBox*>()) {
      if (b->specialValueText().contains(QStringLiteral("d_h/16"))) r = b;
    }
    QVERIFY(r != nullptr && r->isEnabled());
    for (int pairs : {2, 4}) {
      r->setFocus();
      r->selectAll();
      QTest::keyClicks(r, QString::number(pairs));
      QTest::keyClick(r, Qt::Key_Enter);
      QVERIFY2(conversion->blockReason().isEmpty(), qPrintable(conversion->blockReason()));
      // 3 KV heads: d_R = 2 r 3, the latent 3 x 16.
      QCOMPARE(conversion->budget()->perTokenPerLayer, 2 * pairs * 3 + 48);
      bool exportable = false;
      for (QLabel* l : conversion->findChildren<QLabel*>())
        if (l->text().contains(QStringLiteral("Exportable as DeepSeek-V3"))) exportable = true;
      QVERIFY(exportable);
    }
    RunSpec spec;
    spec.modelDir = "/models/SmolLM-135M";
    conversion->applyTo(spec);
    const KvSettings planned = kvSettingsFor(spec.conversion);
    QVERIFY(!planned.fullRope);
    QCOMPARE(computeKvBudget(builtinArchitecture("smollm-135m"), planned, DType::BF16).perTokenPerLayer,
             2 * 4 * 3 + 48);
  }

  void theDeepSeekTargetChosenWithTheKeyboardCostsTheSameKvAndSaysWhetherItExports() {
    QWidget host;
    auto* conversion = new ConversionPanel(&host);
    auto* training = new TrainingPanel(&host);
    connect(conversion, &ConversionPanel::validityChanged, training, &TrainingPanel::setBlockedReason);
    host.show();
    QVERIFY(QTest::qWaitForWindowExposed(&host));
    conversion->setModelConfig(builtinArchitecture("smollm-135m"));
    conversion->setMethod(true);
    conversion->setRopePairs(4);
    conversion->setDKv(16);
    const qint64 mha2mlaBytes = conversion->budget()->bytesPerToken;

    // The method combo is the first combo; the DeepSeek entry is reached with the arrow keys.
    auto* method = conversion->findChildren<QComboBox*>().first();
    method->setFocus();
    QTest::keyClick(method, Qt::Key_Down);
    QCOMPARE(conversion->target(), QStringLiteral("deepseek"));
    QVERIFY2(conversion->blockReason().isEmpty(), qPrintable(conversion->blockReason()));
    // d_R = 2 r n_kv = 24 and a latent of 3 x 16: the same bytes as MHA2MLA at r 4, d_kv 16.
    QCOMPARE(conversion->budget()->bytesPerToken, mha2mlaBytes);
    QCOMPARE(conversion->budget()->perTokenPerLayer, 24 + 48);
    bool saysExportable = false;
    for (QLabel* l : conversion->findChildren<QLabel*>())
      if (l->text().contains(QStringLiteral("Exportable as DeepSeek-V3"))) saysExportable = true;
    QVERIFY(saysExportable);

    // The width typed into its box: odd is refused inline and blocks Run.
    QSpinBox* width = nullptr;
    QSpinBox* fold = nullptr;
    for (QSpinBox* b : conversion->findChildren<QSpinBox*>()) {
      if (b->toolTip().startsWith(QStringLiteral("d_R"))) width = b;
      if (b->toolTip().startsWith(QStringLiteral("FreqFold"))) fold = b;
    }
    QVERIFY(width != nullptr && fold != nullptr);
    QVERIFY(width->isEnabled() && fold->isEnabled());
    auto type = [](QSpinBox* box, const QString& text) {
      box->setFocus();
      box->selectAll();
      QTest::keyClicks(box, text);
      QTest::keyClick(box, Qt::Key_Enter);
    };
    type(width, QStringLiteral("25"));
    QVERIFY2(conversion->blockReason().contains(QStringLiteral("even")), qPrintable(conversion->blockReason()));
    QVERIFY(!training->runButton()->isEnabled());
    // Wider than the frequency table: allowed (repeated frequencies), said not to export.
    type(width, QStringLiteral("128"));
    QVERIFY2(conversion->blockReason().isEmpty(), qPrintable(conversion->blockReason()));
    QVERIFY(training->runButton()->isEnabled());
    bool saysNot = false;
    for (QLabel* l : conversion->findChildren<QLabel*>())
      if (l->text().contains(QStringLiteral("Not exportable"))) saysNot = true;
    QVERIFY(saysNot);
    type(width, QStringLiteral("32"));
    type(fold, QStringLiteral("3"));  // 32 pairs do not fall into groups of 3
    QVERIFY2(conversion->blockReason().contains(QStringLiteral("fold")), qPrintable(conversion->blockReason()));
    type(fold, QStringLiteral("2"));
    QVERIFY(conversion->blockReason().isEmpty());

    RunSpec spec;
    spec.modelDir = "/models/SmolLM-135M";
    conversion->applyTo(spec);
    QCOMPARE(spec.conversion.target, ConversionTarget::DeepSeek);
    QCOMPARE(spec.conversion.factorisation(), Factorisation::Activations);
    QCOMPARE(spec.conversion.ropeWidth, 32);
    QCOMPARE(spec.conversion.freqFold, 2);
    QCOMPARE(spec.kind, RunKind::ConvertFinetune);
    // And back: a spec loads into the panel as it was.
    ConversionPanel again;
    again.setModelConfig(builtinArchitecture("smollm-135m"));
    again.loadFrom(spec);
    QCOMPARE(again.target(), QStringLiteral("deepseek"));
    QCOMPARE(again.budget()->perTokenPerLayer, 32 + 48);
  }

  // The 2025-26 families, set with the keyboard: SmolLM3's NoPE layers and
  // Qwen3's key-norm scales are counted and said; the DeepSeek target refuses
  // a QK-norm model with the reason.
  void familiesPreviewTheirLayerKindsAndRefuseWhatTheyCannotHold() {
    QWidget host;
    auto* conversion = new ConversionPanel(&host);
    host.show();
    QVERIFY(QTest::qWaitForWindowExposed(&host));
    auto field = [&](const QString& label) -> QSpinBox* {
      for (QSpinBox* b : conversion->findChildren<QSpinBox*>()) {
        auto* form = qobject_cast<QFormLayout*>(b->parentWidget()->layout());
        auto* l = form ? qobject_cast<QLabel*>(form->labelForField(b)) : nullptr;
        if (l && l->text() == label) return b;
      }
      return nullptr;
    };
    auto type = [](QSpinBox* box, const QString& text) {
      box->setFocus();
      box->selectAll();
      QTest::keyClicks(box, text);
      QTest::keyClick(box, Qt::Key_Enter);
    };
    auto labelsSay = [&](const QString& what) {
      for (QLabel* l : conversion->findChildren<QLabel*>())
        if (l->text().contains(what)) return true;
      return false;
    };
    conversion->setModelConfig(builtinArchitecture("smollm3-3b"));
    conversion->setMethod(true);
    QSpinBox* r = field(QStringLiteral("Kept RoPE pairs r:"));
    QSpinBox* dKv = field(QStringLiteral("d_kv per KV head:"));
    QVERIFY(r != nullptr && dKv != nullptr);
    type(r, QStringLiteral("8"));
    type(dKv, QStringLiteral("16"));
    QVERIFY2(conversion->blockReason().isEmpty(), qPrintable(conversion->blockReason()));
    // 27 RoPE layers of 4 x (16 + 16) and 9 NoPE layers of 4 x 16, bf16.
    QCOMPARE(conversion->budget()->bytesPerToken, static_cast<qint64>((27 * 128 + 9 * 64) * 2));
    const QString perToken = conversion->findChild<QLabel*>(QStringLiteral("kvPerToken"))->text();
    QVERIFY2(perToken.contains(QStringLiteral("128 per RoPE layer")) || perToken.contains(QStringLiteral("→ 128")),
             qPrintable(perToken));
    QVERIFY2(perToken.contains(QStringLiteral("64 per NoPE layer")), qPrintable(perToken));
    QVERIFY(labelsSay(QStringLiteral("9 of 36 layers have no RoPE")));

    conversion->setModelConfig(builtinArchitecture("qwen3-0.6b"));
    type(r, QStringLiteral("8"));
    type(dKv, QStringLiteral("16"));
    // 28 layers of 8 x (16 + 16 + 1): the RoPE key, the latent and one key-norm scale per KV head.
    QCOMPARE(conversion->budget()->bytesPerToken, static_cast<qint64>(28 * 8 * 33 * 2));
    QVERIFY(labelsSay(QStringLiteral("QK norm kept exact: 8 key-norm scales")));
    auto* method = conversion->findChildren<QComboBox*>().first();
    method->setFocus();
    QTest::keyClick(method, Qt::Key_Down);
    QCOMPARE(conversion->target(), QStringLiteral("deepseek"));
    QVERIFY2(conversion->blockReason().contains(QStringLiteral("key norm")), qPrintable(conversion->blockReason()));
  }

  void aTypedKvBudgetChartsEachLayerAndImpossibleOnesAreRefusedInline() {
    uitest::isolateSettings();
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    QString out;
    QVERIFY2(uitest::runEngineBlocking(ws.dir, uitest::tinySpec("base", 12), &out), qPrintable(out));
    // The trained model becomes the workspace's demo base, which the window opens to convert.
    QString modelDir;
    for (QDirIterator it(ws.dir + QStringLiteral("/runs"), {QStringLiteral("config.json")}, QDir::Files,
                         QDirIterator::Subdirectories);
         it.hasNext();)
      modelDir = QFileInfo(it.next()).absolutePath();
    QVERIFY(!modelDir.isEmpty());
    QVERIFY(QDir().mkpath(ws.demoBaseDir()));
    for (const QString& f : QDir(modelDir).entryList(QDir::Files))
      QVERIFY(QFile::copy(modelDir + QLatin1Char('/') + f, ws.demoBaseDir() + QLatin1Char('/') + f));

    MainWindow w(ws, uitest::quietWindowOptions());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    // Calibration (S_2-norm) on the tutorial, the run's training data.
    RunSpec spec = w.trainingPanel()->spec();
    spec.data.corpus = "/usr/share/doc/python3.11/html/_sources/tutorial";
    w.trainingPanel()->setSpec(spec);
    QTabBar* bar = w.rightTabs()->tabBar();
    for (int i = 0; i < bar->count(); ++i) {
      if (bar->tabText(i) == tr("Conversion")) QTest::mouseClick(bar, Qt::LeftButton, {}, bar->tabRect(i).center());
    }
    ConversionPanel* c = w.conversionPanel();
    QTRY_VERIFY(c->isVisible());
    QCOMPARE(c->target(), QStringLiteral("mha2mla"));
    QVERIFY(!c->allocationView()->isVisible());

    // demo-gqa: 4 layers, 2 KV heads of 32 dims, r = 2 by default; d_kv 8
    // everywhere caches 4 x 2 (2*2 + 8) fp32 values = 384 bytes per token.
    uitest::typeInto(c->kvBudgetEdit(), QStringLiteral("d_kv:8"));
    QVERIFY2(c->blockReason().isEmpty(), qPrintable(c->blockReason()));
    QTRY_VERIFY(c->allocationView()->isVisible());
    QCOMPARE(c->allocationView()->uniformBars(), std::vector<double>(4, 8.0));
    QTRY_VERIFY_WITH_TIMEOUT(!c->allocationView()->allocatedBars().empty(), 60000);
    const std::vector<double> own = c->allocationView()->allocatedBars();
    QCOMPARE(own.size(), std::size_t{4});
    QCOMPARE(std::accumulate(own.begin(), own.end(), 0.0), 32.0);  // the same bytes
    for (double d : own) QVERIFY(d >= 1);
    QVERIFY2(c->allocationNote().contains(QStringLiteral("384 bytes")), qPrintable(c->allocationNote()));
    QVERIFY2(c->allocationNote().contains(QStringLiteral("Validation loss right after conversion")),
             qPrintable(c->allocationNote()));
    QCOMPARE(w.trainingPanel()->spec().conversion.kvBudget, std::string("d_kv:8"));
    QVERIFY(w.trainingPanel()->runButton()->isEnabled());

    // Under the smallest cache: refused inline, Run blocked, no chart.
    uitest::typeInto(c->kvBudgetEdit(), QStringLiteral("10"));
    QVERIFY2(c->blockReason().contains(QStringLiteral("under the smallest cache")), qPrintable(c->blockReason()));
    auto* banner = c->findChild<MessageBanner*>(QStringLiteral("conversionBanner"));
    QVERIFY(banner->isVisibleTo(c));
    QVERIFY(!w.trainingPanel()->runButton()->isEnabled());
    QVERIFY(!c->allocationView()->isVisible());

    // A saving of 75%: a quarter of the original 4 x 2 x 2 x 32 fp32 values
    // (2048 bytes) is 512 bytes, 4 x 2 (2*2 + 12): d_kv 12 everywhere.
    uitest::typeInto(c->kvBudgetEdit(), QStringLiteral("75%"));
    QVERIFY2(c->blockReason().isEmpty(), qPrintable(c->blockReason()));
    QTRY_COMPARE(c->allocationView()->uniformBars(), std::vector<double>(4, 12.0));
    // Converting the last two layers only: the others keep their cache and get
    // no latent, so the same saving is now impossible; d_kv 8's bytes are not.
    uitest::typeInto(c->layersEdit(), QStringLiteral("last:2"));
    QVERIFY2(c->blockReason().contains(QStringLiteral("2 converted layers")), qPrintable(c->blockReason()));
    uitest::typeInto(c->kvBudgetEdit(), QStringLiteral("d_kv:8"));
    QVERIFY2(c->blockReason().isEmpty(), qPrintable(c->blockReason()));
    QTRY_VERIFY_WITH_TIMEOUT(c->allocationView()->allocatedBars().size() == 4, 60000);
    QCOMPARE(c->allocationView()->allocatedBars()[0], 0.0);
    QCOMPARE(c->allocationView()->allocatedBars()[1], 0.0);
    QCOMPARE(w.trainingPanel()->spec().conversion.layers, std::string("last:2"));
    uitest::typeInto(c->layersEdit(), QStringLiteral("0,7"));
    QVERIFY2(c->blockReason().contains(QStringLiteral("Converted layers")), qPrintable(c->blockReason()));
    QVERIFY(!w.trainingPanel()->runButton()->isEnabled());
  }

  void noConversionKeepsTheOriginalCache() {
    ConversionPanel panel;
    panel.setModelConfig(builtinArchitecture("smollm-135m"));
    panel.setMethod(false);
    QVERIFY(panel.blockReason().isEmpty());
    QCOMPARE(panel.savingText(), QStringLiteral("0.00%"));
  }
};

QTEST_MAIN(TestConversionPanel)
#include "test_conversion_panel.moc"
