// latentlab-bench-ui: the run chart on a real store of 20 runs x 100k metric
// rows (offscreen). Times loading and drawing all 20 curves (a forced paint
// into an image), a zoom's window reads, and each live redraw: new rows for
// every run appended, the coalesced redraw run, and the chart painted.
#include <QApplication>
#include <QElapsedTimer>
#include <QImage>
#include <QPainter>
#include <QTemporaryDir>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "charts/chart_canvas.h"
#include "charts/chart_view.h"
#include "latentlab/run_store.h"

using namespace latentlab;
using namespace latentlab::ui;

namespace {

constexpr int kRuns = 20;
constexpr int kRows = 100000;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

void row(const char* name, double value, const char* unit, const QString& note = {}) {
  std::fprintf(stderr, "  %-12s %-44s %12.4g %-6s %s\n", "chart", name, value, unit, qPrintable(note));
}

// Paints the chart as it is now into an image (what the screen would get).
void paint(ChartView& chart, QImage& image) {
  image.fill(Qt::white);
  QPainter p(&image);
  chart.render(&p);
}

}  // namespace

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  QTemporaryDir dir;
  auto store = std::make_shared<RunStore>(dir.filePath(QStringLiteral("runs.db")).toStdString());

  QElapsedTimer t;
  t.start();
  QVector<ChartRun> runs;
  for (int r = 0; r < kRuns; ++r) {
    const std::string name = "run " + std::to_string(r + 1);
    const qint64 id = store->createRun(std::nullopt, name, "pretrain", "{}", "cpu");
    runs.push_back({id, QString::fromStdString(name)});
    MetricWriter w = store->metricWriter(id, {4096, std::chrono::milliseconds(10000)});
    const double offset = 0.02 * r;
    for (int s = 1; s <= kRows; ++s) {
      const double loss = 2.0 + offset + 6.0 / std::sqrt(s) + 0.05 * std::sin(s * 0.37 + r);
      w.add("train/loss", s, static_cast<std::int64_t>(s) * 4096, s * 0.01, loss);
      if (s % 1000 == 0) w.add("val/loss", s, static_cast<std::int64_t>(s) * 4096, s * 0.01, loss + 0.1);
    }
  }
  std::fprintf(stderr, "[chart] store: %d runs x %d train/loss rows (+%d val/loss each), written in %.1f s\n", kRuns,
               kRows, kRows / 1000, static_cast<double>(t.elapsed()) / 1000.0);

  ChartView chart(store);
  chart.resize(1400, 800);
  chart.show();
  QApplication::processEvents();
  QImage image(chart.size(), QImage::Format_ARGB32_Premultiplied);

  // Load and draw all 20 runs: downsampled reads, curves, smoothing, one paint.
  std::vector<double> load;
  for (int rep = 0; rep < 5; ++rep) {
    chart.setRuns({});
    QApplication::processEvents();
    QElapsedTimer l;
    l.start();
    chart.setRuns(runs);
    paint(chart, image);
    load.push_back(static_cast<double>(l.nsecsElapsed()) / 1e6);
  }
  const int loaded = chart.loadedRows(runs[0].id, QStringLiteral("train/loss"));
  row("load+draw 20 runs x 100k points", median(load), "ms",
      QStringLiteral("median of 5; %1 rows read per curve (min/max buckets), 40 curves").arg(loaded));

  // Of which: the store's downsampled reads alone (the same 40 queries).
  std::vector<double> reads;
  for (int rep = 0; rep < 5; ++rep) {
    QElapsedTimer q;
    q.start();
    std::size_t rows = 0;
    for (const ChartRun& r : runs) {
      rows += store->series(r.id, "train/loss", 0, kLastStep, ChartView::kMaxPoints).size();
      rows += store->series(r.id, "val/loss", 0, kLastStep, ChartView::kMaxPoints).size();
    }
    reads.push_back(static_cast<double>(q.nsecsElapsed()) / 1e6);
    if (rows == 0) return 1;
  }
  row("  of which store reads (40 series queries)", median(reads), "ms", QStringLiteral("median of 5"));

  // Zoom to 1% of the steps: 20 window reads (raw rows) and a paint.
  std::vector<double> zoom;
  for (int rep = 0; rep < 5; ++rep) {
    chart.resetView();
    const double x0 = 40000 + rep * 1000;
    QElapsedTimer z;
    z.start();
    chart.zoomToX(x0, x0 + 1000);
    paint(chart, image);
    zoom.push_back(static_cast<double>(z.nsecsElapsed()) / 1e6);
  }
  row("zoom to 1k steps: 20 window reads + draw", median(zoom), "ms",
      QStringLiteral("median of 5; %1 rows per curve after the read")
          .arg(chart.loadedRows(runs[0].id, QStringLiteral("train/loss"))));
  chart.resetView();

  // Live: new rows arrive, then one redraw and one paint. First one run live
  // beside 19 saved ones (the engine runs one CPU job at a time), then all 20.
  // The last pass repeats one live run with y fitted to all values (ignore
  // outliers off): curves then sit in a band, as before y followed the data,
  // and the paint rasterises less of each noisy curve.
  std::int64_t step = kRows;
  for (const int live : {1, kRuns, -1}) {
    if (live < 0) chart.setIgnoreOutliers(false);
    const int liveRuns = live < 0 ? 1 : live;
    std::vector<double> redraw, redrawPaint;
    for (int rep = 0; rep < 100; ++rep) {
      for (int r = 0; r < liveRuns; ++r) {
        std::vector<MetricPoint> pts;
        for (int k = 1; k <= 10; ++k) {
          const std::int64_t s = step + k;
          pts.push_back({s, s * 4096, static_cast<double>(s) * 0.01, 2.0 + 6.0 / std::sqrt(static_cast<double>(s))});
        }
        chart.appendPoints(runs[r].id, QStringLiteral("train/loss"), pts);
      }
      step += 10;
      QElapsedTimer d;
      d.start();
      chart.redrawNow();
      const double drawn = static_cast<double>(d.nsecsElapsed()) / 1e6;
      paint(chart, image);
      redraw.push_back(drawn);
      redrawPaint.push_back(static_cast<double>(d.nsecsElapsed()) / 1e6);
    }
    const QByteArray what = live == 1  ? "1 live run of 20"
                            : live < 0 ? "1 live run of 20, y over all values"
                                       : "all 20 runs live";
    row(qPrintable(QStringLiteral("live redraw, %1 (10 rows each)").arg(QString::fromLatin1(what))), median(redraw),
        "ms", QStringLiteral("median of 100; p95 %1 ms").arg(percentile(redraw, 0.95), 0, 'f', 2));
    row(qPrintable(QStringLiteral("live redraw + paint, %1").arg(QString::fromLatin1(what))), median(redrawPaint), "ms",
        QStringLiteral("median of 100; p95 %1 ms").arg(percentile(redrawPaint, 0.95), 0, 'f', 2));
  }
  return 0;
}
