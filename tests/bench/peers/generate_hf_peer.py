#!/usr/bin/env python3
"""The generation benchmark's peer: transformers `generate`, greedy, batch 1,
on the same model folder and prompt as `latentlab-engine generate`.

  generate_hf_peer.py MODEL_DIR PROMPT_FILE --new N --dtype f32|bf16
      [--kv-quant int4|int2 --kv-group G --kv-residual R --backend quanto|hqq]
  prints {"prompt_tokens": p, "prefill_tokens_per_s": a, "decode_tokens_per_s": b}

With --kv-quant the keys and values past the newest R tokens are kept in
transformers' QuantizedCache (groups of G values, the backend's own packing
and kernels), a fresh cache for every generate call.

Prefill is timed as generate with one new token; decode as the extra time of
generate with N+1 new tokens over that, for N tokens (best of three each)."""
import json
import sys
import time

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, QuantizedCache


def option(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    model_dir, prompt_file = sys.argv[1], sys.argv[2]
    new = int(sys.argv[sys.argv.index("--new") + 1])
    quant = option("--kv-quant")
    dtype = torch.bfloat16 if sys.argv[sys.argv.index("--dtype") + 1] == "bf16" else torch.float32
    torch.set_grad_enabled(False)
    tok = Tokenizer.from_file(model_dir + "/tokenizer.json")
    with open(prompt_file, encoding="utf-8") as f:
        ids = torch.tensor([tok.encode(f.read(), add_special_tokens=False).ids])
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    model.eval()

    def cache():
        if quant is None:
            return None
        return QuantizedCache(option("--backend", "quanto"), model.config, nbits=int(quant[3:]),
                              q_group_size=int(option("--kv-group", "64")),
                              residual_length=int(option("--kv-residual", "128")))

    def timed(n):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                           do_sample=False, pad_token_id=0, past_key_values=cache())
            best = min(best, time.perf_counter() - t0)
        return best

    timed(1)  # warm-up
    prefill = timed(1)
    total = timed(new + 1)
    print(json.dumps({"prompt_tokens": ids.shape[1], "prefill_tokens_per_s": ids.shape[1] / prefill,
                      "decode_tokens_per_s": new / max(total - prefill, 1e-9)}))


if __name__ == "__main__":
    main()
