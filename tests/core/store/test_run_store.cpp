// Experiments, runs and their status transitions, summaries, pid/heartbeat,
// events, artifacts, tags, and cascading deletes.
#include "store/run_store_impl.h"
#include "store_test_util.h"

namespace latentlab {
namespace {
using namespace latentlab::test;

TEST(RunStoreCrud, ExperimentsAreCreatedListedAndRead) {
  RunStore store(freshDbPath("crud-experiments"));
  std::int64_t a = store.createExperiment("rope strategies", "rope-strategies", "S_low vs S_high");
  std::int64_t b = store.createExperiment("sweep");
  auto all = store.listExperiments();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, a);
  EXPECT_EQ(all[0].preset, "rope-strategies");
  EXPECT_EQ(all[0].description, "S_low vs S_high");
  EXPECT_GT(all[0].createdAt, 1.6e9);
  EXPECT_EQ(store.experiment(b).name, "sweep");
  EXPECT_EQ(store.experiment(b).preset, "");
  EXPECT_EQ(storeErrorOf([&] { store.experiment(999); }).code(), ErrorCode::Store);
  EXPECT_EQ(storeErrorOf([&] { store.createExperiment(""); }).code(), ErrorCode::BadInput);
}

TEST(RunStoreCrud, CreateRunIsQueuedWithItsSpec) {
  RunStore store(freshDbPath("crud-runs"));
  std::int64_t exp = store.createExperiment("e");
  std::int64_t id = store.createRun(exp, "mla-dkv16", "train", R"({"dKv":16})", "cuda:0");
  RunRecord r = store.run(id);
  EXPECT_EQ(r.id, id);
  EXPECT_EQ(r.experimentId, exp);
  EXPECT_EQ(r.name, "mla-dkv16");
  EXPECT_EQ(r.kind, "train");
  EXPECT_EQ(r.status, RunStatus::Queued);
  EXPECT_EQ(r.specJson, R"({"dKv":16})");
  EXPECT_EQ(r.device, "cuda:0");
  EXPECT_GT(r.createdAt, 1.6e9);
  EXPECT_FALSE(r.startedAt);
  EXPECT_FALSE(r.finishedAt);
  EXPECT_FALSE(r.pid);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.summaryJson, "");

  std::int64_t loose = store.createRun(std::nullopt, "adhoc", "eval", "", "cpu");
  EXPECT_FALSE(store.run(loose).experimentId);
  EXPECT_EQ(store.run(loose).specJson, "{}");

  EXPECT_EQ(storeErrorOf([&] { store.createRun(exp, "x", "train", "{not json", "cpu"); }).code(), ErrorCode::BadInput);
  EXPECT_EQ(storeErrorOf([&] { store.createRun(12345, "x", "train", "{}", "cpu"); }).code(), ErrorCode::Store);
  EXPECT_EQ(storeErrorOf([&] { store.createRun(exp, "", "train", "{}", "cpu"); }).code(), ErrorCode::BadInput);
  Error missing = storeErrorOf([&] { store.run(777); });
  EXPECT_EQ(missing.code(), ErrorCode::Store);
  EXPECT_TRUE(contains(missing.message(), "run 777 not found")) << missing.message();
  EXPECT_TRUE(contains(missing.message(), store.path().string()));
}

