// RunSpec parsing/validation and the learning-rate schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "latentlab/error.h"
#include "latentlab/run_spec.h"
#include "latentlab/run_store.h"
#include "latentlab/slurm.h"
#include "test_support.h"

namespace latentlab::test {

namespace {
std::string errorOf(const std::string& json) {
  try {
    parseRunSpec(json, "spec.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadSpec);
    return e.message();
  }
  return "";
}
}  // namespace

TEST(RunSpec, RoundTripsThroughJson) {
  RunSpec s;
  s.kind = RunKind::ConvertFinetune;
  s.modelDir = "/models/base";
  s.conversion.enabled = true;
  s.conversion.dKv = 8;
  s.conversion.ropeStrategy = RopeStrategy::Uniform;
  s.optimizer.lr = 3e-4;
  s.schedule.kind = ScheduleKind::Cosine;
  s.steps = 77;
  RunSpec t = parseRunSpec(runSpecToJson(s), "x");
  EXPECT_EQ(runSpecToJson(t), runSpecToJson(s));
  EXPECT_EQ(t.conversion.dKv, 8);
  EXPECT_EQ(t.steps, 77);
}

TEST(RunSpec, BadSpecsNameTheField) {
  EXPECT_NE(errorOf(R"({"kind":"pretrain"})").find("architecture"), std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"pretrain","architecture":"demo-gqa","steps":0})").find("steps"), std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"pretrain","architecture":"demo-gqa","stepz":10})").find("stepz"), std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"pretrain","architecture":"demo-gqa","optimizer":{"lr":-1}})").find("optimizer.lr"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"pretrain","architecture":"demo-gqa","data":{"seq_len":"long"}})").find("seq_len"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"finetune"})").find("model_dir"), std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"train"})").find("kind"), std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"convert-finetune","model_dir":"m","conversion":{"rope_strategy":"middle"}})")
                .find("conversion.rope_strategy"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"pretrain","architecture":"a","schedule":{"warmup_steps":500},"steps":100})")
                .find("warmup_steps"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"version":99})").find("version"), std::string::npos);
  EXPECT_NE(errorOf("{not json").find("invalid JSON"), std::string::npos);
}

// "distill": round trip, defaults, and each bad value named.
TEST(RunSpec, DistillBlockRoundTripsAndBadValuesNameTheField) {
  const RunSpec d = parseRunSpec(R"({"kind":"convert-finetune","model_dir":"m","distill":{}})", "x");
  EXPECT_TRUE(d.distill.enabled);
  EXPECT_TRUE(d.distill.original());
  EXPECT_EQ(d.distill.alpha, 0.5);
  EXPECT_EQ(d.distill.temperature, 1.0);
  RunSpec s = parseRunSpec(
      R"({"kind":"finetune","model_dir":"m","distill":{"teacher":"/models/big","alpha":0.25,"temperature":2}})", "x");
  EXPECT_EQ(s.distill.teacher, "/models/big");
  EXPECT_EQ(s.distill.alpha, 0.25);
  EXPECT_EQ(s.distill.temperature, 2.0);
  EXPECT_EQ(runSpecToJson(parseRunSpec(runSpecToJson(s), "x")), runSpecToJson(s));
  // Off: a fine-tune's spec says so (a config diff against a distilled run shows it); a pre-training's has no block.
  const RunSpec off = parseRunSpec(R"({"kind":"finetune","model_dir":"m"})", "x");
  EXPECT_FALSE(off.distill.enabled);
  EXPECT_NE(runSpecToJson(off).find(R"("distill": {
    "enabled": false
  })"),
            std::string::npos)
      << runSpecToJson(off);
  EXPECT_FALSE(parseRunSpec(runSpecToJson(off), "x").distill.enabled);
  EXPECT_FALSE(parseRunSpec(R"({"kind":"finetune","model_dir":"m","distill":{"enabled":false,"alpha":7}})", "x")
                   .distill.enabled);  // off: its values are not checked
  EXPECT_EQ(runSpecToJson(parseRunSpec(R"({"kind":"pretrain","architecture":"demo-gqa"})", "x")).find("distill"),
            std::string::npos);

  const std::string base = R"({"kind":"convert-finetune","model_dir":"m","distill":)";
  EXPECT_NE(errorOf(base + R"({"alpha":1.5}})").find("distill.alpha"), std::string::npos);
  EXPECT_NE(errorOf(base + R"({"temperature":0}})").find("distill.temperature"), std::string::npos);
  EXPECT_NE(errorOf(base + R"({"teacher":""}})").find("distill.teacher"), std::string::npos);
  EXPECT_NE(errorOf(base + R"({"beta":1}})").find("beta"), std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"finetune","model_dir":"m","distill":{}})").find("needs kind convert-finetune"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"pretrain","architecture":"demo-gqa","distill":{"teacher":"t"}})")
                .find("applies to kinds finetune and convert-finetune"),
            std::string::npos);
}

