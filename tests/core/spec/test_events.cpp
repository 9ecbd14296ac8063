// The line protocol's one definition (latentlab/events.h): every kind written
// reads back field for field, and docs/line_protocol.md lists each kind with
// every field the engine writes for it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "latentlab/engine.h"
#include "latentlab/error.h"
#include "latentlab/events.h"

namespace latentlab {
namespace {

std::vector<EngineEvent> oneOfEachKind() {
  EngineEvent progress = EngineEvent::progressOf(12, 30, 1536);
  progress.loss = 5.25;
  progress.lr = 1e-3;
  progress.gradNorm = 1.5;
  progress.tokensPerSecond = 900.5;
  return {EngineEvent::hello(7, 4242),
          EngineEvent::statusOf(7, "failed", "data.corpus: missing"),
          progress,
          EngineEvent::evalOf(50, 6.5),
          EngineEvent::evalTaskOf(50, "arc_easy", 0.625, 0.5, 40),
          EngineEvent::checkpointOf(50, "/w/runs/7/checkpoints/step-50"),
          EngineEvent::logOf("info", "resumed at step 50")};
}

TEST(Events, EveryKindReadsBackAsWritten) {
  for (const EngineEvent& e : oneOfEachKind()) {
    const std::string line = eventLine(e);
    const EngineEvent back = parseEventLine(line);
    ASSERT_EQ(back.kind, e.kind) << line;
    EXPECT_EQ(eventLine(back), line);
  }
  EXPECT_EQ(parseEventLine(R"({"event":"future","x":1})").kind, EventKind::Unknown);
  EXPECT_EQ(parseEventLine("Segmentation fault").kind, EventKind::Malformed);
  EXPECT_EQ(parseEventLine("[1,2]").kind, EventKind::Malformed);
  EXPECT_THROW(eventLine(parseEventLine("[1,2]")), Error);
}

TEST(Events, TheDocumentedTableListsEveryKindAndField) {
  std::ifstream in(std::string(LATENTLAB_SOURCE_DIR) + "/docs/line_protocol.md");
  ASSERT_TRUE(in) << "docs/line_protocol.md";
  std::map<std::string, std::string> rows;  // kind -> its table row
  for (std::string row; std::getline(in, row);) {
    if (row.rfind("| `", 0) != 0) continue;
    const auto end = row.find('`', 3);
    const std::string kind = row.substr(3, end - 3);
    if (kind != "event") rows[kind] = row;  // not the header
  }
  std::set<std::string> written;
  for (const EngineEvent& e : oneOfEachKind()) {
    const nlohmann::json j = nlohmann::json::parse(eventLine(e));
    const std::string kind = j.at("event").get<std::string>();
    written.insert(kind);
    ASSERT_TRUE(rows.count(kind)) << "docs/line_protocol.md has no row for '" << kind << "'";
    for (const auto& [field, value] : j.items()) {
      if (field == "event") continue;
      EXPECT_NE(rows[kind].find("`" + field + "`"), std::string::npos)
          << "docs/line_protocol.md: the '" << kind << "' row does not name field '" << field << "'";
    }
  }
  for (const auto& [kind, row] : rows) {
    EXPECT_TRUE(written.count(kind)) << "docs/line_protocol.md lists '" << kind << "', which the engine never writes";
  }
}

// The devices list: what `devices --json` writes, the workbench reads back.
TEST(Events, TheDevicesListReadsBackAsWritten) {
  const std::vector<DeviceInfo> devices = {{"cpu", "host", 24ULL << 30, 19ULL << 30},
                                           {"cuda:0", "NVIDIA H100 80GB HBM3", 85ULL << 30, 84ULL << 30}};
  const std::vector<DeviceInfo> back = parseDevicesJson("launcher noise\n" + devicesJson(devices) + "\n");
  ASSERT_EQ(back.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].id, devices[i].id);
    EXPECT_EQ(back[i].name, devices[i].name);
    EXPECT_EQ(back[i].memoryBytes, devices[i].memoryBytes);
    EXPECT_EQ(back[i].freeBytes, devices[i].freeBytes);
  }
  EXPECT_TRUE(parseDevicesJson("Segmentation fault").empty());
  EXPECT_TRUE(parseDevicesJson(R"([{"name": "no id"}])").empty());
}

}  // namespace
}  // namespace latentlab
