// readDistEnv: torchrun's and Slurm's variables, precedence, opting out, and
// errors that name the variable at fault.
#include <gtest/gtest.h>

#include <map>

#include "latentlab/distributed.h"
#include "latentlab/error.h"
#include "latentlab/run_spec.h"

namespace latentlab::test {
namespace {

EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string errorOf(const std::map<std::string, std::string>& vars) {
  try {
    readDistEnv(envOf(vars));
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST(DistEnv, NoLauncherMeansOneProcess) {
  DistEnv d = readDistEnv(envOf({}));
  EXPECT_EQ(d.worldSize, 1);
  EXPECT_EQ(d.rank, 0);
  EXPECT_FALSE(d.distributed());
  EXPECT_TRUE(d.writesMetrics());
  EXPECT_EQ(d.launcher, "single");
}

TEST(DistEnv, ReadsTorchrunVariables) {
  DistEnv d = readDistEnv(envOf({{"RANK", "5"},
                                 {"WORLD_SIZE", "8"},
                                 {"LOCAL_RANK", "1"},
                                 {"LOCAL_WORLD_SIZE", "4"},
                                 {"MASTER_ADDR", "node07"},
                                 {"MASTER_PORT", "29411"}}));
  EXPECT_EQ(d.launcher, "torchrun");
  EXPECT_EQ(d.rank, 5);
  EXPECT_EQ(d.worldSize, 8);
  EXPECT_EQ(d.localRank, 1);
  EXPECT_EQ(d.localWorldSize, 4);
  EXPECT_EQ(d.masterAddr, "node07");
  EXPECT_EQ(d.masterPort, 29411);
  EXPECT_FALSE(d.writesMetrics());
}

TEST(DistEnv, MapsSlurmVariables) {
  DistEnv d = readDistEnv(envOf({{"SLURM_PROCID", "3"},
                                 {"SLURM_NTASKS", "4"},
                                 {"SLURM_LOCALID", "1"},
                                 {"SLURM_NTASKS_PER_NODE", "2(x2)"},
                                 {"MASTER_ADDR", "10.1.2.3"}}));
  EXPECT_EQ(d.launcher, "slurm");
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.worldSize, 4);
  EXPECT_EQ(d.localRank, 1);
  EXPECT_EQ(d.localWorldSize, 2);
  EXPECT_EQ(d.masterPort, 29500);  // torchrun's default when MASTER_PORT is unset
}

TEST(DistEnv, TorchrunWinsOverSlurmAndOffWinsOverBoth) {
  auto vars = std::map<std::string, std::string>{
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}};
  EXPECT_EQ(readDistEnv(envOf(vars)).launcher, "torchrun");
  EXPECT_EQ(readDistEnv(envOf(vars)).worldSize, 2);
  vars["LATENTLAB_DIST"] = "off";
  EXPECT_FALSE(readDistEnv(envOf(vars)).distributed());
}

TEST(DistEnv, OneSlurmTaskNeedsNoMaster) {
  DistEnv d = readDistEnv(envOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}));
  EXPECT_FALSE(d.distributed());
}

TEST(DistEnv, ErrorsNameTheVariable) {
  EXPECT_NE(errorOf({{"RANK", "0"}}).find("WORLD_SIZE"), std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("RANK='2'"), std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("RANK='x'"), std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("MASTER_ADDR"), std::string::npos);
  EXPECT_NE(
      errorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT"),
      std::string::npos);
  EXPECT_NE(errorOf({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}).find("MASTER_ADDR"), std::string::npos);
  EXPECT_NE(errorOf({{"LATENTLAB_DIST_TIMEOUT", "-3"}}).find("LATENTLAB_DIST_TIMEOUT"), std::string::npos);
}

TEST(DistEnv, ASpecMayListOneDevicePerRank) {
  RunSpec spec;
  spec.architecture = "demo-gqa";
  for (const char* ok : {"cpu", "cuda", "cuda:3", "cuda:0,cuda:1", "cpu,cpu"}) {
    spec.device = ok;
    EXPECT_NO_THROW(validateRunSpec(spec, "spec.json")) << ok;
  }
  for (const char* badDevice : {"gpu", "cuda:0,", "cpu,,cpu", "cuda:0;cuda:1"}) {
    spec.device = badDevice;
    try {
      validateRunSpec(spec, "spec.json");
      ADD_FAILURE() << badDevice << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("device"), std::string::npos) << e.message();
    }
  }
}

}  // namespace latentlab::test
