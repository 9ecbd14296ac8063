// Metrics: batched commits and flush, idempotent rewrites, the downsampled
// series against a brute-force min/max per bucket, raw small series,
// rowsSince, names and last steps, NaN values, CSV export, and a full disk.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <thread>

#include "store/run_store_impl.h"
#include "store_test_util.h"

namespace latentlab {
namespace {
namespace fs = std::filesystem;
using namespace latentlab::test;

MetricWriterOptions sizeOnly(std::size_t rows) {
  return {rows, std::chrono::hours(1)};
}

TEST(MetricStore, WriterCommitsFullBatchesAndFlushesTheRest) {
  fs::path path = freshDbPath("metrics-batches");
  RunStore store(path);
  RunStore reader(path);
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  {
    MetricWriter w = store.metricWriter(id, sizeOnly(10));
    for (int s = 0; s < 25; ++s) w.add("loss", s, s * 100, s * 0.5, 10.0 - s);
    EXPECT_EQ(w.committedBatches(), 2u);
    EXPECT_EQ(w.committedRows(), 20u);
    EXPECT_EQ(w.pendingRows(), 5u);
    EXPECT_EQ(reader.metricCount(id), 20u);  // another connection sees only committed batches
    w.flush();
    EXPECT_EQ(w.pendingRows(), 0u);
    EXPECT_EQ(reader.metricCount(id), 25u);
    w.add("loss", 25, 2500, 12.5, -15.0);
    EXPECT_EQ(reader.metricCount(id), 25u);
  }  // the destructor flushes
  EXPECT_EQ(reader.metricCount(id), 26u);
  auto rows = reader.rowsSince(id, "loss", 23);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].step, 24);
  EXPECT_EQ(rows[0].tokens, 2400);
  EXPECT_DOUBLE_EQ(rows[0].wallTime, 12.0);
  EXPECT_DOUBLE_EQ(rows[0].value, -14.0);
  EXPECT_EQ(rows[1].step, 25);
}