// "kv_quant" (kind eval): round trip, the stored task names it gives, and each bad value named.
TEST(RunSpec, KvQuantBlockOfAnEvaluation) {
  const std::string eval = R"({"kind":"eval","model_dir":"m","passkey":{"file":"h.txt"},"kv_quant":)";
  const RunSpec s = parseRunSpec(eval + R"({"format":"int4"}})", "x");
  ASSERT_EQ(s.kvCaches.size(), 1u);
  EXPECT_EQ(s.kvCaches[0].bits, 4);
  EXPECT_EQ(s.kvCaches[0].group, 64);
  EXPECT_EQ(s.kvCaches[0].residual, 128);
  EXPECT_EQ(runSpecToJson(parseRunSpec(runSpecToJson(s), "x")), runSpecToJson(s));
  EXPECT_EQ(kvQuantTaskName("passkey", s.kvCaches[0]), "passkey (int4 cache)");
  const RunSpec g = parseRunSpec(eval + R"({"format":"int2","group":32,"residual":0}})", "x");
  EXPECT_EQ(kvQuantTaskName("arc", g.kvCaches[0]), "arc (int2 cache, group 32, window 0)");
  EXPECT_EQ(kvQuantTaskName("arc", {}), "arc");
  for (const KvQuantSettings& q : {s.kvCaches[0], g.kvCaches[0], KvQuantSettings{}}) {
    const auto [task, back] = splitKvQuantTaskName(kvQuantTaskName("arc (easy)", q));
    EXPECT_EQ(task, "arc (easy)");
    EXPECT_EQ(kvQuantTaskName(task, back), kvQuantTaskName("arc (easy)", q));
  }
  EXPECT_EQ(splitKvQuantTaskName("arc (int5 cache)").first, "arc (int5 cache)");
  EXPECT_EQ(runSpecToJson(parseRunSpec(eval + R"({"format":"none"}})", "x")).find("kv_quant"), std::string::npos);
  EXPECT_NE(errorOf(eval + R"({"format":"int3"}})").find("kv_quant.format"), std::string::npos);
  EXPECT_NE(errorOf(eval + R"({"format":"int8","group":0}})").find("kv_quant.group"), std::string::npos);
  EXPECT_NE(errorOf(eval + R"({"format":"int8","residual":-1}})").find("kv_quant.residual"), std::string::npos);
  EXPECT_NE(errorOf(eval + R"({"bits":8}})").find("bits"), std::string::npos);
  // Several caches in turn: "none" is the plain cache; each scored once.
  const RunSpec list = parseRunSpec(eval + R"([{"format":"none"},{"format":"int8"},{"format":"int4"}]})", "x");
  ASSERT_EQ(list.kvCaches.size(), 3u);
  EXPECT_FALSE(list.kvCaches[0].on());
  EXPECT_EQ(list.kvCaches[2].bits, 4);
  EXPECT_EQ(runSpecToJson(parseRunSpec(runSpecToJson(list), "x")), runSpecToJson(list));
  EXPECT_EQ(evalCaches(list).size(), 3u);
  EXPECT_EQ(evalCaches(parseRunSpec(eval + R"({"format":"none"}})", "x")).size(), 1u);
  EXPECT_NE(
      errorOf(eval + R"([{"format":"int8"},{"format":"int8","group":64}]})").find("kv_quant[1] repeats kv_quant[0]"),
      std::string::npos);
  EXPECT_NE(errorOf(eval + R"([{"format":"int8"},{"format":"int4","group":0}]})").find("kv_quant[1].group"),
            std::string::npos);
  EXPECT_NE(errorOf(eval + R"([{"format":"int8"},{"format":"int9"}]})").find("kv_quant[1].format"), std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"finetune","model_dir":"m","kv_quant":{"format":"int8"}})")
                .find("kv_quant applies to kind eval only"),
            std::string::npos)
      << errorOf(R"({"kind":"finetune","model_dir":"m","kv_quant":{"format":"int8"}})");
}

