// `latentlab-engine generate`: text from a model with its own cache, streamed.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "engine_cli.h"
#include "latentlab/error.h"
#include "latentlab/generate.h"
#include "latentlab/memory_plan.h"

namespace latentlab::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string readWholeFile(const fs::path& path) {
  return readPromptFile(path);
}

}  // namespace

int cmdGenerate(int argc, char** argv) {
  Args args(argc, argv, 2, {"help", "json", "greedy", "events"},
            {"model", "prompt", "prompt-file", "prompts-jsonl", "max-new-tokens", "temperature", "top-k", "top-p",
             "seed", "device", "dtype", "kv-quant", "kv-group", "kv-residual"});
  const int sources =
      (args.get("prompt") ? 1 : 0) + (args.get("prompt-file") ? 1 : 0) + (args.get("prompts-jsonl") ? 1 : 0);
  if (args.flag("help") || !args.get("model") || sources != 1) {
    std::printf(
        "usage: latentlab-engine generate --model DIR (--prompt TEXT | --prompt-file F | --prompts-jsonl F)\n"
        "                                 [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
        "                                 [--seed S] [--greedy] [--device D] [--dtype T] [--json]\n\n"
        "Generates text with the model's own cache (the latent cache with absorbed attention for converted\n"
        "and latent models), streaming it to stdout, and stops at EOS or after N new tokens. A summary goes\n"
        "to stderr: prompt and generated tokens, prefill and decode tokens/s, KV-cache bytes held at the end.\n"
        "  --prompts-jsonl F   one {\"prompt\": \"...\"} a line, each generated in turn\n"
        "  --max-new-tokens N  default 128\n"
        "  --temperature T     default 1 (0 or --greedy: argmax); then --top-k (0: off), --top-p (1: off)\n"
        "  --seed S            sampling seed (default 0)\n"
        "%s"
        "  --json              one JSON object per prompt instead of streamed text\n"
        "  --events            JSON lines as it generates: {\"event\": \"token\", \"text\", \"generated_tokens\",\n"
        "                      \"decode_tokens_per_s\", \"kv_cache_bytes\"} per token, then {\"event\": \"done\", "
        "...the --json fields}\n",
        kvQuantHelp(22).c_str());
    return args.flag("help") ? 0 : 1;
  }
  GenerateOptions o;
  o.model = *args.get("model");
  o.maxNewTokens = args.getInt("max-new-tokens", 128, 1, 1 << 20);
  o.temperature = args.flag("greedy") ? 0.0 : args.getDouble("temperature", 1.0, 0.0, 1e6);
  o.topK = args.getInt("top-k", 0, 0, INT_MAX);
  o.topP = args.getDouble("top-p", 1.0, 1e-9, 1.0);
  o.seed = static_cast<std::uint64_t>(args.getInt64("seed", 0, 0, INT64_MAX));
  o.device = args.get("device", "cpu");
  o.dtype = parseDType(args.get("dtype", "f32"));
  o.kvQuant = readKvQuantFlags(args);
  std::vector<std::string> prompts;
  if (auto p = args.get("prompt")) prompts.push_back(*p);
  if (auto f = args.get("prompt-file")) prompts.push_back(readWholeFile(*f));
  if (auto f = args.get("prompts-jsonl")) prompts = readPrompts(*f);
  Generator generator(o);
  // Every prompt is checked before the first is generated: a file with one
  // prompt past the context prints nothing, naming the line.
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    try {
      generator.checkPrompt(prompts[i]);
    } catch (const Error& e) {
      if (auto f = args.get("prompts-jsonl")) throw e.withContext(*f + ":" + std::to_string(i + 1));
      throw;
    }
  }
  const bool asJson = args.flag("json"), events = args.flag("events");
  auto line = [](const json& j) { std::cout << j.dump() << std::endl; };
  for (const std::string& prompt : prompts) {
    TextSink sink;
    TokenSink onToken;
    std::string pending;  // --events: text not yet sent
    if (events) {
      sink = [&](std::string_view piece) { pending += piece; };
      onToken = [&](const GenerateResult& sofar) {
        line({{"event", "token"},
              {"text", pending},
              {"generated_tokens", sofar.generatedIds.size()},
              {"prompt_tokens", sofar.promptIds.size()},
              {"prefill_tokens_per_s", sofar.prefillTokensPerSecond()},
              {"decode_tokens_per_s", sofar.decodeTokensPerSecond()},
              {"kv_cache_bytes", sofar.kvBytes}});
        pending.clear();
      };
    } else if (!asJson) {
      sink = [](std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      };
    }
    const GenerateResult r = generator.generate(prompt, sink, cancelToken(), onToken);
    if (asJson || events) {
      json j = {{"prompt", prompt},
                {"text", r.text},
                {"prompt_tokens", r.promptIds.size()},
                {"generated_tokens", r.generatedIds.size()},
                {"generated_ids", r.generatedIds},
                {"stopped_at_eos", r.stoppedAtEos},
                {"prefill_tokens_per_s", r.prefillTokensPerSecond()},
                {"decode_tokens_per_s", r.decodeTokensPerSecond()},
                {"kv_cache_bytes", r.kvBytes}};
      if (events) {
        j["event"] = "done";
        j["tail"] = pending;  // text that arrived after the last token line (a held-back character)
      }
      line(j);
    } else {
      std::printf("\n");
      std::fprintf(stderr,
                   "generate: %zu prompt + %zu generated tokens%s; prefill %.1f tok/s, decode %.1f tok/s; "
                   "KV cache %s held\n",
                   r.promptIds.size(), r.generatedIds.size(), r.stoppedAtEos ? " (EOS)" : "",
                   r.prefillTokensPerSecond(), r.decodeTokensPerSecond(),
                   formatBytes(static_cast<std::int64_t>(r.kvBytes)).c_str());
    }
  }
  return 0;
}

}  // namespace latentlab::cli
