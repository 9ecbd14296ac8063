// `latentlab-engine convert`: MHA/GQA -> MLA conversion of an HF folder.
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

int cmdConvert(int argc, char** argv) {
  Args args(argc, argv, 2, {"help", "force", "json", "quiet", "check"},
            {"model", "out", "rope", "r", "dkv", "svd", "calib-data", "calib-format", "calib-sequences",
             "calib-seq-len", "score", "dtype", "device"});
  if (args.flag("help") || !args.get("model") || (!args.get("out") && !args.flag("check")) || !args.get("dkv")) {
    std::printf(
        "usage: latentlab-engine convert --model DIR --dkv N --out DIR [options]\n\n"
        "MHA2MLA / GQA2MLA: keeps RoPE on r frequency pairs per head (the strategy), factorises the\n"
        "NoPE keys and the values into a latent of n_kv*d_kv dims by SVD of the weights, and writes\n"
        "the converted model (safetensors + config.json with the latentlab_mla block).\n"
        "  --model DIR             original HF Llama-family folder\n"
        "  --out DIR               output folder (must not exist unless --force)\n"
        "  --rope S                high | low | uniform | 2-norm (default) | full\n"
        "  --r N                   RoPE frequency pairs kept per head (default d_h/16)\n"
        "  --dkv N                 latent dims per KV head\n"
        "  --svd M                 joint (default) | split\n"
        "  --calib-data FILE       calibration tokens for 2-norm (raw ids, or text with --calib-format text)\n"
        "  --calib-format F        u16 (default) | u32 | text (tokenized with DIR/tokenizer.json)\n"
        "  --calib-sequences N     calibration sequences (default 64; the paper: 1024)\n"
        "  --calib-seq-len N       tokens per sequence (default 512; the paper: 2048)\n"
        "  --score S               2-norm score: product (default, Q*K) | sum (Q+K)\n"
        "  --dtype T               saved dtype (default: the checkpoint's)\n"
        "  --device D              cpu (default) | cuda | cuda:N\n"
        "  --force                 replace an existing output folder\n"
        "  --check                 only validate and print the KV-cache budget\n"
        "  --json                  print the report as JSON\n");
    return args.flag("help") ? 0 : 1;
  }
  ConvertSpec s;
  s.modelDir = *args.get("model");
  s.outDir = args.get("out", "");
  s.ropeStrategy = args.get("rope", "2-norm");
  s.ropePairs = args.getInt("r", 0, 0, INT_MAX);
  s.dKv = args.getInt("dkv", 0, 1, INT_MAX);
  s.svd = args.get("svd", "joint");
  s.calibration.dataFile = args.get("calib-data", "");
  s.calibration.format = args.get("calib-format", "u16");
  s.calibration.numSequences = args.getInt("calib-sequences", 64, 1, INT_MAX);
  s.calibration.seqLen = args.getInt("calib-seq-len", 512, 2, INT_MAX);
  s.twoNormScore = args.get("score", "product");
  s.dtype = args.get("dtype", "");
  s.device = args.get("device", "cpu");
  s.force = args.flag("force");
  if (args.flag("check")) {
    KvBudget b = checkConvertSpec(s);
    std::printf("kv cache %lld elements/token (%lld per layer), saving %+.2f%%\n", static_cast<long long>(b.perToken),
                static_cast<long long>(b.perTokenPerLayer), 100.0 * b.saving);
    return 0;
  }
  StderrProgress progress(args.flag("quiet"));
  ConvertReport r = convert(s, progress, cancelToken());
  if (args.flag("json")) {
    nlohmann::json stages = nlohmann::json::object();
    for (const auto& st : r.stages) stages[st.stage] = st.seconds;
    std::cout << nlohmann::json{{"out", r.outDir.string()}, {"rope_strategy", r.mla.ropeStrategy},
                                {"rope_pairs", r.mla.ropePairs}, {"d_kv", r.mla.dKv}, {"svd", r.mla.svdMethod},
                                {"pairs", r.pairsSummary}, {"reconstruction_error", r.reconstructionError},
                                {"mean_reconstruction_error", r.meanReconstructionError},
                                {"kv_elements_per_token_before", r.before.perToken},
                                {"kv_elements_per_token_after", r.after.perToken}, {"kv_saving", r.after.saving},
                                {"parameters_before", r.parametersBefore}, {"parameters_after", r.parametersAfter},
                                {"calibration_tokens", r.calibrationTokens}, {"stages", stages},
                                {"seconds", r.totalSeconds}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::printf("wrote %s\n", r.outDir.string().c_str());
  std::printf("rope       %s, %s\n", r.mla.ropeStrategy.c_str(), r.pairsSummary.c_str());
  std::printf("latent     d_kv %d per KV head (%s SVD), mean reconstruction error %.4f\n", r.mla.dKv,
              r.mla.svdMethod.c_str(), r.meanReconstructionError);
  std::printf("kv cache   %lld -> %lld elements/token (%+.2f%%)\n", static_cast<long long>(r.before.perToken),
              static_cast<long long>(r.after.perToken), 100.0 * r.after.saving);
  std::printf("parameters %lld -> %lld\n", static_cast<long long>(r.parametersBefore),
              static_cast<long long>(r.parametersAfter));
  std::printf("time       %.2f s (", r.totalSeconds);
  for (std::size_t i = 0; i < r.stages.size(); ++i)
    std::printf("%s%s %.2f s", i ? ", " : "", r.stages[i].stage.c_str(), r.stages[i].seconds);
  std::printf(")\n");
  return 0;
}

} // namespace latentlab::cli
