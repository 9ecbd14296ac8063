// `latentlab-engine convert`: MHA/GQA -> MLA conversion of an HF folder, to
// the MHA2MLA layout or to DeepSeek-V3 attention.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "engine_cli.h"
#include "latentlab/convert.h"
#include "latentlab/error.h"

namespace latentlab::cli {

namespace {

// `convert`'s usage, printed for --help or without the required flags.
void printConvertUsage() {
  std::printf(
      "usage: latentlab-engine convert --model DIR (--dkv N | --kv-budget B) --out DIR [options]\n\n"
      "--target mha2mla (default): keeps RoPE on r frequency pairs per head (the strategy) and\n"
      "factorises the NoPE keys and the values into a latent of n_kv*d_kv dims.\n"
      "--target deepseek: DeepSeek-V3 attention (exportable with `export`): RoRoPE puts the\n"
      "positional part of all KV heads into one shared RoPE key of d_R dims, the rest of the keys\n"
      "and the values go into one latent of n_kv*d_kv dims with an RMSNorm; needs calibration.\n"
      "  --model DIR             original HF Llama-family folder\n"
      "  --out DIR               output folder (must not exist unless --force)\n"
      "  --target T              mha2mla (default) | deepseek\n"
      "  --rope S                mha2mla: high | low | uniform | 2-norm (default) | full\n"
      "  --r N                   RoPE frequency pairs kept per head (default d_h/16)\n"
      "  --rope-width N          deepseek: d_R of the shared RoPE key (default 2*r*n_kv)\n"
      "  --freq-fold N           deepseek: adjacent frequencies folded into one (default 1)\n"
      "  --dkv N                 latent dims per KV head\n"
      "  --kv-budget B           mha2mla, instead of --dkv: a KV budget spread over the layers, each\n"
      "                          layer's d_kv chosen from its spectrum: bytes per token (12288), a\n"
      "                          saving (75%%: a quarter of the original cache) or d_kv:K (the bytes\n"
      "                          of d_kv K everywhere); --check prints the per-layer d_kv\n"
      "  --svd M                 joint (default) | split (mha2mla)\n"
      "  --layers L              mha2mla: the layers to convert: all (default) | every:K | last:N |\n"
      "                          a comma list (0,2,5); the others keep their attention and cache\n"
      "  --factorise F           weights (mha2mla default) | activations (deepseek default)\n"
      "  --held-out FILE         text: report the loss of the original and the converted model on it\n"
      "  --calib-data FILE       calibration tokens (raw ids, or text with --calib-format text)\n"
      "  --calib-format F        u16 (default) | u32 | text (tokenized with DIR/tokenizer.json)\n"
      "  --calib-sequences N     calibration sequences (default 64; the paper: 1024)\n"
      "  --calib-seq-len N       tokens per sequence (default 512; the paper: 2048)\n"
      "  --score S               2-norm score: product (default, Q*K) | sum (Q+K)\n"
      "  --dtype T               saved dtype (default: the checkpoint's)\n"
      "  --device D              cpu (default) | cuda | cuda:N\n"
      "  --force                 replace an existing output folder\n"
      "  --check                 only validate and print the KV-cache budget\n"
      "  --json                  print the report as JSON\n");
}

// The conversion the flags ask for, with the defaults of the ones not given.
ConvertSpec convertSpecFromArgs(const Args& args) {
  ConvertSpec s;
  s.modelDir = *args.get("model");
  s.outDir = args.get("out", "");
  s.target = args.getChoice("target", ConversionTarget::Mha2Mla);
  if (args.get("factorise")) s.factorise = args.getChoice("factorise", Factorisation::Weights);
  s.ropeWidth = args.getInt("rope-width", 0, 0, INT_MAX);
  s.freqFold = args.getInt("freq-fold", 1, 1, INT_MAX);
  s.heldOutText = args.get("held-out", "");
  s.ropeStrategy = args.getChoice("rope", RopeStrategy::TwoNorm);
  s.ropePairs = args.getInt("r", 0, 0, INT_MAX);
  s.dKv = args.get("kv-budget") ? 0 : args.getInt("dkv", 0, 1, INT_MAX);
  s.svd = args.getChoice("svd", SvdMethod::Joint);
  s.layers = args.get("layers", "all");
  s.kvBudget = args.get("kv-budget", "");
  s.calibration.dataFile = args.get("calib-data", "");
  s.calibration.format = args.getChoice("calib-format", TokenFormat::U16);
  s.calibration.numSequences = args.getInt("calib-sequences", 64, 1, INT_MAX);
  s.calibration.seqLen = args.getInt("calib-seq-len", 512, 2, INT_MAX);
  s.twoNormScore = args.getChoice("score", TwoNormScore::Product);
  s.dtype = args.get("dtype", "");
  s.device = args.get("device", "cpu");
  s.force = args.flag("force");
  return s;
}

// `convert --check`: the KV-cache budget of the conversion, on one line.
void printKvBudget(const KvBudget& b) {
  std::printf("kv cache %lld elements/token (%lld per layer", static_cast<long long>(b.perToken),
              static_cast<long long>(b.perTokenPerLayer));
  if (b.nopeLayers > 0) {
    std::printf(" with RoPE, %lld in each of %d layers without", static_cast<long long>(b.nopePerTokenPerLayer),
                b.nopeLayers);
  }
  if (b.keyScalePerTokenPerLayer > 0) {
    std::printf(", %lld key-norm scales included", static_cast<long long>(b.keyScalePerTokenPerLayer));
  }
  if (b.originalLayers > 0) {
    std::printf("; %lld, the original K/V, in each of %d unconverted layers",
                static_cast<long long>(b.originalPerTokenPerLayer), b.originalLayers);
  }
  std::printf("), %lld -> %lld bytes/token in the saved dtype, saving %.2f%%\n",
              static_cast<long long>(b.originalBytesPerToken), static_cast<long long>(b.bytesPerToken),
              b.saving == 0.0 ? 0.0 : -100.0 * b.saving);
}

// A KV budget's allocation as JSON (`convert --check --kv-budget --json`, and the report's).
nlohmann::json allocationJson(const KvAllocation& a) {
  return {{"budget_bytes_per_token", a.limits.budgetBytes},
          {"bytes_per_token", a.bytesPerToken},
          {"uniform_d_kv", a.limits.uniformDKv},
          {"uniform_bytes_per_token", a.uniformBytesPerToken},
          {"min_bytes_per_token", a.limits.minBytes},
          {"max_bytes_per_token", a.limits.maxBytes},
          {"step_bytes", a.limits.stepBytes},
          {"d_kv_per_layer", a.layerDKv},
          {"kept", a.kept},
          {"uniform_kept", a.uniformKept},
          {"held_out_loss", a.heldOutLoss},
          {"uniform_held_out_loss", a.uniformHeldOutLoss}};
}

// The allocation as text: the budget, both caches, and one line per layer.
void printAllocationText(const KvAllocation& a) {
  std::printf("kv budget  %lld bytes/token: allocated %lld, uniform d_kv %d %lld (one step: %lld bytes)\n",
              static_cast<long long>(a.limits.budgetBytes), static_cast<long long>(a.bytesPerToken),
              a.limits.uniformDKv, static_cast<long long>(a.uniformBytesPerToken),
              static_cast<long long>(a.limits.stepBytes));
  std::printf("layer  d_kv  kept     uniform kept\n");
  for (std::size_t l = 0; l < a.layerDKv.size(); ++l) {
    if (a.layerDKv[l] == 0) {
      std::printf("%5zu     -  (original attention)\n", l);
      continue;
    }
    std::printf("%5zu  %4d  %6.2f%%  %6.2f%%\n", l, a.layerDKv[l], 100.0 * a.kept[l], 100.0 * a.uniformKept[l]);
  }
  if (a.heldOutLoss >= 0) {
    std::printf("held-out   loss right after conversion: allocated %.4f, uniform d_kv %d %.4f\n", a.heldOutLoss,
                a.limits.uniformDKv, a.uniformHeldOutLoss);
  }
}

// `convert --json`: the report as one JSON object.
void printReportJson(const ConvertReport& r) {
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& st : r.stages) stages[st.stage] = st.seconds;
  nlohmann::json j{{"out", r.outDir.string()},
                   {"target", choiceName(r.target)},
                   {"factorise", choiceName(r.factorise)},
                   {"rope_strategy", choiceName(r.mla.ropeStrategy)},
                   {"rope_pairs", r.mla.ropePairs},
                   {"d_kv", r.mla.dKv},
                   {"svd", choiceName(r.mla.svdMethod)},
                   {"d_c", r.latent.dC},
                   {"d_rope", r.latent.dRope},
                   {"rope_energy_kept", r.ropeEnergyKept},
                   {"balance", r.balance},
                   {"activation_error", r.activationError},
                   {"mean_activation_error", r.meanActivationError},
                   {"held_out_loss_before", r.heldOutLossBefore},
                   {"held_out_loss_after", r.heldOutLossAfter},
                   {"held_out_tokens", r.heldOutTokens},
                   {"pairs", r.pairsSummary},
                   {"reconstruction_error", r.reconstructionError},
                   {"mean_reconstruction_error", r.meanReconstructionError},
                   {"kv_elements_per_token_before", r.before.perToken},
                   {"kv_elements_per_token_after", r.after.perToken},
                   {"kv_saving", r.after.saving},
                   {"parameters_before", r.parametersBefore},
                   {"parameters_after", r.parametersAfter},
                   {"calibration_tokens", r.calibrationTokens},
                   {"stages", stages},
                   {"seconds", r.totalSeconds}};
  if (r.allocation) {
    j["kv_allocation"] = allocationJson(*r.allocation);
    j["held_out_loss_uniform"] = r.heldOutLossUniform;
  }
  std::cout << j.dump(2) << "\n";
}

// The report as text: what was written, the RoPE part, the latent and its errors, the figures and the time.
void printReportText(const ConvertReport& r) {
  std::printf("wrote %s\n", r.outDir.string().c_str());
  const std::string factorise(choiceName(r.factorise));
  if (r.target == ConversionTarget::DeepSeek) {
    double kept = 0.0;
    for (double e : r.ropeEnergyKept) kept += e / static_cast<double>(r.ropeEnergyKept.size());
    std::printf("rope       RoRoPE, %s; %.1f%% of the key energy in the RoPE key\n", r.pairsSummary.c_str(),
                100.0 * kept);
    std::printf("latent     kv_lora_rank %d (%s), error: weights %.4f", r.latent.dC, factorise.c_str(),
                r.meanReconstructionError);
  } else {
    std::printf("rope       %s, %s\n", std::string(choiceName(r.mla.ropeStrategy)).c_str(), r.pairsSummary.c_str());
    std::string dKv = "d_kv " + std::to_string(r.mla.dKv);
    if (r.allocation) {
      int least = r.mla.dKv;
      for (int d : r.allocation->layerDKv) least = d > 0 ? std::min(least, d) : least;
      dKv = "d_kv " + std::to_string(least) + " to " + std::to_string(r.mla.dKv);
    }
    std::printf("latent     %s per KV head (%s SVD of the %s), error: weights %.4f", dKv.c_str(),
                std::string(choiceName(r.mla.svdMethod)).c_str(), factorise.c_str(), r.meanReconstructionError);
  }
  if (r.meanActivationError >= 0) std::printf(", activations %.4f", r.meanActivationError);
  std::printf(" (mean relative)\n");
  if (r.heldOutLossAfter >= 0) {
    std::printf("held-out   loss %.4f -> %.4f over %lld tokens\n", r.heldOutLossBefore, r.heldOutLossAfter,
                static_cast<long long>(r.heldOutTokens));
  }
  if (r.allocation) {
    printAllocationText(*r.allocation);
    if (r.heldOutLossUniform >= 0) {
      std::printf("held-out   at the same budget, uniform d_kv %d: loss %.4f (allocated %.4f)\n",
                  r.allocation->limits.uniformDKv, r.heldOutLossUniform, r.heldOutLossAfter);
    }
  }
  std::printf("kv cache   %lld -> %lld elements/token (%+.2f%%)\n", static_cast<long long>(r.before.perToken),
              static_cast<long long>(r.after.perToken), 100.0 * r.after.saving);
  std::printf("parameters %lld -> %lld\n", static_cast<long long>(r.parametersBefore),
              static_cast<long long>(r.parametersAfter));
  std::printf("time       %.2f s (", r.totalSeconds);
  for (std::size_t i = 0; i < r.stages.size(); ++i)
    std::printf("%s%s %.2f s", i ? ", " : "", r.stages[i].stage.c_str(), r.stages[i].seconds);
  std::printf(")\n");
}

}  // namespace

