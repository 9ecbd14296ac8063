// The conversion tab previews the paper's KV-cache savings for the SmolLM-135M
// shape, and impossible r / d_kv disable Run with the reason shown.
#include <QLabel>
#include <QPushButton>
#include <QtTest>

#include "latentlab/architectures.h"
#include "panels/conversion_panel.h"
#include "panels/message_banner.h"
#include "panels/training_panel.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestConversionPanel : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void previewMatchesThePaperForSmolLm135m_data() {
    QTest::addColumn<int>("dKv");
    QTest::addColumn<QString>("saving");
    QTest::newRow("d_kv 32") << 32 << QStringLiteral("-68.75%");
    QTest::newRow("d_kv 16") << 16 << QStringLiteral("-81.25%");
    QTest::newRow("d_kv 8") << 8 << QStringLiteral("-87.50%");
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
    QVERIFY2(conversion->blockReason().contains(QStringLiteral("exceeds d_h/2")), qPrintable(conversion->blockReason()));
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
