// Metrics: the batched single writer, the downsampling series query, live
// incremental reads and the CSV export.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/file_util.h"
#include "latentlab/error.h"
#include "store/run_store_impl.h"

namespace latentlab {

namespace {

struct PendingRow {
  std::string name;
  std::int64_t step;
  std::int64_t tokens;
  double wallTime;
  double value;
};

MetricPoint readPoint(const Statement& st, int stepCol, int tokensCol, int wallCol, int valueCol) {
  return {st.columnInt(stepCol), st.columnInt(tokensCol), st.columnDouble(wallCol), st.columnDouble(valueCol)};
}

void appendNumber(std::string& out, double v) {
  if (std::isnan(v)) return;  // NULL: an empty field
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

void appendNumber(std::string& out, std::int64_t v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

void appendCsvField(std::string& out, const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) {
    out += text;
    return;
  }
  out += '"';
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

}  // namespace

struct MetricWriter::State {
  std::shared_ptr<RunStore::Impl> impl;
  MetricWriterOptions options;
  std::vector<PendingRow> pending;
  std::chrono::steady_clock::time_point oldest;
  std::optional<Statement> insert;
  // After a busy database: when add() tries again, and the back-off so far.
  std::chrono::steady_clock::time_point retryAt{};
  std::chrono::milliseconds backoff{0};
};

MetricWriter::MetricWriter(std::unique_ptr<State> state, std::int64_t runId)
    : m_state(std::move(state)), m_runId(runId) {}

MetricWriter::~MetricWriter() {
  if (!m_state || m_state->pending.empty()) return;
  try {
    flush();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "latentlab: run %lld: %zu metric rows lost: %s\n", static_cast<long long>(m_runId),
                 m_state->pending.size(), e.what());
  }
}

MetricWriter::MetricWriter(MetricWriter&& other) noexcept = default;

MetricWriter& MetricWriter::operator=(MetricWriter&& other) noexcept {
  if (this != &other) {
    MetricWriter old(std::move(*this));  // flushes what this writer held
    m_state = std::move(other.m_state);
    m_runId = other.m_runId;
    m_committedRows = other.m_committedRows;
    m_committedBatches = other.m_committedBatches;
  }
  return *this;
}

std::size_t MetricWriter::pendingRows() const {
  return m_state ? m_state->pending.size() : 0;
}

void MetricWriter::add(std::string_view name, std::int64_t step, std::int64_t tokens, double wallTime, double value) {
  if (!m_state) throw Error(ErrorCode::Internal, "MetricWriter: used after being moved from");
  if (name.empty()) throw Error(ErrorCode::BadInput, "metric name: must not be empty");
  if (step < 0) {
    throw Error(ErrorCode::BadInput, "metric " + std::string(name) + ": step " + std::to_string(step) + " is negative");
  }
  State& s = *m_state;
  auto now = std::chrono::steady_clock::now();
  if (s.pending.empty()) s.oldest = now;
  s.pending.push_back({std::string(name), step, tokens, wallTime, value});
  if (s.pending.size() < s.options.batchRows && now - s.oldest < s.options.maxDelay) return;
  if (now < s.retryAt) return;
  // Another connection holding the write lock must not stall training: try
  // without waiting, keep the rows on a busy database, retry with back-off
  // (250 ms doubling to 8 s). flush() waits the connection's full timeout.
  try {
    BusyTimeoutScope noWait(s.impl->db, 0);
    flush();
    s.backoff = std::chrono::milliseconds(0);
  } catch (const StoreBusy&) {
    s.backoff = std::min<std::chrono::milliseconds>(
        std::max<std::chrono::milliseconds>(s.backoff * 2, std::chrono::milliseconds(250)),
        std::chrono::milliseconds(8000));
    s.retryAt = now + s.backoff;
  }
}

void MetricWriter::flush() {
  if (!m_state || m_state->pending.empty()) return;
  State& s = *m_state;
  SqliteDb& db = s.impl->db;
  if (!s.insert) {
    s.insert.emplace(db,
                     "INSERT OR REPLACE INTO metrics(run_id, name, step, tokens, wall_time, value) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     "write metrics of run " + std::to_string(m_runId));
  }
  {
    // On any failure the transaction rolls back and the rows stay pending.
    Transaction tx(db, Transaction::Kind::Immediate);
    for (const PendingRow& r : s.pending) {
      s.insert->bind(1, m_runId).bind(2, std::string_view(r.name)).bind(3, r.step).bind(4, r.tokens);
      s.insert->bind(5, r.wallTime).bind(6, r.value).run();
    }
    tx.commit();
  }
  m_committedRows += s.pending.size();
  ++m_committedBatches;
  s.pending.clear();
}

MetricWriter RunStore::metricWriter(std::int64_t runId, MetricWriterOptions options) {
  m_impl->requireRun(runId);
  if (options.batchRows == 0) options.batchRows = 1;
  auto state = std::make_unique<MetricWriter::State>();
  state->impl = m_impl;
  state->options = options;
  state->pending.reserve(options.batchRows);
  return MetricWriter(std::move(state), runId);
}

std::vector<MetricPoint> RunStore::series(std::int64_t runId, std::string_view name, std::int64_t stepMin,
                                          std::int64_t stepMax, std::size_t maxPoints) const {
  if (maxPoints < 2) {
    throw Error(ErrorCode::BadInput, "series " + std::string(name) + ": maxPoints must be at least 2");
  }
  std::vector<MetricPoint> out;
  if (stepMin > stepMax) return out;
  SqliteDb& db = m_impl->db;
  Transaction snapshot(db, Transaction::Kind::Deferred);  // every query below sees the same rows

  // Small enough: the raw points, reading at most maxPoints + 1 rows.
  Statement raw(db,
                "SELECT step, tokens, wall_time, value FROM metrics "
                "WHERE run_id = ? AND name = ? AND step BETWEEN ? AND ? ORDER BY step LIMIT ?",
                "read series");
  raw.bind(1, runId).bind(2, name).bind(3, stepMin).bind(4, stepMax);
  raw.bind(5, static_cast<std::int64_t>(maxPoints) + 1);
  while (raw.step()) out.push_back(readPoint(raw, 0, 1, 2, 3));
  if (out.size() <= maxPoints) {
    snapshot.commit();
    return out;
  }
  const std::int64_t lo = out.front().step;
  out.clear();
  Statement last(db,
                 "SELECT step FROM metrics WHERE run_id = ? AND name = ? AND step BETWEEN ? AND ? "
                 "ORDER BY step DESC LIMIT 1",
                 "read series range");
  last.bind(1, runId).bind(2, name).bind(3, stepMin).bind(4, stepMax);
  const std::int64_t hi = last.step() ? last.columnInt(0) : lo;

  // One scan of the PK range in step order (no sort), tracking each bucket's
  // extremes; then a PK lookup per chosen point. Measured on 1M points: ~4x
  // faster than GROUP BY on a bucket expression (which sorts every row) and
  // ~25% faster than a min() and a max() query per bucket.
  const auto buckets = static_cast<std::int64_t>(maxPoints / 2);
  const std::int64_t width = (hi - lo) / buckets + 1;  // ceil((hi - lo + 1) / buckets)
  Statement scan(db,
                 "SELECT step, value FROM metrics WHERE run_id = ? AND name = ? AND step BETWEEN ? AND ? "
                 "ORDER BY step",
                 "read series");
  scan.bind(1, runId).bind(2, name).bind(3, lo).bind(4, hi);
  std::vector<std::int64_t> picked;
  picked.reserve(maxPoints);
  std::int64_t bucket = -1, minStep = 0, maxStep = 0;
  double minValue = 0, maxValue = 0;
  bool any = false;
  auto close = [&] {
    if (!any) return;
    picked.push_back(std::min(minStep, maxStep));
    if (minStep != maxStep) picked.push_back(std::max(minStep, maxStep));
  };
  while (scan.step()) {
    if (scan.isNull(1)) continue;
    const std::int64_t step = scan.columnInt(0);
    const double value = scan.columnDouble(1);
    const std::int64_t b = (step - lo) / width;
    if (b != bucket) {
      close();
      bucket = b;
      any = true;
      minStep = maxStep = step;
      minValue = maxValue = value;
    } else if (value < minValue) {
      minValue = value;
      minStep = step;
    } else if (value > maxValue) {
      maxValue = value;
      maxStep = step;
    }
  }
  close();
  Statement row(db, "SELECT step, tokens, wall_time, value FROM metrics WHERE run_id = ? AND name = ? AND step = ?",
                "read series point");
  out.reserve(picked.size());
  for (std::int64_t step : picked) {
    row.bind(1, runId).bind(2, name).bind(3, step);
    if (row.step()) out.push_back(readPoint(row, 0, 1, 2, 3));
    row.reset();
  }
  snapshot.commit();
  return out;
}

std::vector<MetricPoint> RunStore::rowsSince(std::int64_t runId, std::string_view name, std::int64_t afterStep) const {
  Statement st(m_impl->db,
               "SELECT step, tokens, wall_time, value FROM metrics WHERE run_id = ? AND name = ? AND step > ? "
               "ORDER BY step",
               "read new metric rows");
  st.bind(1, runId).bind(2, name).bind(3, afterStep);
  std::vector<MetricPoint> out;
  while (st.step()) out.push_back(readPoint(st, 0, 1, 2, 3));
  return out;
}

std::vector<std::string> RunStore::metricNames(std::int64_t runId) const {
  // A skip scan over the (run_id, name, step) key: one seek per name, not a
  // read of every row.
  Statement st(m_impl->db, "SELECT name FROM metrics WHERE run_id = ? AND name > ? ORDER BY name LIMIT 1",
               "list metric names");
  std::vector<std::string> out;
  std::string after;
  for (;;) {
    st.bind(1, runId).bind(2, std::string_view(after));
    if (!st.step()) break;
    after = st.columnText(0);
    st.reset();
    out.push_back(after);
  }
  return out;
}

std::optional<std::int64_t> RunStore::lastStep(std::int64_t runId, std::string_view name) const {
  Statement st(m_impl->db, "SELECT step FROM metrics WHERE run_id = ? AND name = ? ORDER BY step DESC LIMIT 1",
               "read last step");
  st.bind(1, runId).bind(2, name);
  if (!st.step()) return std::nullopt;
  return st.columnInt(0);
}

std::optional<std::int64_t> RunStore::lastStep(std::int64_t runId) const {
  std::optional<std::int64_t> best;
  for (const std::string& name : metricNames(runId)) {
    auto step = lastStep(runId, name);
    if (step && (!best || *step > *best)) best = step;
  }
  return best;
}

std::uint64_t RunStore::metricCount(std::int64_t runId) const {
  Statement st(m_impl->db, "SELECT count(*) FROM metrics WHERE run_id = ?", "count metrics");
  st.bind(1, runId);
  return st.step() ? static_cast<std::uint64_t>(st.columnInt(0)) : 0;
}

void RunStore::exportCsv(std::int64_t runId, const std::filesystem::path& csvPath) const {
  m_impl->requireRun(runId);
  Statement st(m_impl->db,
               "SELECT name, step, tokens, wall_time, value FROM metrics WHERE run_id = ? ORDER BY name, step",
               "export metrics");
  st.bind(1, runId);
  atomicWrite(csvPath, [&](int fd) {
    constexpr std::size_t kChunk = 1 << 20;
    std::string buf = "run_id,name,step,tokens,wall_time,value\n";
    buf.reserve(kChunk + 4096);
    while (st.step()) {
      appendNumber(buf, runId);
      buf += ',';
      appendCsvField(buf, st.columnText(0));
      buf += ',';
      appendNumber(buf, st.columnInt(1));
      buf += ',';
      appendNumber(buf, st.columnInt(2));
      buf += ',';
      appendNumber(buf, st.columnDouble(3));
      buf += ',';
      appendNumber(buf, st.columnDouble(4));
      buf += '\n';
      if (buf.size() >= kChunk) {
        writeAll(fd, buf.data(), buf.size(), csvPath);
        buf.clear();
      }
    }
    writeAll(fd, buf.data(), buf.size(), csvPath);
  });
}

}  // namespace latentlab