// "held_out" (kind eval): the loss over a text or the data's validation tail;
// "evaluates" without model_dir evaluates that run's checkpoint.
TEST(RunSpec, HeldOutAndEvaluatesARunsNewestCheckpoint) {
  const RunSpec s = parseRunSpec(R"({"kind":"eval","evaluates":{"run":3},"held_out":{"text":"validation"}})", "x");
  EXPECT_TRUE(s.modelDir.empty());
  EXPECT_EQ(s.evaluatesRun, 3);
  EXPECT_EQ(s.evaluatesStep, -1);
  EXPECT_EQ(s.heldOut.text, "validation");
  EXPECT_EQ(s.heldOut.seqLen, 512);
  EXPECT_EQ(runSpecToJson(parseRunSpec(runSpecToJson(s), "x")), runSpecToJson(s));
  EXPECT_EQ(runSpecToJson(s).find("\"step\""), std::string::npos);
  const RunSpec at =
      parseRunSpec(R"({"kind":"eval","evaluates":{"run":3,"step":40},"held_out":{"text":"t.txt"}})", "x");
  EXPECT_EQ(at.evaluatesStep, 40);
  EXPECT_EQ(parseRunSpec(runSpecToJson(at), "x").evaluatesStep, 40);
  const std::string eval = R"({"kind":"eval","model_dir":"m","held_out":)";
  EXPECT_NE(errorOf(eval + R"({"text":"t.txt","seq_len":0}})").find("held_out.seq_len"), std::string::npos);
  EXPECT_NE(errorOf(eval + R"({"text":"t.txt","batch":0}})").find("held_out.batch"), std::string::npos);
  EXPECT_NE(errorOf(eval + R"({"text":"t.txt","chunk":0}})").find("held_out.chunk"), std::string::npos);
  EXPECT_NE(errorOf(eval + R"({"text":"t.txt","stride":4}})").find("stride"), std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"eval","model_dir":"m","data":{"validation_share":0},"held_out":{"text":"validation"}})")
                .find("no validation tail"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"eval","held_out":{"text":"t.txt"}})").find("model_dir is required"), std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"finetune","model_dir":"m","held_out":{"text":"t.txt"}})")
                .find("held_out applies to kind eval only"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"kind":"eval","model_dir":"m"})").find("passkey or held_out is required"), std::string::npos);
}

// precision replaces dtype; specs stored with dtype read as the same policy
// (bf16 was autocast: bf16-mixed), and a contradiction is refused.
TEST(RunSpec, PrecisionAndTheOlderDtypeField) {
  const std::string base = R"({"kind":"pretrain","architecture":"demo-gqa",)";
  EXPECT_EQ(parseRunSpec(base + R"("precision":"bf16"})", "x").precision, parseChoice<Precision>("bf16", "expected"));
  EXPECT_EQ(parseRunSpec(base + R"("dtype":"bf16"})", "x").precision, parseChoice<Precision>("bf16-mixed", "expected"));
  EXPECT_EQ(parseRunSpec(base + R"("dtype":"f32"})", "x").precision, parseChoice<Precision>("fp32", "expected"));
  EXPECT_EQ(parseRunSpec(base + R"("dtype":"f64"})", "x").precision, parseChoice<Precision>("fp64", "expected"));
  EXPECT_EQ(parseRunSpec(base + R"("dtype":"auto","precision":"auto"})", "x").precision,
            parseChoice<Precision>("auto", "expected"));
  EXPECT_NE(errorOf(base + R"("precision":"fp16"})").find("precision"), std::string::npos);
  EXPECT_NE(errorOf(base + R"("dtype":"half"})").find("dtype"), std::string::npos);
  EXPECT_NE(errorOf(base + R"("dtype":"bf16","precision":"bf16"})").find("contradicts"), std::string::npos);
  EXPECT_EQ(runSpecToJson(parseRunSpec(base + R"("dtype":"bf16"})", "x")).find("dtype"), std::string::npos);
}

TEST(Schedule, WsdMatchesTheOneMinusSqrtFormula) {
  OptimizerSpec o;
  o.lr = 1e-3;
  ScheduleSpec s;
  s.kind = ScheduleKind::Wsd;
  s.warmupSteps = 10;
  s.decaySteps = 40;
  s.minLrRatio = 0.1;
  const int total = 100;
  EXPECT_DOUBLE_EQ(learningRateAt(o, s, 0, total), 1e-4);  // warmup: (t+1)/warmup
  EXPECT_DOUBLE_EQ(learningRateAt(o, s, 9, total), 1e-3);
  EXPECT_DOUBLE_EQ(learningRateAt(o, s, 30, total), 1e-3);  // stable
  EXPECT_DOUBLE_EQ(learningRateAt(o, s, 59, total), 1e-3);
  const double lrMin = 1e-4;
  for (int t : {60, 70, 85, 99}) {
    const double want = lrMin + (1e-3 - lrMin) * (1.0 - std::sqrt((t - 60) / 40.0));
    EXPECT_NEAR(learningRateAt(o, s, t, total), want, 1e-15) << t;
  }
}

