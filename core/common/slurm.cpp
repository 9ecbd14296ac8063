// Cluster profiles, batch scripts and sbatch (see latentlab/slurm.h).
#include "latentlab/slurm.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "latentlab/error.h"
#include "latentlab/run_store.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A word for the shell, in single quotes.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A folder in sbatch's --output: '%' doubled (Slurm reads %j, %N, ... there).
std::string outputPattern(const fs::path& dir) {
  std::string out;
  for (const char c : (dir / "").string()) out += c == '%' ? std::string("%%") : std::string(1, c);
  return out;
}

}  // namespace

ClusterProfile readClusterProfile(const std::string& nameOrPath, const fs::path& workspace) {
  const bool isPath = nameOrPath.find('/') != std::string::npos || fs::path(nameOrPath).extension() == ".json";
  const fs::path file = isPath ? fs::path(nameOrPath) : workspace / "clusters" / (nameOrPath + ".json");
  std::ifstream in(file);
  if (!in) {
    throw Error(ErrorCode::BadInput, file.string() + ": no such cluster profile",
                "A profile is a JSON file in <workspace>/clusters/ (docs/distributed.md).");
  }
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& e) {
    throw Error(ErrorCode::BadInput, file.string() + ": not JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(ErrorCode::BadInput, file.string() + ": a cluster profile is one JSON object");
  ClusterProfile p;
  p.name = file.stem().string();
  const std::string source = file.string();
  auto bad = [&](const std::string& field, const std::string& problem) {
    throw Error(ErrorCode::BadInput, source + ": " + field + " " + problem);
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    auto text = [&](std::string& out) {
      if (!v.is_string()) bad(k, "must be a string");
      out = v.get<std::string>();
    };
    auto count = [&](int& out, int least) {
      if (!v.is_number_integer() || v.get<long long>() < least || v.get<long long>() > 1000000)
        bad(k, "must be a whole number of at least " + std::to_string(least));
      out = v.get<int>();
    };
    if (k == "partition")
      text(p.partition);
    else if (k == "account")
      text(p.account);
    else if (k == "nodes")
      count(p.nodes, 1);
    else if (k == "tasks_per_node")
      count(p.tasksPerNode, 1);
    else if (k == "gpus_per_node")
      count(p.gpusPerNode, 0);
    else if (k == "cpus_per_task")
      count(p.cpusPerTask, 1);
    else if (k == "time")
      text(p.time);
    else if (k == "device")
      text(p.device);
    else if (k == "prefix")
      text(p.prefix);
    else if (k == "port")
      count(p.port, 1);
    else if (k == "sbatch") {
      if (!v.is_array()) bad(k, "must be an array of options");
      for (const json& o : v) {
        if (!o.is_string() || o.get<std::string>().rfind("--", 0) != 0)
          bad(k, "must list options such as \"--exclusive\"");
        if (o.get<std::string>().find('\n') != std::string::npos) bad(k, "options cannot span lines");
        const std::string option = o.get<std::string>();
        if (option.rfind("--clusters", 0) == 0 || option.rfind("-M", 0) == 0)
          bad(k, "cannot name other clusters (--clusters): the workbench follows jobs on the cluster it submits to");
        p.sbatch.push_back(o.get<std::string>());
      }
    } else {
      bad(k,
          "is not a field of a cluster profile (partition, account, nodes, tasks_per_node, gpus_per_node, "
          "cpus_per_task, time, device, prefix, port, sbatch)");
    }
  }
  if (p.device != "cuda" && p.device != "cpu") bad("device", "must be cuda or cpu, got '" + p.device + "'");
  if (p.port > 65535) bad("port", "must be at most 65535");
  if (p.device == "cuda" && p.gpusPerNode > 0 && p.tasksPerNode > p.gpusPerNode)
    bad("tasks_per_node", "exceeds gpus_per_node: each rank takes one GPU");
  for (const std::string* s : {&p.partition, &p.account, &p.time}) {
    if (s->find_first_of("\n'\"") != std::string::npos) bad("partition, account or time", "has a quote or a newline");
  }
  return p;
}

std::vector<std::string> clusterProfileNames(const fs::path& workspace) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(workspace / "clusters", ec)) {
    if (entry.path().extension() == ".json" && entry.is_regular_file(ec)) names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

fs::path engineOnNodes(const ClusterProfile& profile, const fs::path& local) {
  return profile.prefix.empty() ? local : fs::path(profile.prefix) / "bin" / "latentlab-engine";
}

std::string slurmJobName(std::int64_t runId) {
  return "latentlab-" + std::to_string(runId);
}

std::string slurmBatchScript(const ClusterProfile& p, const fs::path& db, std::int64_t runId, const fs::path& engine,
                             const fs::path& logDir) {
  std::ostringstream s;
  s << "#!/usr/bin/env bash\n"
    << "# Run " << runId << " of " << db.string() << " on the cluster profile '" << p.name
    << "', written by latentlab-engine submit.\n"
    << "#SBATCH --job-name=" << slurmJobName(runId) << "\n"
    << "#SBATCH --nodes=" << p.nodes << "\n"
    << "#SBATCH --ntasks-per-node=" << p.tasksPerNode << "\n"
    << "#SBATCH --cpus-per-task=" << p.cpusPerTask << "\n";
  if (p.gpusPerNode > 0) s << "#SBATCH --gpus-per-node=" << p.gpusPerNode << "\n";
  if (!p.partition.empty()) s << "#SBATCH --partition=" << p.partition << "\n";
  if (!p.account.empty()) s << "#SBATCH --account=" << p.account << "\n";
  s << "#SBATCH --time=" << p.time << "\n"
    << "#SBATCH --output=\"" << outputPattern(logDir)
    << "slurm-%j.out\"\n"
    // A preempted or requeued job runs this script again: every rank resumes
    // the run from its last checkpoint.
    << "#SBATCH --requeue\n";
  for (const std::string& o : p.sbatch) s << "#SBATCH " << o << "\n";
  s << "set -euo pipefail\n\n"
    << "# Rendezvous: the first node of the allocation serves the c10d TCP store;\n"
    << "# srun gives each task SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID, which\n"
    << "# the engine reads as its rank, world size and local rank.\n"
    << "export MASTER_ADDR=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\"\n"
    << "export MASTER_PORT=" << p.port << "\n"
    << "export OMP_NUM_THREADS=\"${SLURM_CPUS_PER_TASK:-1}\"\n\n"
    << "srun --kill-on-bad-exit=1 " << quoted(engine.string()) << " run --db " << quoted(db.string()) << " --run "
    << runId << " --device " << p.device << " --quiet\n";
  return s.str();
}

fs::path writeBatchScript(const ClusterProfile& profile, const fs::path& db, std::int64_t runId, const fs::path& engine,
                          const fs::path& workspace) {
  const fs::path runDir = workspace / "runs" / std::to_string(runId);
  if (runDir.string().find_first_of("\"\n") != std::string::npos) {
    throw Error(ErrorCode::BadInput, workspace.string() +
                                         ": a workspace whose path holds a double quote or a newline cannot be "
                                         "named in a batch script; move it");
  }
  std::error_code ec;
  fs::create_directories(runDir, ec);
  const fs::path script = runDir / "slurm.sbatch";
  std::ofstream out(script);
  out << slurmBatchScript(profile, db, runId, engine, runDir);
  out.close();
  if (!out) throw Error(ErrorCode::Io, script.string() + ": cannot write the batch script");
  return script;
}

std::optional<std::int64_t> parseSbatchAnswer(const std::string& answer) {
  std::string out = answer;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  std::smatch m;
  if (!std::regex_match(out, m, std::regex(R"((\d{1,18})(;.*)?)"))) return std::nullopt;
  return std::stoll(m[1].str());
}

std::int64_t submitBatchScript(const fs::path& script) {
  const std::string command = "sbatch --parsable " + quoted(script.string()) + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw Error(ErrorCode::Io, "cannot run sbatch: " + std::string(std::strerror(errno)));
  std::string out;
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) out += buf.data();
  const int status = ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  const std::optional<std::int64_t> job = parseSbatchAnswer(out);
  if (status != 0 || !job) {
    throw Error(ErrorCode::BadInput,
                "sbatch refused " + script.string() + (out.empty() ? std::string(" (no output)") : ": " + out),
                WIFEXITED(status) && WEXITSTATUS(status) == 127
                    ? "sbatch is not on PATH: submit from a Slurm login node."
                    : "");
  }
  return *job;
}

