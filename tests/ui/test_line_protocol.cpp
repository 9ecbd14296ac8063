// The line-protocol parser turns every documented event into typed fields and
// survives partial reads and garbage.
#include <QtTest>

#include "jobs/line_protocol_parser.h"

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