TEST(MetricStore, WriterCommitsWhenTheOldestPendingRowIsTooOld) {
  fs::path path = freshDbPath("metrics-delay");
  RunStore store(path);
  RunStore reader(path);
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  MetricWriter w = store.metricWriter(id, {1000, std::chrono::milliseconds(50)});
  w.add("loss", 0, 0, 0, 1);
  EXPECT_EQ(reader.metricCount(id), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  w.add("loss", 1, 0, 0, 1);
  EXPECT_EQ(w.committedBatches(), 1u);
  EXPECT_EQ(reader.metricCount(id), 2u);
}

TEST(MetricStore, RewritingStepsIsIdempotent) {
  RunStore store(freshDbPath("metrics-replace"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  {
    MetricWriter w = store.metricWriter(id);
    for (int s = 0; s < 10; ++s) w.add("loss", s, s, s, 1.0);
  }
  {  // a resumed run rewrites steps 5..9 from its checkpoint
    MetricWriter w = store.metricWriter(id);
    for (int s = 5; s < 15; ++s) w.add("loss", s, s, s, 2.0);
  }
  auto rows = store.rowsSince(id, "loss", -1);
  ASSERT_EQ(rows.size(), 15u);
  for (const auto& p : rows) EXPECT_DOUBLE_EQ(p.value, p.step < 5 ? 1.0 : 2.0) << p.step;
}

TEST(MetricStore, WriterRejectsBadRowsAndMissingRuns) {
  RunStore store(freshDbPath("metrics-bad"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  EXPECT_EQ(storeErrorOf([&] { store.metricWriter(999); }).code(), ErrorCode::Store);
  MetricWriter w = store.metricWriter(id);
  EXPECT_EQ(storeErrorOf([&] { w.add("", 0, 0, 0, 0); }).code(), ErrorCode::BadInput);
  EXPECT_EQ(storeErrorOf([&] { w.add("loss", -1, 0, 0, 0); }).code(), ErrorCode::BadInput);
  EXPECT_EQ(w.pendingRows(), 0u);
}

TEST(MetricStore, NamesLastStepsAndNaN) {
  RunStore store(freshDbPath("metrics-names"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  std::int64_t other = store.createRun(std::nullopt, "o", "train", "{}", "cpu");
  EXPECT_TRUE(store.metricNames(id).empty());
  EXPECT_FALSE(store.lastStep(id));
  {
    MetricWriter w = store.metricWriter(id);
    for (int s = 0; s <= 100; ++s) w.add("train/loss", s, 0, 0, 1);
    for (int s = 0; s <= 120; s += 40) w.add("eval/loss", s, 0, 0, 1);
    w.add("lr", 7, 0, 0, 1e-3);
    w.add("grad_norm", 3, 0, 0, std::numeric_limits<double>::quiet_NaN());
    MetricWriter o = store.metricWriter(other);
    o.add("zzz", 5000, 0, 0, 1);
  }
  EXPECT_EQ(store.metricNames(id), (std::vector<std::string>{"eval/loss", "grad_norm", "lr", "train/loss"}));
  EXPECT_EQ(store.lastStep(id), 120);
  EXPECT_EQ(store.lastStep(id, "train/loss"), 100);
  EXPECT_FALSE(store.lastStep(id, "missing"));
  auto g = store.rowsSince(id, "grad_norm", -1);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_TRUE(std::isnan(g[0].value));
}

// Brute force of the documented bucketing: B = maxPoints / 2 buckets of width
// ceil((hi - lo + 1) / B) over the steps present; min and max point of each.
std::vector<MetricPoint> bruteForceSeries(const std::vector<MetricPoint>& all, std::int64_t stepMin,
                                          std::int64_t stepMax, std::size_t maxPoints) {
  std::vector<MetricPoint> in;
  for (const auto& p : all) {
    if (p.step >= stepMin && p.step <= stepMax) in.push_back(p);
  }
  if (in.size() <= maxPoints) return in;
  std::int64_t lo = in.front().step, hi = in.back().step;
  auto buckets = static_cast<std::int64_t>(maxPoints / 2);
  std::int64_t width = (hi - lo + buckets) / buckets;
  std::vector<MetricPoint> out;
  for (std::int64_t k = 0; lo + k * width <= hi; ++k) {
    const MetricPoint* mn = nullptr;
    const MetricPoint* mx = nullptr;
    for (const auto& p : in) {
      if ((p.step - lo) / width != k) continue;
      if (!mn || p.value < mn->value) mn = &p;
      if (!mx || p.value > mx->value) mx = &p;
    }
    if (!mn) continue;
    if (mx->step < mn->step) std::swap(mn, mx);
    out.push_back(*mn);
    if (mx->step != mn->step) out.push_back(*mx);
  }
  return out;
}

TEST(MetricStore, DownsampledSeriesIsExactlyTheMinAndMaxOfEachBucket) {
  RunStore store(freshDbPath("metrics-series"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  // 10,000 candidate steps with holes; values a permutation, so every min/max is unique.
  std::vector<std::int64_t> steps;
  for (std::int64_t s = 0; s < 10000; ++s) {
    if (s % 7 != 3 && !(s >= 4000 && s < 4600)) steps.push_back(s);
  }
  std::vector<double> values(steps.size());
  std::iota(values.begin(), values.end(), 0.0);
  std::shuffle(values.begin(), values.end(), std::mt19937_64(7));
  std::vector<MetricPoint> all;
  {
    MetricWriter w = store.metricWriter(id);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      MetricPoint p{steps[i], steps[i] * 4096, steps[i] * 0.25, values[i]};
      all.push_back(p);
      w.add("loss", p.step, p.tokens, p.wallTime, p.value);
      w.add("other", p.step, 0, 0, -p.value);  // a neighbour series must not leak in
    }
  }
  struct Case {
    std::int64_t lo, hi;
    std::size_t maxPoints;
    bool dense;  // no long hole in the range: most buckets are full
  };
  for (Case c : {Case{0, std::numeric_limits<std::int64_t>::max(), 200, true}, Case{1234, 8765, 64, true},
                 Case{0, 9999, 101, true}, Case{3990, 4700, 30, false}, Case{0, 9999, 2, true}}) {
    auto got = store.series(id, "loss", c.lo, c.hi, c.maxPoints);
    auto want = bruteForceSeries(all, c.lo, c.hi, c.maxPoints);
    SCOPED_TRACE("range " + std::to_string(c.lo) + ".." + std::to_string(c.hi) + " max " + std::to_string(c.maxPoints));
    EXPECT_LE(got.size(), c.maxPoints);
    if (c.dense) {
      EXPECT_GT(got.size(), c.maxPoints / 2);
    }
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].step, want[i].step) << i;
      EXPECT_EQ(got[i].tokens, want[i].tokens) << i;
      EXPECT_DOUBLE_EQ(got[i].wallTime, want[i].wallTime) << i;
      EXPECT_DOUBLE_EQ(got[i].value, want[i].value) << i;
    }
    EXPECT_TRUE(std::is_sorted(got.begin(), got.end(), [](auto& a, auto& b) { return a.step < b.step; }));
  }
  // The global extremes always survive downsampling.
  auto coarse = store.series(id, "loss", 0, 9999, 20);
  auto [mn, mx] = std::minmax_element(coarse.begin(), coarse.end(), [](auto& a, auto& b) { return a.value < b.value; });
  EXPECT_DOUBLE_EQ(mn->value, 0.0);
  EXPECT_DOUBLE_EQ(mx->value, static_cast<double>(steps.size() - 1));
}

TEST(MetricStore, SmallSeriesAndRangesAreReturnedRaw) {
  RunStore store(freshDbPath("metrics-raw"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  {
    MetricWriter w = store.metricWriter(id);
    for (int s = 0; s < 500; ++s) w.add("loss", s * 10, s, s, std::sin(s * 0.1));
    w.add("nan", 1, 0, 0, std::numeric_limits<double>::quiet_NaN());
  }
  auto all = store.series(id, "loss", 0, 1 << 30, 500);
  ASSERT_EQ(all.size(), 500u);
  for (int s = 0; s < 500; ++s) {
    EXPECT_EQ(all[s].step, s * 10);
    EXPECT_DOUBLE_EQ(all[s].value, std::sin(s * 0.1));
  }
  auto window = store.series(id, "loss", 1000, 1990, 2000);  // 100 points in the zoomed range
  ASSERT_EQ(window.size(), 100u);
  EXPECT_EQ(window.front().step, 1000);
  EXPECT_EQ(window.back().step, 1990);
  EXPECT_TRUE(store.series(id, "missing").empty());
  EXPECT_TRUE(store.series(id, "loss", 10, 5).empty());
  EXPECT_EQ(storeErrorOf([&] { store.series(id, "loss", 0, 10, 1); }).code(), ErrorCode::BadInput);
  // A bucket holding only NaN has no extremes; a raw read keeps the NaN.
  ASSERT_EQ(store.series(id, "nan").size(), 1u);
  EXPECT_TRUE(std::isnan(store.series(id, "nan")[0].value));
}

TEST(MetricStore, RowsSinceReturnsOnlyNewerRowsInOrder) {
  RunStore store(freshDbPath("metrics-since"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  MetricWriter w = store.metricWriter(id, sizeOnly(1000));
  for (int s = 0; s < 50; ++s) w.add("loss", s, 0, 0, s);
  w.flush();
  std::int64_t seen = -1;
  auto first = store.rowsSince(id, "loss", seen);
  ASSERT_EQ(first.size(), 50u);
  seen = first.back().step;
  EXPECT_TRUE(store.rowsSince(id, "loss", seen).empty());
  for (int s = 50; s < 60; ++s) w.add("loss", s, 0, 0, s);
  w.flush();
  auto next = store.rowsSince(id, "loss", seen);
  ASSERT_EQ(next.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(next[i].step, 50 + i);
  EXPECT_TRUE(store.rowsSince(id, "lr", -1).empty());
}

TEST(MetricStore, CsvExportHasEveryMetricInNameAndStepOrder) {
  RunStore store(freshDbPath("metrics-csv"));
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  std::int64_t other = store.createRun(std::nullopt, "o", "train", "{}", "cpu");
  {
    MetricWriter w = store.metricWriter(id);
    w.add("train/loss", 2, 2048, 1.5, 3.25);
    w.add("train/loss", 1, 1024, 0.75, 4.0);
    w.add("eval,ppl", 1, 1024, 0.8, 0.1);
    w.add("lr", 1, 1024, 0.75, std::numeric_limits<double>::quiet_NaN());
    MetricWriter o = store.metricWriter(other);
    o.add("train/loss", 1, 1, 1, 1);
  }
  fs::path csv = scratchDir("metrics-csv-out") / "sub" / "run.csv";
  fs::create_directories(csv.parent_path());
  store.exportCsv(id, csv);
  std::string expected = "run_id,name,step,tokens,wall_time,value\n" + std::to_string(id) +
                         ",\"eval,ppl\",1,1024,0.8,0.1\n" + std::to_string(id) + ",lr,1,1024,0.75,\n" +
                         std::to_string(id) + ",train/loss,1,1024,0.75,4\n" + std::to_string(id) +
                         ",train/loss,2,2048,1.5,3.25\n";
  std::ifstream in(csv, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, expected);
  // Nothing but the file itself is left in the folder (the write was atomic).
  EXPECT_EQ(std::distance(fs::directory_iterator(csv.parent_path()), fs::directory_iterator()), 1);
  EXPECT_EQ(storeErrorOf([&] { store.exportCsv(id, scratchDir("csv-missing") / "no" / "such" / "x.csv"); }).code(),
            ErrorCode::Io);
}

TEST(MetricStore, AFullDatabaseRollsBackAndKeepsCommittedRows) {
  fs::path path = freshDbPath("metrics-full");
  RunStore store(path);
  std::int64_t id = store.createRun(std::nullopt, "r", "train", "{}", "cpu");
  MetricWriter w = store.metricWriter(id, sizeOnly(100000));
  for (int s = 0; s < 100; ++s) w.add("loss", s, s, s, s);
  w.flush();
  // Cap the file at its current size: the next big batch hits SQLITE_FULL.
  SqliteDb& db = RunStoreAccess::db(store);
  std::int64_t pages = db.queryInt("PRAGMA page_count", "test");
  db.queryInt(("PRAGMA max_page_count = " + std::to_string(pages + 2)).c_str(), "test");
  for (int s = 100; s < 20100; ++s) w.add("loss", s, s, s, s);
  Error e = storeErrorOf([&] { w.flush(); });
  EXPECT_EQ(e.code(), ErrorCode::Store);
  EXPECT_TRUE(contains(e.message(), path.string())) << e.message();
  EXPECT_TRUE(contains(e.message(), "full")) << e.message();
  EXPECT_TRUE(contains(e.hint(), "rolled back")) << e.hint();
  EXPECT_EQ(w.pendingRows(), 20000u);  // kept for a retry
  EXPECT_EQ(store.metricCount(id), 100u);
  EXPECT_EQ(store.integrityCheck(), "ok");
  // Another write fails cleanly too, and once space is back the retry commits everything.
  EXPECT_EQ(storeErrorOf([&] {
              for (int i = 0; i < 2000; ++i) store.addEvent(id, "log", std::string(500, 'x'));
            }).code(),
            ErrorCode::Store);
  db.queryInt("PRAGMA max_page_count = 1073741823", "test");
  w.flush();
  EXPECT_EQ(store.metricCount(id), 20100u);
  EXPECT_EQ(store.run(id).status, RunStatus::Queued);
  EXPECT_EQ(store.integrityCheck(), "ok");
}

}  // namespace
}  // namespace latentlab
