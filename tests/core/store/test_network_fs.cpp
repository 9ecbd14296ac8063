// The store on a network file system: the file system is told by statfs's
// magic number, and a network one (NFS, Lustre, GPFS, CIFS, ...) gets the
// rollback journal instead of WAL, which needs shared memory on one host.
// The choice is driven here through LATENTLAB_STORE_JOURNAL (the machine
// running the tests has no NFS export): a store opened in rollback mode keeps
// no -wal file, switches a WAL file back, serves a reader process while a
// writer process commits batches (whole transactions at every read, never a
// busy failure), and survives a writer killed mid-write.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include "store/sqlite_db.h"
#include "store_test_util.h"

namespace latentlab {
namespace {
namespace fs = std::filesystem;
using namespace latentlab::test;

// Sets LATENTLAB_STORE_JOURNAL for one scope (forked children inherit it).
class JournalOverride {
 public:
  explicit JournalOverride(const char* value) { ::setenv("LATENTLAB_STORE_JOURNAL", value, 1); }
  ~JournalOverride() { ::unsetenv("LATENTLAB_STORE_JOURNAL"); }
  JournalOverride(const JournalOverride&) = delete;
  JournalOverride& operator=(const JournalOverride&) = delete;
};

// The journal_mode the file itself records, read on a connection of its own.
std::string fileJournal(const fs::path& path) {
  SqliteDb db(path, false, true);
  return db.queryText("PRAGMA journal_mode", "read the journal mode");
}

fs::path walFile(const fs::path& path) {
  return fs::path(path.string() + "-wal");
}

TEST(StoreNetworkFs, FilesystemsAreToldByTheirMagicNumber) {
  for (const auto& [magic, name] : std::vector<std::pair<std::uint64_t, std::string>>{{0x6969, "nfs"},
                                                                                      {0x0BD00BD0, "lustre"},
                                                                                      {0x47504653, "gpfs"},
                                                                                      {0xFF534D42, "cifs"},
                                                                                      {0xFE534D42, "smb2"},
                                                                                      {0x00C36400, "ceph"},
                                                                                      {0x19830326, "beegfs"}}) {
    const StoreFilesystem f = filesystemOfMagic(magic);
    EXPECT_EQ(f.name, name);
    EXPECT_TRUE(f.network) << name;
    EXPECT_EQ(chooseJournalMode(f), JournalMode::Rollback) << name;
  }
  for (const std::uint64_t local : {0xEF53ULL, 0x58465342ULL, 0x01021994ULL, 0x794C7630ULL, 0x12345678ULL}) {
    const StoreFilesystem f = filesystemOfMagic(local);
    EXPECT_FALSE(f.network) << f.name;
    EXPECT_EQ(chooseJournalMode(f), JournalMode::Wal) << f.name;
  }
  EXPECT_EQ(filesystemOfMagic(0x12345678).name, "local");
  // This machine's scratch folder is local: a store there is in WAL mode.
  const fs::path path = freshDbPath("fs-local");
  RunStore store(path);
  EXPECT_FALSE(detectFilesystem(path.parent_path()).network) << detectFilesystem(path.parent_path()).name;
  EXPECT_EQ(store.filesystem(), detectFilesystem(path.parent_path()).name);
  EXPECT_EQ(store.journal(), "wal");
  EXPECT_EQ(fileJournal(path), "wal");
}

TEST(StoreNetworkFs, RollbackModeKeepsNoWalAndSwitchesAWalFileBack) {
  const fs::path path = freshDbPath("fs-rollback");
  std::int64_t id = 0;
  {
    RunStore local(path);  // written on a local file system first: WAL
    id = local.createRun(std::nullopt, "r", "train", "{}", "cpu");
    EXPECT_EQ(local.journal(), "wal");
  }
  EXPECT_EQ(fileJournal(path), "wal");
  {
    JournalOverride rollback("rollback");
    RunStore store(path);
    EXPECT_EQ(store.journal(), "rollback");
    EXPECT_EQ(fileJournal(path), "delete");
    MetricWriter w = store.metricWriter(id, {10, std::chrono::hours(1)});
    for (int s = 0; s < 100; ++s) w.add("loss", s, s, 0.0, s);
    w.flush();
    EXPECT_FALSE(fs::exists(walFile(path))) << "no WAL file beside a rollback-journal store";
    EXPECT_EQ(store.rowsSince(id, "loss", -1).size(), 100U);
    EXPECT_EQ(RunStore(path, StoreOpen::ReadOnly).journal(), "rollback");
  }
  {
    JournalOverride bad("shared");
    const Error e = storeErrorOf([&] { RunStore s(path); });
    EXPECT_TRUE(contains(e.message(), "LATENTLAB_STORE_JOURNAL='shared'")) << e.message();
  }
}

// Child: writes `rows` rows of "loss" in batches of `batch`, then exits 0.
[[noreturn]] void writeRows(const fs::path& path, std::int64_t runId, int rows, int batch) {
  try {
    RunStore store(path);
    if (store.journal() != "rollback") ::_exit(4);
    MetricWriter w = store.metricWriter(runId, {static_cast<std::size_t>(batch), std::chrono::hours(1)});
    for (int s = 0; s < rows; ++s) w.add("loss", s, s, 0.0, static_cast<double>(s));
    w.flush();
    ::_exit(0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "writer: %s\n", e.what());
    ::_exit(2);
  }
}

TEST(StoreNetworkFs, AWriterProcessAndAReaderProcessShareARollbackJournalStore) {
  JournalOverride rollback("rollback");
  const fs::path path = freshDbPath("fs-two-processes");
  const std::int64_t id = RunStore(path).createRun(std::nullopt, "r", "train", "{}", "cpu");
  constexpr int kRows = 20000, kBatch = 100;
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) writeRows(path, id, kRows, kBatch);
  // This process reads as the workbench does, on its own connection.
  RunStore reader(path, StoreOpen::MustExist);
  EXPECT_EQ(reader.journal(), "rollback");
  std::size_t held = 0;
  int polls = 0;
  bool finished = false;
  int status = 0;
  while (!finished) {
    finished = ::waitpid(writer, &status, WNOHANG) == writer;
    // Whole transactions only: steps 0..n-1. (A batch the reader's lock kept
    // the writer from committing stays pending and goes with the next one.)
    const auto rows = reader.rowsSince(id, "loss", -1);  // throws on a busy failure
    for (std::size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i].step, static_cast<std::int64_t>(i));
    ASSERT_GE(rows.size(), held) << "rows went missing";
    held = rows.size();
    ++polls;
  }
  ASSERT_TRUE(WIFEXITED(status)) << "writer died";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(held, static_cast<std::size_t>(kRows));
  EXPECT_GT(polls, 2) << "the reader read while the writer wrote";
  EXPECT_FALSE(fs::exists(walFile(path)));

  // A writer killed mid-write leaves the file intact, what it committed a whole prefix.
  const std::int64_t second = reader.createRun(std::nullopt, "k", "train", "{}", "cpu");
  const pid_t killed = ::fork();
  ASSERT_GE(killed, 0);
  if (killed == 0) writeRows(path, second, 1 << 30, 64);
  while (reader.metricCount(second) < 64 * 20) ::usleep(2000);
  ASSERT_EQ(::kill(killed, SIGKILL), 0);
  ASSERT_EQ(::waitpid(killed, &status, 0), killed);
  RunStore after(path);
  EXPECT_EQ(after.integrityCheck(), "ok");
  const auto rows = after.rowsSince(second, "loss", -1);
  EXPECT_GE(rows.size(), 64U * 20);
  for (std::size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i].step, static_cast<std::int64_t>(i));
  EXPECT_EQ(after.rowsSince(id, "loss", -1).size(), static_cast<std::size_t>(kRows));
}

}  // namespace
}  // namespace latentlab