TEST(Schedule, CosineReachesItsFloor) {
  OptimizerSpec o;
  o.lr = 2e-3;
  ScheduleSpec s;
  s.kind = ScheduleKind::Cosine;
  s.warmupSteps = 0;
  s.minLrRatio = 0.1;
  EXPECT_DOUBLE_EQ(learningRateAt(o, s, 0, 100), 2e-3);
  EXPECT_NEAR(learningRateAt(o, s, 50, 100), 2e-4 + 0.5 * 1.8e-3, 1e-15);
  EXPECT_NEAR(learningRateAt(o, s, 100, 100), 2e-4, 1e-15);
  s.kind = ScheduleKind::Constant;
  EXPECT_DOUBLE_EQ(learningRateAt(o, s, 77, 100), 2e-3);
}

// A cluster profile (<workspace>/clusters/NAME.json): its fields reach the
// batch script; a bad one is refused naming the file and the field.
TEST(ClusterProfile, FieldsReachTheScriptAndBadOnesNameTheFileAndField) {
  const std::filesystem::path ws = scratchDir("cluster-profile");
  std::filesystem::create_directories(ws / "clusters");
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(ws / "clusters" / (name + ".json")) << text;
  };
  write("gpu8", R"({"partition": "gpu", "account": "mla", "nodes": 2, "tasks_per_node": 8, "gpus_per_node": 8,
                    "cpus_per_task": 12, "time": "12:00:00", "prefix": "/sw/latentlab", "port": 29600,
                    "sbatch": ["--exclusive"]})");
  const ClusterProfile p = readClusterProfile("gpu8", ws);
  EXPECT_EQ(p.nodes, 2);
  EXPECT_EQ(p.device, "cuda");
  const std::string script = slurmBatchScript(p, "/ws/runs.db", 7, "/sw/latentlab/bin/latentlab-engine", "/ws/runs/7");
  for (const char* line : {"#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=8\n", "#SBATCH --gpus-per-node=8\n",
                           "#SBATCH --cpus-per-task=12\n", "#SBATCH --partition=gpu\n", "#SBATCH --account=mla\n",
                           "#SBATCH --time=12:00:00\n", "#SBATCH --output=\"/ws/runs/7/slurm-%j.out\"\n",
                           "#SBATCH --requeue\n", "#SBATCH --exclusive\n", "export MASTER_PORT=29600\n",
                           "srun --kill-on-bad-exit=1 '/sw/latentlab/bin/latentlab-engine' run --db '/ws/runs.db' "
                           "--run 7 --device cuda --quiet\n"})
    EXPECT_NE(script.find(line), std::string::npos) << line << " missing from:\n" << script;
  const auto errorOfProfile = [&](const std::string& text) {
    write("bad", text);
    try {
      readClusterProfile("bad", ws);
    } catch (const Error& e) {
      return e.message();
    }
    return std::string("no error");
  };
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"nodes": 0})", "nodes"},
           {R"({"tasks_per_node": "8"})", "tasks_per_node"},
           {R"({"device": "tpu"})", "device"},
           {R"({"gpus_per_node": 4, "tasks_per_node": 8})", "tasks_per_node exceeds gpus_per_node"},
           {R"({"sbatch": ["exclusive"]})", "sbatch"},
           {R"({"sbatch": ["--clusters=other"]})", "cannot name other clusters"},
           {R"({"queue": "gpu"})", "queue is not a field"},
           {R"({"port": 70000})", "port"},
           {R"([1, 2])", "one JSON object"},
           {R"({"nodes": )", "not JSON"}}) {
    const std::string message = errorOfProfile(text);
    EXPECT_NE(message.find("bad.json"), std::string::npos) << message;
    EXPECT_NE(message.find(field), std::string::npos) << text << " -> " << message;
  }
  EXPECT_NE(errorOfProfile("{}").find("no error"), std::string::npos);  // every field has a default
  try {
    readClusterProfile("absent", ws);
    FAIL() << "a missing profile was read";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("absent.json: no such cluster profile"), std::string::npos) << e.message();
  }
}