void recordSlurmSubmission(RunStore& store, std::int64_t runId, std::int64_t job, const std::string& profile,
                           const fs::path& script) {
  store.addTag(runId, "cluster:" + profile);
  const json data = {{"job", job}, {"cluster", profile}, {"script", script.string()}};
  store.addEvent(runId, "slurm", "submitted to Slurm as job " + std::to_string(job), data.dump());
}

std::string runCluster(const RunStore& store, std::int64_t runId) {
  for (const std::string& tag : store.tags(runId)) {
    if (tag.rfind("cluster:", 0) == 0) return tag.substr(8);
  }
  return {};
}

std::optional<std::int64_t> lastSlurmJob(const RunStore& store, std::int64_t runId) {
  std::optional<std::int64_t> job;
  for (const EventRecord& e : store.listEvents(runId)) {
    if (e.kind != "slurm" || e.dataJson.empty()) continue;
    const json data = json::parse(e.dataJson, nullptr, false);
    if (data.is_object() && data.contains("job") && data["job"].is_number_integer())
      job = data["job"].get<std::int64_t>();
  }
  return job;
}

std::vector<SlurmJobState> parseSqueue(const std::string& out) {
  std::vector<SlurmJobState> jobs;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> fields;
    std::size_t from = 0;
    // The name last: a user's job name may hold any character.
    for (int k = 0; k < 4; ++k) {
      const std::size_t bar = line.find('|', from);
      if (bar == std::string::npos) break;
      fields.push_back(line.substr(from, bar - from));
      from = bar + 1;
    }
    if (fields.size() != 4) continue;
    fields.push_back(line.substr(from));
    // An array or heterogeneous job's id ("12_3", "12+0") is not one of ours.
    if (fields[0].empty() || fields[0].size() > 18 || fields[0].find_first_not_of("0123456789") != std::string::npos)
      continue;
    jobs.push_back({std::stoll(fields[0]), fields[1], fields[2], fields[3], fields[4]});
  }
  return jobs;
}

}  // namespace latentlab
