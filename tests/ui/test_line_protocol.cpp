// The line-protocol parser turns every documented event into typed fields and
// survives partial reads and garbage.
#include <QtTest>

#include "jobs/line_protocol_parser.h"
#include "latentlab/events.h"

using namespace latentlab::ui;

class TestLineProtocol : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void parsesEveryDocumentedEvent() {
    auto hello = parseEngineLine(R"({"event":"hello","protocol":1,"run":7,"pid":4242})");
    QCOMPARE(hello.kind, EngineEvent::Kind::Hello);
    QCOMPARE(hello.run, 7);
    QCOMPARE(hello.pid, 4242);
    QCOMPARE(hello.protocol, 1);
    auto prog = parseEngineLine(
        R"({"event":"progress","step":12,"steps":30,"tokens":1536,"loss":5.25,"lr":0.001,"grad_norm":1.5,"tokens_per_s":900.5})");
    QCOMPARE(prog.kind, EngineEvent::Kind::Progress);
    QCOMPARE(prog.step, 12);
    QCOMPARE(prog.steps, 30);
    QCOMPARE(prog.tokens, 1536);
    QCOMPARE(prog.loss, 5.25);
    QCOMPARE(prog.gradNorm, 1.5);
    QCOMPARE(prog.tokensPerSec, 900.5);
    auto st = parseEngineLine(R"({"event":"status","run":7,"status":"failed","error":"data.corpus: missing"})");
    QCOMPARE(st.kind, EngineEvent::Kind::Status);
    QCOMPARE(st.status, QStringLiteral("failed"));
    QCOMPARE(st.error, QStringLiteral("data.corpus: missing"));
    auto ev = parseEngineLine(R"({"event":"eval","step":0,"val_loss":6.5})");
    QCOMPARE(ev.kind, EngineEvent::Kind::Eval);
    QCOMPARE(ev.valLoss, 6.5);
    auto ck = parseEngineLine(R"({"event":"checkpoint","step":50,"path":"/w/runs/7/checkpoints/step-50"})");
    QCOMPARE(ck.kind, EngineEvent::Kind::Checkpoint);
    QCOMPARE(ck.path, QStringLiteral("/w/runs/7/checkpoints/step-50"));
    auto log = parseEngineLine(R"({"event":"log","level":"info","message":"resumed at step 50"})");
    QCOMPARE(log.kind, EngineEvent::Kind::Log);
    QCOMPARE(log.message, QStringLiteral("resumed at step 50"));
    QCOMPARE(parseEngineLine(R"({"event":"future"})").kind, EngineEvent::Kind::Unknown);
  }

  // Every kind the engine writes (latentlab/events.h) is decoded, field for
  // field, by the workbench's parser: the two sides share one definition.
  void everyEventTheEngineWritesIsDecoded() {
    using latentlab::EngineEvent;
    using latentlab::EventKind;
    EngineEvent progress = EngineEvent::progressOf(12, 30, 1536);
    progress.loss = 5.25;
    progress.lr = 1e-3;
    progress.gradNorm = 1.5;
    progress.tokensPerSecond = 900.5;
    const std::vector<EngineEvent> written = {
        EngineEvent::hello(7, 4242),
        EngineEvent::statusOf(7, "failed", "data.corpus: missing"),
        progress,
        EngineEvent::progressOf(40, 120, 0),  // an evaluation job's: no loss
        EngineEvent::evalOf(50, 6.5),
        EngineEvent::evalTaskOf(50, "arc_easy", 0.625, 0.5, 40),
        EngineEvent::checkpointOf(50, "/w/runs/7/checkpoints/step-50"),
        EngineEvent::logOf("warning", "resumed at step 50"),
    };
    QSet<int> kinds;
    for (const EngineEvent& e : written) {
      const std::string line = latentlab::eventLine(e);
      const auto ev = parseEngineLine(QByteArray::fromStdString(line));
      QVERIFY2(ev.kind != latentlab::ui::EngineEvent::Kind::Unknown &&
                   ev.kind != latentlab::ui::EngineEvent::Kind::Malformed,
               line.c_str());
      QCOMPARE(
          QString::fromLatin1(latentlab::eventKindName(e.kind)),
          QJsonDocument::fromJson(QByteArray::fromStdString(line)).object().value(QStringLiteral("event")).toString());
      kinds.insert(static_cast<int>(e.kind));
      switch (e.kind) {
        case EventKind::Hello:
          QCOMPARE(ev.kind, latentlab::ui::EngineEvent::Kind::Hello);
          QCOMPARE(ev.run, 7);
          QCOMPARE(ev.pid, 4242);
          QCOMPARE(ev.protocol, latentlab::kLineProtocolVersion);
          break;
        case EventKind::Status:
          QCOMPARE(ev.kind, latentlab::ui::EngineEvent::Kind::Status);
          QCOMPARE(ev.status, QStringLiteral("failed"));
          QCOMPARE(ev.error, QStringLiteral("data.corpus: missing"));
          break;
        case EventKind::Progress:
          QCOMPARE(ev.kind, latentlab::ui::EngineEvent::Kind::Progress);
          QCOMPARE(ev.step, e.step);
          QCOMPARE(ev.steps, e.steps);
          QCOMPARE(ev.tokens, e.tokens);
          QCOMPARE(ev.hasLoss, e.loss.has_value());
          QCOMPARE(ev.loss, e.loss.value_or(0.0));
          QCOMPARE(ev.lr, e.lr.value_or(0.0));
          QCOMPARE(ev.gradNorm, e.gradNorm.value_or(0.0));
          QCOMPARE(ev.tokensPerSec, e.tokensPerSecond.value_or(0.0));
          break;
        case EventKind::Eval:
          QCOMPARE(ev.kind, latentlab::ui::EngineEvent::Kind::Eval);
          QCOMPARE(ev.step, 50);
          QCOMPARE(ev.valLoss, 6.5);
          break;
        case EventKind::EvalTask:
          QCOMPARE(ev.kind, latentlab::ui::EngineEvent::Kind::EvalTask);
          QCOMPARE(ev.step, 50);
          QCOMPARE(ev.task, QStringLiteral("arc_easy"));
          QCOMPARE(ev.acc, 0.625);
          QCOMPARE(ev.accNorm, 0.5);
          QCOMPARE(ev.items, 40);
          break;
        case EventKind::Checkpoint:
          QCOMPARE(ev.kind, latentlab::ui::EngineEvent::Kind::Checkpoint);
          QCOMPARE(ev.path, QStringLiteral("/w/runs/7/checkpoints/step-50"));
          break;
        case EventKind::Log:
          QCOMPARE(ev.kind, latentlab::ui::EngineEvent::Kind::Log);
          QCOMPARE(ev.level, QStringLiteral("warning"));
          QCOMPARE(ev.message, QStringLiteral("resumed at step 50"));
          break;
        case EventKind::Unknown:
        case EventKind::Malformed:
          QFAIL("not a written kind");
      }
    }
    // Every kind that can be written was written above.
    for (int k = static_cast<int>(EventKind::Hello); k < static_cast<int>(EventKind::Unknown); ++k) {
      QVERIFY2(kinds.contains(k), latentlab::eventKindName(static_cast<EventKind>(k)));
    }
  }

  void partialReadsAreBufferedUntilTheNewline() {
    LineProtocolParser p;
    QVERIFY(p.feed(R"({"event":"progress","st)").isEmpty());
    auto evs = p.feed("ep\":3}\n{\"event\":\"eval\",\"step\":3,\"val_loss\":2}\n{\"event\":");
    QCOMPARE(evs.size(), 2);
    QCOMPARE(evs[0].step, 3);
    QCOMPARE(evs[1].kind, EngineEvent::Kind::Eval);
    auto rest = p.finish();
    QCOMPARE(rest.size(), 1);
    QCOMPARE(rest[0].kind, EngineEvent::Kind::Malformed);
  }

  void garbageIsMalformedNotFatal() {
    QCOMPARE(parseEngineLine("Segmentation fault").kind, EngineEvent::Kind::Malformed);
    QCOMPARE(parseEngineLine("[1,2]").kind, EngineEvent::Kind::Malformed);
  }
};

QTEST_GUILESS_MAIN(TestLineProtocol)
#include "test_line_protocol.moc"