void printAllocation(const KvAllocation& a, bool asJson) {
  if (asJson) {
    std::cout << allocationJson(a).dump(2) << "\n";
  } else {
    printAllocationText(a);
  }
}

int cmdConvert(int argc, char** argv) {
  Args args(argc, argv, 2, {"help", "force", "json", "quiet", "check"},
            {"model",           "out",           "rope",       "r",          "dkv",
             "kv-budget",       "svd",           "layers",     "calib-data", "calib-format",
             "calib-sequences", "calib-seq-len", "score",      "dtype",      "device",
             "target",          "factorise",     "rope-width", "freq-fold",  "held-out"});
  if (args.flag("help") || !args.get("model") || (!args.get("out") && !args.flag("check")) ||
      (!args.get("dkv") && !args.get("kv-budget"))) {
    printConvertUsage();
    return args.flag("help") ? 0 : 1;
  }
  const ConvertSpec s = convertSpecFromArgs(args);
  if (args.flag("check")) {
    if (!s.kvBudget.empty()) {  // the per-layer d_kv: the model's spectra decide it
      StderrProgress progress(true);
      const KvAllocation a = planKvBudget(s, progress, cancelToken());
      printAllocation(a, args.flag("json"));
      return 0;
    }
    printKvBudget(checkConvertSpec(s));
    return 0;
  }
  StderrProgress progress(args.flag("quiet"));
  ConvertReport r = convert(s, progress, cancelToken());
  if (args.flag("json")) {
    printReportJson(r);
    return 0;
  }
  printReportText(r);
  return 0;
}

}  // namespace latentlab::cli
