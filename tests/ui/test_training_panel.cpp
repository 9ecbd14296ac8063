// A spec saved from the training tab and loaded into a fresh one comes back
// field for field; a bad file is refused in the banner naming the field.
#include <QTemporaryDir>
#include <QtTest>

#include "charts/lr_curve_view.h"
#include "latentlab/run_spec.h"
#include "panels/message_banner.h"
#include "panels/training_panel.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestTrainingPanel : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void specJsonSaveLoadRoundTrip() {
    RunSpec s;
    s.name = "smollm dkv16 2-norm";
    s.kind = "convert-finetune";
    s.modelDir = "/models/SmolLM-135M";
    s.conversion.enabled = true;
    s.conversion.ropeStrategy = "uniform";
    s.conversion.ropePairs = 4;
    s.conversion.dKv = 16;
    s.data.corpus = "/data/corpus.jsonl";
    s.data.textField = "content";
    s.data.tokenizerVocab = 8192;
    s.data.seqLen = 512;
    s.data.validationShare = 0.05;
    s.data.maxCorpusBytes = 123456;
    s.optimizer.lr = 2.5e-4;
    s.optimizer.beta2 = 0.999;
    s.optimizer.eps = 1e-6;
    s.optimizer.weightDecay = 0.1;
    s.optimizer.clip = 0.5;
    s.schedule.kind = "cosine";
    s.schedule.warmupSteps = 100;
    s.schedule.minLrRatio = 0.1;
    s.steps = 12000;
    s.microBatch = 16;
    s.gradAccum = 4;
    s.dtype = "bf16";
    s.seed = 42;
    s.evalEvery = 500;
    s.evalBatches = 32;
    s.checkpointEvery = 1000;
    s.zeroInitOutput = true;
    s.device = "cuda:1";
    validateRunSpec(s, "test");

    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("spec.json"));
    TrainingPanel a;
    a.setSpec(s);
    QVERIFY(a.lrCurve()->pointCount() > 100);
    QVERIFY(a.saveSpecFile(path));
    TrainingPanel b;
    QSignalSpy loaded(&b, &TrainingPanel::specLoaded);
    QVERIFY(b.loadSpecFile(path));
    QCOMPARE(loaded.count(), 1);
    QCOMPARE(QString::fromStdString(runSpecToJson(b.spec())), QString::fromStdString(runSpecToJson(s)));
  }

  void badSpecFileShowsTheFieldInTheBanner() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("bad.json"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"version":1,"kind":"pretrain","architecture":"demo-gqa","stepz":10})");
    f.close();
    TrainingPanel p;
    QVERIFY(!p.loadSpecFile(path));
    QVERIFY(p.banner()->isVisibleTo(&p));
    QVERIFY2(p.banner()->message().contains(QStringLiteral("stepz")), qPrintable(p.banner()->message()));
  }
};

QTEST_MAIN(TestTrainingPanel)
#include "test_training_panel.moc"