TEST(RunStoreCrud, ListRunsFiltersByExperimentStatusAndTag) {
  RunStore store(freshDbPath("crud-list"));
  std::int64_t e1 = store.createExperiment("one");
  std::int64_t e2 = store.createExperiment("two");
  std::int64_t a = store.createRun(e1, "a", "train", "{}", "cpu");
  std::int64_t b = store.createRun(e1, "b", "train", "{}", "cpu");
  std::int64_t c = store.createRun(e2, "c", "train", "{}", "cpu");
  store.setStatus(b, RunStatus::Running);
  store.addTag(c, "baseline");
  EXPECT_EQ(store.listRuns().size(), 3u);
  RunFilter byExperiment;
  byExperiment.experimentId = e1;
  auto inE1 = store.listRuns(byExperiment);
  ASSERT_EQ(inE1.size(), 2u);
  EXPECT_EQ(inE1[0].id, a);
  EXPECT_EQ(inE1[1].id, b);
  RunFilter byStatus;
  byStatus.status = RunStatus::Running;
  auto running = store.listRuns(byStatus);
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].id, b);
  RunFilter both = byStatus;
  both.experimentId = e2;
  EXPECT_TRUE(store.listRuns(both).empty());
  RunFilter byTag;
  byTag.tag = "baseline";
  auto tagged = store.listRuns(byTag);
  ASSERT_EQ(tagged.size(), 1u);
  EXPECT_EQ(tagged[0].id, c);
}