// What the workbench reads back from Slurm and the store to follow a run:
// sbatch's and squeue's answers, the profiles on offer, the run's placement.
TEST(ClusterProfile, SubmissionsAndSlurmAnswersAsTheWorkbenchReadsThem) {
  EXPECT_EQ(parseSbatchAnswer("42\n"), std::optional<std::int64_t>(42));
  EXPECT_EQ(parseSbatchAnswer("42;cluster-a"), std::optional<std::int64_t>(42));
  EXPECT_EQ(parseSbatchAnswer("sbatch: error: Batch job submission failed: Invalid partition name specified"),
            std::nullopt);
  EXPECT_EQ(parseSbatchAnswer(""), std::nullopt);
  const std::vector<SlurmJobState> jobs = parseSqueue(
      "17|RUNNING|node[01-02]|None|latentlab-3\n"
      "18|PENDING||Priority|a|job|named|with|bars\n"
      "19_3|RUNNING|node03|None|array\n"  // an array task: not a job of ours
      "garbage\n"
      "20|COMPLETING|node01|None|latentlab-5");
  ASSERT_EQ(jobs.size(), 3U);
  EXPECT_EQ(jobs[0].job, 17);
  EXPECT_EQ(jobs[0].state, "RUNNING");
  EXPECT_EQ(jobs[0].nodes, "node[01-02]");
  EXPECT_EQ(jobs[1].nodes, "");
  EXPECT_EQ(jobs[1].reason, "Priority");
  EXPECT_EQ(jobs[0].name, slurmJobName(3));
  EXPECT_EQ(jobs[1].name, "a|job|named|with|bars");
  EXPECT_EQ(jobs[2].job, 20);
  EXPECT_EQ(jobs[2].state, "COMPLETING");

  const std::filesystem::path ws = scratchDir("cluster-submission");
  EXPECT_TRUE(clusterProfileNames(ws).empty());  // no clusters/ folder
  std::filesystem::create_directories(ws / "clusters");
  for (const char* name : {"b.json", "a.json", "notes.txt"}) std::ofstream(ws / "clusters" / name) << "{}";
  EXPECT_EQ(clusterProfileNames(ws), (std::vector<std::string>{"a", "b"}));
  ClusterProfile profile = readClusterProfile("a", ws);
  EXPECT_EQ(engineOnNodes(profile, "/here/latentlab-engine"), "/here/latentlab-engine");
  profile.prefix = "/sw/latentlab";
  EXPECT_EQ(engineOnNodes(profile, "/here/latentlab-engine"), "/sw/latentlab/bin/latentlab-engine");

  RunStore store(ws / "runs.db", StoreOpen::CreateIfMissing);
  const std::int64_t run = store.createRun(std::nullopt, "r", "pretrain", "{}", "cpu");
  EXPECT_EQ(runCluster(store, run), "");
  EXPECT_EQ(lastSlurmJob(store, run), std::nullopt);
  const std::filesystem::path script = writeBatchScript(profile, ws / "runs.db", run, "/e", ws);
  EXPECT_EQ(script, ws / "runs" / std::to_string(run) / "slurm.sbatch");
  std::ifstream in(script);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--run " + std::to_string(run) + " "), std::string::npos) << text;
  EXPECT_NE(text.find("#SBATCH --job-name=" + slurmJobName(run) + "\n"), std::string::npos) << text;
  // sbatch reads %j, %N, ... in --output: a '%' of the folder is doubled.
  const std::filesystem::path odd = scratchDir("cluster 100% odd");
  const std::filesystem::path oddScript = writeBatchScript(profile, odd / "runs.db", 1, "/e", odd);
  std::ifstream oddIn(oddScript);
  const std::string oddText((std::istreambuf_iterator<char>(oddIn)), std::istreambuf_iterator<char>());
  std::string folder = (odd / "runs" / "1").string();
  folder.replace(folder.find('%'), 1, "%%");
  EXPECT_NE(oddText.find("#SBATCH --output=\"" + folder + "/slurm-%j.out\"\n"), std::string::npos)
      << "expected the '%' doubled in:\n"
      << oddText;
  recordSlurmSubmission(store, run, 41, "a", script);
  recordSlurmSubmission(store, run, 57, "a", script);  // resubmitted: the newest job counts
  EXPECT_EQ(runCluster(store, run), "a");
  EXPECT_EQ(lastSlurmJob(store, run), std::optional<std::int64_t>(57));
}

}  // namespace latentlab::test
