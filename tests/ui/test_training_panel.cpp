// A spec saved from the training tab and loaded into a fresh one comes back
// field for field; a bad file is refused in the banner naming the field; the
// attention variant of a pre-training is chosen from the keyboard with its
// cost shown live and impossible settings blocking Run.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStyleOptionGroupBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QWheelEvent>
#include <QtTest>
#include <cmath>

#include <QLocale>
#include "charts/lr_curve_view.h"
#include "jobs/engine_path.h"
#include "jobs/job_controller.h"
#include "latentlab/architectures.h"
#include "latentlab/kv_budget.h"
#include "latentlab/memory_plan.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"
#include "latentlab/slurm.h"
#include "main_window.h"
#include "panels/attention_panel.h"
#include "panels/conversion_panel.h"
#include "panels/message_banner.h"
#include "panels/model_panel.h"
#include "panels/training_panel.h"
#include "ui_test_support.h"
#include "workspace.h"

using namespace latentlab;
using namespace latentlab::ui;

class TestTrainingPanel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { uitest::isolateSettings(); }

  void pretrainingAVariantShowsItsCostLiveAndBlocksImpossibleSettings() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());  // no demo base yet: the built-in demo-gqa is chosen
    MainWindow w(ws, uitest::quietWindowOptions());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.rightTabs()->setCurrentIndex(2);
    AttentionPanel* attention = w.trainingPanel()->attentionPanel();
    QVERIFY(attention->isEnabled());
    // MLA, from the keyboard: three steps down the list.
    QComboBox* variant = attention->variantBox();
    variant->setFocus();
    for (int i = 0; i < 3; ++i) QTest::keyClick(variant, Qt::Key_Down);
    QCOMPARE(variant->currentData().toString(), QStringLiteral("mla"));
    // The preview is the engine's own arithmetic for that variant.
    const ModelConfig base = builtinArchitecture(kDemoArch);
    const ModelConfig mla = attentionVariant(base, "mla", AttentionOptions{}, "attention");
    QVERIFY2(attention->preview().contains(
                 QStringLiteral("MLP width: %1 (base %2)").arg(mla.intermediateSize).arg(base.intermediateSize)),
             qPrintable(attention->preview()));
    QVERIFY(attention->preview().contains(QStringLiteral("KV cache / token")));
    // Tensor parallel 2: the cache per device too.
    QSpinBox* tp = attention->tensorParallelBox();
    tp->setFocus();
    QTest::keyClick(tp, Qt::Key_Up);
    QVERIFY2(attention->preview().contains(QStringLiteral("tensor parallel 2")), qPrintable(attention->preview()));
    QVERIFY(w.trainingPanel()->runButton()->isEnabled());
    QCOMPARE(w.trainingPanel()->spec().attention, std::string("mla"));
    // The memory plan has the engine's figure for the host's free memory.
    QTRY_VERIFY_WITH_TIMEOUT(w.trainingPanel()->memoryLabel()->text().contains(QStringLiteral("free on cpu")), 20000);
    QVERIFY2(w.trainingPanel()->memoryLabel()->text().contains(QStringLiteral(">fits<")),
             qPrintable(w.trainingPanel()->memoryLabel()->text()));
    // GQA with groups of 3 over 4 heads: impossible, said inline, Run blocked.
    variant->setFocus();
    QTest::keyClick(variant, Qt::Key_Up);  // GQA
    QCOMPARE(variant->currentData().toString(), QStringLiteral("gqa"));
    QSpinBox* group = nullptr;
    for (QSpinBox* box : attention->findChildren<QSpinBox*>()) {
      if (box->toolTip().startsWith(QStringLiteral("Query heads per KV head"))) group = box;
    }
    QVERIFY(group != nullptr && group->isVisible());
    group->setFocus();
    group->selectAll();
    QTest::keyClicks(group, QStringLiteral("3"));
    QVERIFY(!attention->blockReason().isEmpty());
    QVERIFY(attention->preview().contains(QStringLiteral("attention")));
    QVERIFY(!w.trainingPanel()->runButton()->isEnabled());
    // Back to a valid group: Run again, and the run is registered with its variant.
    group->selectAll();
    QTest::keyClicks(group, QStringLiteral("2"));
    QVERIFY(attention->blockReason().isEmpty());
    QVERIFY(w.trainingPanel()->runButton()->isEnabled());
    w.jobs()->setCpuSlots(0);
    QTest::mouseClick(w.trainingPanel()->runButton(), Qt::LeftButton);
    RunStore store(ws.dbPath().toStdString());
    const RunSpec stored = parseRunSpec(store.listRuns().back().specJson, "stored");
    QCOMPARE(stored.attention, std::string("gqa"));
    QCOMPARE(stored.attentionOptions.gqaGroup, 2);
  }

  // "Run on" offers the workspace's cluster profiles after this machine (one
  // that cannot be read listed, not selectable, with why), a profile added
  // while the window is open too; a cluster sets the device to the profile's
  // and this machine gives it back. Run on a cluster from a host without
  // Slurm's commands fails the job with the reason, the run kept and tagged.
  void runOnOffersTheWorkspacesClusterProfiles() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("clusters")));
    const auto writeProfile = [&](const QString& name, const QByteArray& text) {
      QFile f(dir.path() + QStringLiteral("/clusters/") + name + QStringLiteral(".json"));
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(text);
    };
    writeProfile(QStringLiteral("gpu"), R"({"nodes": 2, "tasks_per_node": 4, "gpus_per_node": 4})");
    writeProfile(QStringLiteral("bad"), R"({"nodes": 0})");
    MainWindow w(ws, uitest::quietWindowOptions());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    TrainingPanel* training = w.trainingPanel();
    w.rightTabs()->setCurrentWidget(training);
    QComboBox* on = training->placementBox();
    QCOMPARE(on->count(), 3);
    QCOMPARE(on->itemText(0), QStringLiteral("this machine"));
    QCOMPARE(on->itemText(1), QStringLiteral("Slurm: gpu · 2 nodes × 4 GPU ranks"));
    QVERIFY2(
        on->itemText(2).startsWith(QStringLiteral("Slurm: bad (")) && on->itemText(2).contains(QStringLiteral("nodes")),
        qPrintable(on->itemText(2)));
    const auto* items = qobject_cast<QStandardItemModel*>(on->model());
    QVERIFY(items != nullptr && !items->item(2)->isEnabled());
    QCOMPARE(training->spec().device, std::string("cpu"));
    uitest::reveal(on);
    on->setFocus();
    QTest::keyClick(on, Qt::Key_Down);
    QCOMPARE(training->cluster(), QStringLiteral("gpu"));
    QCOMPARE(training->spec().device, std::string("cuda"));
    // The plan has no verdict from this machine's free memory.
    training->updateMemoryPlan();
    QVERIFY2(
        training->memoryLabel()->text().contains(QStringLiteral("the free memory of gpu's nodes is not known here")),
        qPrintable(training->memoryLabel()->text()));
    QTest::keyClick(on, Qt::Key_Down);  // the unreadable profile is skipped
    QCOMPARE(training->cluster(), QStringLiteral("gpu"));
    // A spec loaded meanwhile keeps the cluster's device; its own comes back with this machine.
    RunSpec loaded = training->spec();
    loaded.device = "cpu,cpu";
    training->setSpec(loaded);
    QCOMPARE(training->spec().device, std::string("cuda"));
    on->setFocus();
    QTest::keyClick(on, Qt::Key_Up);
    QCOMPARE(training->cluster(), QString());
    QCOMPARE(training->spec().device, std::string("cpu,cpu"));
    writeProfile(QStringLiteral("cpu8"), R"({"tasks_per_node": 8, "device": "cpu"})");
    QTRY_COMPARE_WITH_TIMEOUT(on->count(), 4, 5000);
    QCOMPARE(on->itemText(1), QStringLiteral("Slurm: cpu8 · 8 CPU ranks"));
    // Placed on "cpu8" from a host whose PATH has no sbatch.
    QTest::keyClick(on, Qt::Key_Down);
    QCOMPARE(training->cluster(), QStringLiteral("cpu8"));
    const QByteArray path = qgetenv("PATH");
    qputenv("PATH", dir.path().toUtf8());
    QVERIFY(training->runButton()->isEnabled());
    uitest::reveal(training->runButton());
    QTest::mouseClick(training->runButton(), Qt::LeftButton);
    RunStore store(ws.dbPath().toStdString());
    const std::int64_t run = store.listRuns().back().id;
    QTRY_VERIFY_WITH_TIMEOUT(w.jobs()->job(run) != nullptr && w.jobs()->job(run)->status == RunStatus::Failed, 10000);
    qputenv("PATH", path);
    QVERIFY2(w.jobs()->job(run)->error.contains(QStringLiteral("sbatch is not on PATH")),
             qPrintable(w.jobs()->job(run)->error));
    QCOMPARE(w.jobs()->job(run)->placement(), QStringLiteral("Slurm (cpu8)"));
    QCOMPARE(store.run(run).status, RunStatus::Failed);
    QCOMPARE(runCluster(store, run), std::string("cpu8"));
    QVERIFY(QFile::exists(QStringLiteral("%1/runs/%2/slurm.sbatch").arg(dir.path()).arg(run)));
  }

  // Every built-in shape, and each latent variant of the demo shape, gets a
  // memory plan on the Training tab, chosen as a user does (the keyboard on
  // the architecture list), also when the conversion was on for a folder
  // before: a built-in shape is pre-trained, never converted.
  void everyBuiltInArchitectureHasAMemoryPlan() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    MainWindow w(ws, uitest::quietWindowOptions());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QComboBox* method = w.conversionPanel()->methodBox();
    QVERIFY2(!method->isEnabled(), "a built-in shape has nothing to convert");
    QCOMPARE(method->currentData().toString(), QStringLiteral("none"));
    QComboBox* arch = w.modelPanel()->architectureBox();
    QLabel* memory = w.trainingPanel()->memoryLabel();
    arch->setFocus();
    arch->setCurrentIndex(0);
    for (int i = 0; i < arch->count(); ++i) {
      if (i > 0) QTest::keyClick(arch, Qt::Key_Down);
      QCOMPARE(arch->currentIndex(), i);
      const QString name = arch->currentText();
      QCOMPARE(w.trainingPanel()->spec().kind, RunKind::Pretrain);
      QTRY_VERIFY2_WITH_TIMEOUT(
          memory->text().contains(QStringLiteral("per device")) || memory->text().contains(QStringLiteral(" free on ")),
          qPrintable(name + QStringLiteral(": ") + memory->text()), 10000);
      QVERIFY2(!memory->text().contains(QStringLiteral("no plan")),
               qPrintable(name + QStringLiteral(": ") + memory->text()));
    }
    // The demo shape's latent variants, chosen from the keyboard.
    arch->setCurrentText(QString::fromLatin1(kDemoArch));
    w.rightTabs()->setCurrentIndex(2);
    QComboBox* variant = w.trainingPanel()->attentionPanel()->variantBox();
    variant->setFocus();
    variant->setCurrentIndex(0);
    for (int i = 1; i < variant->count(); ++i) {
      QTest::keyClick(variant, Qt::Key_Down);
      const QString v = variant->currentData().toString();
      QTRY_VERIFY2_WITH_TIMEOUT(
          memory->text().contains(QStringLiteral(" free on ")) && !memory->text().contains(QStringLiteral("no plan")),
          qPrintable(v + QStringLiteral(": ") + memory->text()), 10000);
      QCOMPARE(w.trainingPanel()->spec().attention, v.toStdString());
    }
  }

  // The memory plan follows the attention variant chosen (its MLP width,
  // latent and cache change what the run holds), and the variant's KV figure
  // is in the dtype the run trains in: fp32 for auto on the CPU, bf16 once
  // bf16 is chosen.
  void theMemoryPlanAndTheKvFigureFollowTheVariantAndThePrecision() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    MainWindow w(ws, uitest::quietWindowOptions());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.rightTabs()->setCurrentIndex(2);
    QLabel* memory = w.trainingPanel()->memoryLabel();
    auto plannedItems = [&] {
      const RunSpec s = w.trainingPanel()->spec();
      const MemoryPlan p = planMemory(plannedModelConfig(s), s, 0);
      QStringList parts;
      for (const MemoryItem& i : p.items)
        parts << QStringLiteral("%1 %2").arg(QString::fromStdString(i.name),
                                             QString::fromStdString(formatBytes(i.bytes)));
      return parts.join(QStringLiteral(" · ")).toHtmlEscaped();
    };
    QTRY_VERIFY_WITH_TIMEOUT(memory->text().contains(QStringLiteral(" free on ")), 10000);
    const QString baseItems = plannedItems();
    QVERIFY2(memory->text().contains(baseItems), qPrintable(memory->text()));
    AttentionPanel* attention = w.trainingPanel()->attentionPanel();
    QComboBox* variant = attention->variantBox();
    variant->setFocus();
    for (int i = 0; i < 3; ++i) QTest::keyClick(variant, Qt::Key_Down);
    QCOMPARE(variant->currentData().toString(), QStringLiteral("mla"));
    const QString mlaItems = plannedItems();
    QVERIFY2(mlaItems != baseItems, qPrintable(mlaItems));
    QTRY_VERIFY2_WITH_TIMEOUT(memory->text().contains(mlaItems),
                              qPrintable(memory->text() + QStringLiteral(" vs ") + mlaItems), 5000);
    // The KV figure in the run's dtype.
    const ModelConfig mla = attentionVariant(builtinArchitecture(kDemoArch), "mla", AttentionOptions{}, "attention");
    QVERIFY2(attention->preview().contains(
                 QStringLiteral("KV cache / token (fp32): %1")
                     .arg(QLocale().formattedDataSize(currentKvBudget(mla, DType::F32).bytesPerToken, 2))),
             qPrintable(attention->preview()));
    QComboBox* precision = w.trainingPanel()->precisionBox();
    precision->setFocus();
    precision->setCurrentIndex(0);
    while (precision->currentText() != QLatin1String("bf16") && precision->currentIndex() + 1 < precision->count())
      QTest::keyClick(precision, Qt::Key_Down);
    QCOMPARE(precision->currentText(), QStringLiteral("bf16"));
    QVERIFY2(attention->preview().contains(
                 QStringLiteral("KV cache / token (bf16): %1")
                     .arg(QLocale().formattedDataSize(currentKvBudget(mla, DType::BF16).bytesPerToken, 2))),
             qPrintable(attention->preview()));
  }

  // A model folder opened, the built-in shape chosen, then the folder's radio
  // button clicked again: the Model tab shows the folder's model once more
  // (its weights line), a run converts it, and the Conversion tab offers the
  // conversion (it did not: the details and the spec kept the built-in shape).
  void choosingTheFolderAgainReopensItsModel() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    const QString folder = uitest::writeZeroModelFolder(dir.filePath(QStringLiteral("zero-gqa")), "demo-gqa");
    MainWindow w(ws, uitest::quietWindowOptions());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    ModelPanel* model = w.modelPanel();
    QVERIFY(model->openFolder(folder));
    QVERIFY(!model->fieldText(QStringLiteral("Weights")).isEmpty());
    QTest::mouseClick(model->builtinRadio(), Qt::LeftButton);
    QVERIFY(model->fieldText(QStringLiteral("Weights")).isEmpty());
    QCOMPARE(w.trainingPanel()->spec().kind, RunKind::Pretrain);
    QTest::mouseClick(model->folderRadio(), Qt::LeftButton);
    QVERIFY(model->folderRadio()->isChecked());
    QVERIFY2(!model->fieldText(QStringLiteral("Weights")).isEmpty(), "the details still describe the built-in shape");
    const RunSpec s = w.trainingPanel()->spec();
    QCOMPARE(QString::fromStdString(s.modelDir), folder);
    QVERIFY(s.kind != RunKind::Pretrain);
    QVERIFY(w.conversionPanel()->methodBox()->isEnabled());
  }

  // A converted folder typed into the Model tab's folder field (Enter) shows
  // its conversion as config.json names it: strategy, r and d_kv.
  void aConvertedFolderTypedInShowsItsConversion() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    const QString base = dir.filePath(QStringLiteral("base")), converted = dir.filePath(QStringLiteral("converted"));
    QProcess engine;
    engine.start(ui::engineExecutablePath(), {QStringLiteral("init"), QStringLiteral("--arch"),
                                              QStringLiteral("demo-gqa"), QStringLiteral("--out"), base});
    QVERIFY(engine.waitForFinished(60000) && engine.exitCode() == 0);
    engine.start(ui::engineExecutablePath(),
                 {QStringLiteral("convert"), QStringLiteral("--model"), base, QStringLiteral("--out"), converted,
                  QStringLiteral("--rope"), QStringLiteral("high"), QStringLiteral("--r"), QStringLiteral("2"),
                  QStringLiteral("--dkv"), QStringLiteral("8")});
    QVERIFY2(engine.waitForFinished(60000) && engine.exitCode() == 0, engine.readAllStandardError().constData());
    MainWindow w(ws, uitest::quietWindowOptions());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    ModelPanel* model = w.modelPanel();
    QTest::mouseClick(model->folderRadio(), Qt::LeftButton);
    QLineEdit* field = model->findChild<QLineEdit*>();
    QVERIFY(field != nullptr);
    field->setFocus();
    field->selectAll();
    QTest::keyClicks(field, converted);
    QTest::keyClick(field, Qt::Key_Return);
    QTRY_COMPARE(model->folder(), converted);
    QCOMPARE(model->fieldText(QStringLiteral("MLA")), QStringLiteral("converted: high, r=2, d_kv=8"));
  }

  // The distillation box is switched on by a click on its check box; α and the
  // temperature typed in reach the spec, survive a save and a load into a
  // fresh window, and a click switches it off again.
  void distillationSwitchAndAlphaRoundTripToTheSpec() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    MainWindow w(ws, uitest::quietWindowOptions());
    w.resize(1280, 800);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.rightTabs()->setCurrentIndex(2);
    TrainingPanel* panel = w.trainingPanel();
    QGroupBox* box = panel->distillBox();
    QVERIFY(!box->isChecked());
    QVERIFY(!panel->spec().distill.enabled);
    QScrollArea* scroll = nullptr;
    for (QWidget* p = box->parentWidget(); p != nullptr && scroll == nullptr; p = p->parentWidget())
      scroll = qobject_cast<QScrollArea*>(p);
    QVERIFY(scroll != nullptr);
    scroll->ensureWidgetVisible(box);
    QTest::qWait(20);
    const auto clickCheck = [&] {
      QStyleOptionGroupBox opt;
      opt.initFrom(box);
      opt.subControls = QStyle::SC_GroupBoxCheckBox | QStyle::SC_GroupBoxLabel;
      opt.features = QStyleOptionFrame::None;
      opt.text = box->title();
      opt.state |= QStyle::State_On;
      const QRect check = box->style()->subControlRect(QStyle::CC_GroupBox, &opt, QStyle::SC_GroupBoxCheckBox, box);
      QTest::mouseClick(box, Qt::LeftButton, Qt::NoModifier, check.center());
    };
    clickCheck();
    QVERIFY(box->isChecked());
    QVERIFY(panel->alphaBox()->isEnabled());
    const auto typeInto = [](QDoubleSpinBox* field, const QString& text) {
      QTest::mouseClick(field, Qt::LeftButton);
      field->selectAll();
      QTest::keyClicks(field, text);
      QTest::keyClick(field, Qt::Key_Return);
    };
    typeInto(panel->alphaBox(), QStringLiteral("0.8"));
    typeInto(panel->temperatureBox(), QStringLiteral("2"));
    RunSpec s = panel->spec();
    QVERIFY(s.distill.enabled);
    QCOMPARE(s.distill.teacher, std::string("original"));
    QCOMPARE(s.distill.alpha, 0.8);
    QCOMPARE(s.distill.temperature, 2.0);

    // Saved and loaded into a fresh window: the same block.
    s.kind = RunKind::ConvertFinetune;  // the kind the Model tab gives a conversion
    s.modelDir = dir.filePath(QStringLiteral("base")).toStdString();
    const QString file = dir.filePath(QStringLiteral("distill.json"));
    {
      QFile f(file);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QByteArray::fromStdString(runSpecToJson(s)));
    }
    MainWindow fresh(ws, uitest::quietWindowOptions());
    QVERIFY(fresh.trainingPanel()->loadSpecFile(file));
    QVERIFY(fresh.trainingPanel()->distillBox()->isChecked());
    QCOMPARE(fresh.trainingPanel()->alphaBox()->value(), 0.8);
    QCOMPARE(fresh.trainingPanel()->temperatureBox()->value(), 2.0);
    QVERIFY(fresh.trainingPanel()->spec().distill.enabled);

    clickCheck();
    QVERIFY(!box->isChecked());
    QVERIFY(!panel->alphaBox()->isEnabled());
    QVERIFY(!panel->spec().distill.enabled);
  }

  // The wheel over an unfocused field scrolls the Training panel and leaves
  // the value alone; once the field has the focus the wheel changes it.
  void theWheelScrollsThePanelNotAnUnfocusedField() {
    QTemporaryDir dir;
    const Workspace ws = openWorkspace(dir.path());
    MainWindow w(ws, uitest::quietWindowOptions());
    w.resize(1280, 800);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.rightTabs()->setCurrentIndex(2);
    QSpinBox* tp = w.trainingPanel()->attentionPanel()->tensorParallelBox();
    tp->setFocus();
    QTest::keyClick(tp, Qt::Key_Up);
    QCOMPARE(tp->value(), 2);
    QScrollArea* scroll = nullptr;
    for (QWidget* p = tp->parentWidget(); p != nullptr && scroll == nullptr; p = p->parentWidget())
      scroll = qobject_cast<QScrollArea*>(p);
    QVERIFY2(scroll != nullptr, "the Training panel scrolls");
    w.trainingPanel()->runButton()->setFocus();  // the focus elsewhere, as after clicking another field
    QVERIFY(!tp->hasFocus());
    scroll->ensureWidgetVisible(tp);
    QTest::qWait(20);
    const int before = scroll->verticalScrollBar()->value();
    const QPointF centre(tp->width() / 2.0, tp->height() / 2.0);
    auto wheelDown = [&](QWidget* target) {
      QWheelEvent wheel(centre, target->mapToGlobal(centre), QPoint(), QPoint(0, -120), Qt::NoButton, Qt::NoModifier,
                        Qt::NoScrollPhase, false);
      QApplication::sendEvent(target, &wheel);
    };
    wheelDown(tp);
    QCOMPARE(tp->value(), 2);
    QVERIFY(!tp->hasFocus());
    if (scroll->verticalScrollBar()->maximum() > before) QVERIFY(scroll->verticalScrollBar()->value() > before);
    // A combo box likewise.
    QComboBox* variant = w.trainingPanel()->attentionPanel()->variantBox();
    const int chosen = variant->currentIndex();
    wheelDown(variant);
    QCOMPARE(variant->currentIndex(), chosen);
    // Focused (clicked or tabbed into): the wheel is the field's.
    tp->setFocus();
    wheelDown(tp);
    QCOMPARE(tp->value(), 1);
  }

  void specJsonSaveLoadRoundTrip() {
    RunSpec s;
    s.name = "smollm dkv16 2-norm";
    s.kind = RunKind::ConvertFinetune;
    s.modelDir = "/models/SmolLM-135M";
    s.conversion.enabled = true;
    s.conversion.ropeStrategy = RopeStrategy::Uniform;
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
    s.schedule.kind = ScheduleKind::Cosine;
    s.schedule.warmupSteps = 100;
    s.schedule.minLrRatio = 0.1;
    s.steps = 12000;
    s.microBatch = 16;
    s.gradAccum = 4;
    s.precision = Precision::Bf16;
    s.seed = 42;
    s.evalEvery = 500;
    s.evalBatches = 32;
    s.checkpointEvery = 1000;
    s.zeroInitOutput = true;
    s.recompute = true;
    s.zeroStage = 2;
    s.device = "cuda:1";
    validateRunSpec(s, "test");

    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("spec.json"));
    TrainingPanel a;
    a.setSpec(s);
    QVERIFY(a.lrCurve()->pointCount() > 100);
    // Its ticks are nice steps from 0 (1, 2 or 5 times a power of ten), not the range cut in four.
    for (const auto& ticks : {a.lrCurve()->xTicks(), a.lrCurve()->yTicks()}) {
      QVERIFY(ticks.size() >= 2);
      QCOMPARE(ticks.front(), 0.0);
      const double step = ticks[1] - ticks[0];
      const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
      QVERIFY2(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 || std::abs(mantissa - 5) < 1e-9,
               qPrintable(QString::number(step)));
    }
    QVERIFY(a.saveSpecFile(path));
    TrainingPanel b;
    QSignalSpy loaded(&b, &TrainingPanel::specLoaded);
    QVERIFY(b.loadSpecFile(path));
    QCOMPARE(loaded.count(), 1);
    QCOMPARE(QString::fromStdString(runSpecToJson(b.spec())), QString::fromStdString(runSpecToJson(s)));
  }

  // The memory plan follows the settings as they are typed and clicked: a
  // micro-batch that does not fit the device blocks Run with the numbers,
  // and turning on recompute (clicked) makes it fit again.
  void memoryPlanFollowsTheSettingsAndBlocksARunThatCannotFit() {
    TrainingPanel panel;
    RunSpec s;
    s.kind = RunKind::Pretrain;
    s.architecture = "smollm-135m";
    s.microBatch = 2;
    s.data.seqLen = 1024;
    s.precision = Precision::Fp32;
    s.device = "cpu";
    panel.setSpec(s);
    panel.setBaseModel(builtinArchitecture("smollm-135m"));
    const std::uint64_t gib = std::uint64_t{1} << 30;
    panel.setDeviceMemory({DeviceInfo{"cpu", "CPU", 16 * gib, 8 * gib}});
    panel.resize(720, 1000);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QLabel* memory = panel.memoryLabel();
    QTRY_VERIFY2(memory->text().contains(QStringLiteral(">fits<")), qPrintable(memory->text()));
    QVERIFY(panel.runButton()->isEnabled());
    // The figure shown is the planner's for the panel's spec.
    auto planned = [&] {
      const RunSpec now = panel.spec();
      return QString::fromStdString(formatBytes(planMemory(plannedModelConfig(now), now, 8 * gib).peakBytes));
    };
    QVERIFY2(memory->text().contains(QStringLiteral("<b>%1</b>").arg(planned())), qPrintable(memory->text()));

    // Eight micro-batches of 1024 tokens, typed: too much for 8 GiB.
    QSpinBox* mb = panel.microBatchBox();
    mb->setFocus();
    QTest::keyClick(mb, Qt::Key_A, Qt::ControlModifier);
    QTest::keyClicks(mb, QStringLiteral("8"));
    QTest::keyClick(mb, Qt::Key_Tab);
    QCOMPARE(panel.spec().microBatch, 8);
    QTRY_VERIFY2(memory->text().contains(QStringLiteral("does not fit")), qPrintable(memory->text()));
    QVERIFY(!panel.runButton()->isEnabled());
    QVERIFY(panel.blockedLabel()->isVisible());
    QVERIFY2(panel.blockedLabel()->text().contains(QStringLiteral("8.00 GiB free")),
             qPrintable(panel.blockedLabel()->text()));
    QVERIFY2(memory->text().contains(QStringLiteral("to fit: turn on recompute")), qPrintable(memory->text()));
    QVERIFY2(memory->text().contains(QStringLiteral("<b>%1</b>").arg(planned())), qPrintable(memory->text()));

    // Recompute, clicked: it fits again and Run is back.
    QCheckBox* recompute = panel.recomputeBox();
    auto* scroll = panel.findChild<QScrollArea*>();
    QVERIFY(scroll != nullptr);
    scroll->ensureWidgetVisible(recompute);
    QTest::mouseClick(recompute, Qt::LeftButton, {}, QPoint(10, recompute->height() / 2));
    QVERIFY(recompute->isChecked());
    QTRY_VERIFY2(memory->text().contains(QStringLiteral(">fits<")), qPrintable(memory->text()));
    QVERIFY(panel.runButton()->isEnabled());
    QVERIFY(!panel.blockedLabel()->isVisible());
    QVERIFY2(memory->text().contains(QStringLiteral("<b>%1</b>").arg(planned())), qPrintable(memory->text()));
  }

  // Two 24 GiB GPUs and SmolLM-1.7B in bf16: each card alone cannot hold the
  // masters and moments (14 bytes a parameter); ZeRO-2, chosen from the
  // keyboard, splits them over the two ranks and the plan fits.
  void zeroShardingChosenFromTheKeyboardMakesTheRunFit() {
    TrainingPanel panel;
    RunSpec s;
    s.kind = RunKind::Pretrain;
    s.architecture = "smollm-1.7b";
    s.microBatch = 1;
    s.data.seqLen = 2048;
    s.precision = Precision::Bf16;
    s.recompute = true;
    s.device = "cuda:0,cuda:1";
    panel.setSpec(s);
    const std::uint64_t gib = std::uint64_t{1} << 30;
    panel.setDeviceMemory({DeviceInfo{"cpu", "CPU", 64 * gib, 60 * gib},
                           DeviceInfo{"cuda:0", "GPU", 24 * gib, 23 * gib},
                           DeviceInfo{"cuda:1", "GPU", 24 * gib, 23 * gib}});
    panel.resize(720, 1000);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QLabel* memory = panel.memoryLabel();
    QTRY_VERIFY2(memory->text().contains(QStringLiteral("does not fit")), qPrintable(memory->text()));
    QVERIFY(!panel.runButton()->isEnabled());
    QComboBox* zero = panel.zeroBox();
    auto* scroll = panel.findChild<QScrollArea*>();
    scroll->ensureWidgetVisible(zero);
    zero->setFocus();
    QTest::keyClick(zero, Qt::Key_Down);
    QTest::keyClick(zero, Qt::Key_Down);
    QCOMPARE(panel.spec().zeroStage, 2);
    QTRY_VERIFY2(memory->text().contains(QStringLiteral(">fits<")), qPrintable(memory->text()));
    QVERIFY2(memory->text().contains(QStringLiteral("gradient slices")), qPrintable(memory->text()));
    QVERIFY(panel.runButton()->isEnabled());
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