TEST(RunStoreCrud, StatusTransitionsMaintainStartAndFinishTimes) {
  RunStore store(freshDbPath("crud-status"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");

  store.setStatus(id, RunStatus::Running);
  RunRecord running = store.run(id);
  EXPECT_EQ(running.status, RunStatus::Running);
  ASSERT_TRUE(running.startedAt);
  EXPECT_FALSE(running.finishedAt);

  store.setStatus(id, RunStatus::Crashed, "killed by signal 9");
  RunRecord crashed = store.run(id);
  EXPECT_EQ(crashed.status, RunStatus::Crashed);
  EXPECT_EQ(crashed.error, "killed by signal 9");
  ASSERT_TRUE(crashed.finishedAt);
  EXPECT_GE(*crashed.finishedAt, *crashed.startedAt);

  // Resuming keeps the first start time and clears the outcome.
  store.setStatus(id, RunStatus::Running);
  RunRecord resumed = store.run(id);
  EXPECT_EQ(resumed.startedAt, running.startedAt);
  EXPECT_FALSE(resumed.finishedAt);
  EXPECT_EQ(resumed.error, "");

  store.setStatus(id, RunStatus::Completed);
  EXPECT_EQ(store.run(id).status, RunStatus::Completed);
  EXPECT_TRUE(store.run(id).finishedAt);

  // The GUI noticing the child exit late must not turn a completed run into a crash.
  Error late = storeErrorOf([&] { store.setStatus(id, RunStatus::Crashed, "exit"); });
  EXPECT_EQ(late.code(), ErrorCode::Store);
  EXPECT_TRUE(contains(late.message(), "completed to crashed")) << late.message();
  EXPECT_EQ(store.run(id).status, RunStatus::Completed);

  // Requeueing clears the times.
  store.setStatus(id, RunStatus::Queued);
  RunRecord requeued = store.run(id);
  EXPECT_EQ(requeued.status, RunStatus::Queued);
  EXPECT_FALSE(requeued.startedAt);
  EXPECT_FALSE(requeued.finishedAt);

  EXPECT_EQ(storeErrorOf([&] { store.setStatus(id, RunStatus::Completed); }).code(), ErrorCode::Store);
  store.setStatus(id, RunStatus::Cancelled);  // cancelled before it started
  EXPECT_EQ(store.run(id).status, RunStatus::Cancelled);
  EXPECT_FALSE(store.run(id).startedAt);
  EXPECT_EQ(storeErrorOf([&] { store.setStatus(4242, RunStatus::Running); }).code(), ErrorCode::Store);
}

TEST(RunStoreCrud, SummaryPidAndHeartbeat) {
  RunStore store(freshDbPath("crud-summary"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  store.setSummary(id, R"({"final_loss":2.5})");
  EXPECT_EQ(store.run(id).summaryJson, R"({"final_loss":2.5})");
  EXPECT_EQ(storeErrorOf([&] { store.setSummary(id, "nope"); }).code(), ErrorCode::BadInput);
  EXPECT_EQ(storeErrorOf([&] { store.setSummary(999, "{}"); }).code(), ErrorCode::Store);

  store.setPid(id, 4321);
  RunRecord r = store.run(id);
  EXPECT_EQ(r.pid, 4321);
  ASSERT_TRUE(r.heartbeatAt);
  store.heartbeat(id);
  EXPECT_GE(*store.run(id).heartbeatAt, *r.heartbeatAt);
  store.setPid(id, std::nullopt);
  EXPECT_FALSE(store.run(id).pid);
  EXPECT_EQ(storeErrorOf([&] { store.heartbeat(999); }).code(), ErrorCode::Store);
}

TEST(RunStoreCrud, EventsAreListedInOrderAndIncrementally) {
  RunStore store(freshDbPath("crud-events"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  std::int64_t e1 = store.addEvent(id, "log", "started");
  std::int64_t e2 = store.addEvent(id, "checkpoint", "step 100", R"({"step":100})");
  auto all = store.listEvents(id);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, e1);
  EXPECT_EQ(all[0].kind, "log");
  EXPECT_EQ(all[0].message, "started");
  EXPECT_EQ(all[0].dataJson, "");
  EXPECT_EQ(all[1].dataJson, R"({"step":100})");
  EXPECT_GT(all[1].time, 1.6e9);
  auto newer = store.listEvents(id, e1);
  ASSERT_EQ(newer.size(), 1u);
  EXPECT_EQ(newer[0].id, e2);
  EXPECT_EQ(storeErrorOf([&] { store.addEvent(999, "log", "x"); }).code(), ErrorCode::Store);
  EXPECT_EQ(storeErrorOf([&] { store.addEvent(id, "log", "x", "{bad"); }).code(), ErrorCode::BadInput);
}

TEST(RunStoreCrud, ArtifactsAndTags) {
  RunStore store(freshDbPath("crud-artifacts"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  store.addArtifact(id, "checkpoint", "/runs/1/step-100", 100, 1 << 20);
  store.addArtifact(id, "export", "/runs/1/model.safetensors", std::nullopt, 42);
  auto arts = store.listArtifacts(id);
  ASSERT_EQ(arts.size(), 2u);
  EXPECT_EQ(arts[0].kind, "checkpoint");
  EXPECT_EQ(arts[0].step, 100);
  EXPECT_EQ(arts[0].bytes, 1 << 20);
  EXPECT_FALSE(arts[1].step);
  EXPECT_EQ(arts[1].path, "/runs/1/model.safetensors");

  store.addTag(id, "paper");
  store.addTag(id, "baseline");
  store.addTag(id, "paper");  // idempotent
  EXPECT_EQ(store.tags(id), (std::vector<std::string>{"baseline", "paper"}));
  store.removeTag(id, "paper");
  store.removeTag(id, "never-there");
  EXPECT_EQ(store.tags(id), (std::vector<std::string>{"baseline"}));
  EXPECT_EQ(storeErrorOf([&] { store.addTag(999, "x"); }).code(), ErrorCode::Store);
}

TEST(RunStoreCrud, DeletingARunOrExperimentCascades) {
  RunStore store(freshDbPath("crud-cascade"));
  std::int64_t exp = store.createExperiment("e");
  std::int64_t a = store.createRun(exp, "a", "train", "{}", "cpu");
  std::int64_t b = store.createRun(exp, "b", "train", "{}", "cpu");
  std::int64_t other = store.createRun(std::nullopt, "other", "train", "{}", "cpu");
  for (std::int64_t id : {a, b, other}) {
    store.addEvent(id, "log", "x");
    store.addArtifact(id, "checkpoint", "/c", 1, 1);
    store.addTag(id, "t");
    MetricWriter w = store.metricWriter(id);
    for (int s = 0; s < 10; ++s) w.add("loss", s, s, s, 1.0 / (s + 1));
  }
  EXPECT_TRUE(store.deleteRun(a));
  EXPECT_FALSE(store.deleteRun(a));
  EXPECT_EQ(store.metricCount(a), 0u);
  EXPECT_TRUE(store.listEvents(a).empty());
  EXPECT_TRUE(store.listArtifacts(a).empty());
  EXPECT_TRUE(store.tags(a).empty());
  EXPECT_EQ(store.metricCount(b), 10u);

  EXPECT_TRUE(store.deleteExperiment(exp));
  EXPECT_EQ(storeErrorOf([&] { store.run(b); }).code(), ErrorCode::Store);
  EXPECT_EQ(store.metricCount(b), 0u);
  EXPECT_TRUE(store.listEvents(b).empty());
  // The run outside the experiment is untouched.
  EXPECT_EQ(store.metricCount(other), 10u);
  EXPECT_EQ(store.listEvents(other).size(), 1u);
  EXPECT_EQ(store.tags(other), (std::vector<std::string>{"t"}));
  EXPECT_EQ(store.integrityCheck(), "ok");
}

// A partial result never replaces a complete one or a partial one of more
// items; a complete one replaces anything; the two metrics of one result
// are written together or not at all (a full database keeps neither).
TEST(RunStoreEvaluations, PartialsNeverShrinkAndBothMetricsCommitTogether) {
  const auto path = freshDbPath("evaluations");
  RunStore store(path);
  const auto id = store.createRun(std::nullopt, "eval", "eval", "{}", "cpu");
  auto row = [&](const std::string& metric, double value, std::int64_t items, bool partial) {
    EvaluationRecord e;
    e.runId = id;
    e.task = "arc";
    e.metric = metric;
    e.value = value;
    e.items = items;
    e.partial = partial;
    return e;
  };
  auto itemsOf = [&](const std::string& metric) {
    for (const auto& e : store.listEvaluations(id))
      if (e.metric == metric) return std::make_pair(e.items, e.partial);
    return std::make_pair(std::int64_t{-1}, false);
  };
  store.addEvaluations({row("acc", 0.5, 107, true), row("acc_norm", 0.6, 107, true)});
  store.addEvaluations(
      {row("acc", 0.4, 78, true), row("acc_norm", 0.4, 78, true)});  // a resumed job, fewer items so far
  EXPECT_EQ(itemsOf("acc"), std::make_pair(std::int64_t{107}, true));
  store.addEvaluations({row("acc", 0.45, 150, true), row("acc_norm", 0.5, 150, true)});
  EXPECT_EQ(itemsOf("acc"), std::make_pair(std::int64_t{150}, true));
  store.addEvaluations({row("acc", 0.47, 200, false), row("acc_norm", 0.52, 200, false)});
  store.addEvaluations(
      {row("acc", 0.1, 300, true), row("acc_norm", 0.1, 300, true)});  // partial after complete: kept out
  EXPECT_EQ(itemsOf("acc"), std::make_pair(std::int64_t{200}, false));
  store.addEvaluations({row("acc", 0.3, 50, false), row("acc_norm", 0.3, 50, false)});  // a new complete run replaces
  EXPECT_EQ(itemsOf("acc_norm"), std::make_pair(std::int64_t{50}, false));

  // A database that cannot grow: neither metric of the next result is written.
  SqliteDb& db = RunStoreAccess::db(store);
  const std::int64_t pages = db.queryInt("PRAGMA page_count", "test");
  db.queryInt(("PRAGMA max_page_count = " + std::to_string(pages)).c_str(), "test");
  std::vector<EvaluationRecord> many;
  for (int k = 0; k < 400; ++k) many.push_back(row("metric_" + std::to_string(k) + std::string(200, 'x'), k, 1, false));
  EXPECT_EQ(storeErrorOf([&] { store.addEvaluations(many); }).code(), ErrorCode::Store);
  db.queryInt("PRAGMA max_page_count = 1073741823", "test");
  EXPECT_EQ(store.listEvaluations(id).size(), 2u);
  EXPECT_EQ(store.integrityCheck(), "ok");
}

}  // namespace
}  // namespace latentlab
