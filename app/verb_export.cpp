// `latentlab-engine export`: a converted or from-scratch MLA model written in
// a serving stack's format (DeepSeek-V3).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "engine_cli.h"
#include "latentlab/convert.h"
#include "latentlab/error.h"

namespace latentlab::cli {

int cmdExport(int argc, char** argv) {
  Args args(argc, argv, 2, {"help", "force", "json", "quiet"}, {"model", "out", "format", "dtype"});
  if (args.flag("help") || !args.get("model") || !args.get("out")) {
    std::printf(
        "usage: latentlab-engine export --model DIR --out DIR [--format deepseek-v3] [options]\n\n"
        "Writes a model that transformers loads as DeepseekV3ForCausalLM without remote code (dense\n"
        "MLP config, interleaved RoPE, the softmax scale of its head), with the tokenizer files:\n"
        "for DeepSeek-target conversions (convert --target deepseek), their fine-tuned checkpoints,\n"
        "and MLA models trained from scratch. MHA2MLA-target conversions cannot be expressed there.\n"
        "  --model DIR     the model folder (a run's checkpoint folder works)\n"
        "  --out DIR       output folder (must not exist unless --force)\n"
        "  --format F      deepseek-v3 (default)\n"
        "  --dtype T       saved dtype (default: the checkpoint's)\n"
        "  --force         replace an existing output folder\n"
        "  --json          print the report as JSON\n");
    return args.flag("help") ? 0 : 1;
  }
  ExportSpec s;
  s.modelDir = *args.get("model");
  s.outDir = *args.get("out");
  s.format = args.get("format", "deepseek-v3");
  s.dtype = args.get("dtype", "");
  s.force = args.flag("force");
  StderrProgress progress(args.flag("quiet"));
  ExportReport r = exportModel(s, progress, cancelToken());
  if (args.flag("json")) {
    std::cout << nlohmann::json{{"out", r.outDir.string()},
                                {"format", s.format},
                                {"kv_lora_rank", r.kvLoraRank},
                                {"qk_rope_head_dim", r.qkRopeHeadDim},
                                {"qk_nope_head_dim", r.qkNopeHeadDim},
                                {"v_head_dim", r.vHeadDim},
                                {"q_lora_rank", r.qLoraRank},
                                {"rope_theta", r.ropeTheta},
                                {"rope_type", r.ropeType},
                                {"kv_elements_per_token_per_layer", r.kvPerTokenPerLayer},
                                {"kv_bytes_per_token", r.kvBytesPerToken},
                                {"tensors", r.tensors}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::printf("wrote %s (DeepseekV3ForCausalLM, %d tensors)\n", r.outDir.string().c_str(), r.tensors);
  std::printf("attention  kv_lora_rank %d, qk_rope_head_dim %d, qk_nope_head_dim %d, v_head_dim %d, q_lora_rank %s\n",
              r.kvLoraRank, r.qkRopeHeadDim, r.qkNopeHeadDim, r.vHeadDim,
              r.qLoraRank > 0 ? std::to_string(r.qLoraRank).c_str() : "null");
  std::printf("rope       %s, theta %.6g, interleaved\n", r.ropeType.c_str(), r.ropeTheta);
  std::printf("kv cache   %lld elements/token/layer (kv_lora_rank + qk_rope_head_dim), %lld bytes/token\n",
              static_cast<long long>(r.kvPerTokenPerLayer), static_cast<long long>(r.kvBytesPerToken));
  return 0;
}

}  // namespace latentlab::cli
