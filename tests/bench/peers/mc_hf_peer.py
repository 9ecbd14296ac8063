#!/usr/bin/env python3
"""The multiple-choice benchmark's peer: the same items scored the way
lm-evaluation-harness's HF backend scores loglikelihood requests, on
transformers (what a user of that tool runs today).

  mc_hf_peer.py MODEL_DIR ITEMS.jsonl [--batch 8]
  prints {"items": n, "acc": a, "load_s": s, "score_s": s}

Requests are built with lm-eval's conventions (trailing context whitespace
moves to the continuation, an empty context is EOS, the continuation is the
tail of the whole encoding), sorted longest first, right-padded in batches
of 8, one forward pass per batch over context and continuation, log-softmax
over every position, the continuation's tokens summed."""
import json
import os
import sys
import time

t_start = time.perf_counter()
import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

# lm-eval's request encoding, shared with the tests' reference.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from mc_reference import encode_request  # noqa: E402


def requests_of(tok, eos, items):
    out = []
    for i, item in enumerate(items):
        for c, choice in enumerate(item["choices"]):
            ctx, cont = encode_request(tok, eos, item["context"], choice)
            out.append((i, c, ctx + cont, len(cont)))
    return out


def main():
    model_dir, items_path = sys.argv[1], sys.argv[2]
    batch = int(sys.argv[sys.argv.index("--batch") + 1]) if "--batch" in sys.argv else 8
    torch.set_grad_enabled(False)
    tok = Tokenizer.from_file(model_dir + "/tokenizer.json")
    eos = tok.token_to_id("<|endoftext|>")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    with open(items_path, encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    t_loaded = time.perf_counter()
    reqs = sorted(requests_of(tok, eos, items), key=lambda r: -len(r[2]))
    lls = [[0.0] * len(item["choices"]) for item in items]
    for b in range(0, len(reqs), batch):
        chunk = reqs[b:b + batch]
        width = len(chunk[0][2]) - 1
        inp = torch.zeros((len(chunk), width), dtype=torch.long)
        for k, (_, _, toks, _) in enumerate(chunk):
            inp[k, :len(toks) - 1] = torch.tensor(toks[:-1])
        logprobs = torch.log_softmax(model(inp).logits, dim=-1)
        for k, (i, c, toks, n_cont) in enumerate(chunk):
            n = len(toks) - 1
            target = torch.tensor(toks[n - n_cont + 1:])
            rows = logprobs[k, n - n_cont:n]
            lls[i][c] = rows.gather(1, target.unsqueeze(1)).sum().item()
    acc = sum(max(range(len(r)), key=lambda c: r[c]) == item["gold"] for r, item in zip(lls, items)) / len(items)
    t_end = time.perf_counter()
    print(json.dumps({"items": len(items), "acc": acc, "load_s": t_loaded - t_start, "score_s": t_end - t_loaded}))


if __name__ == "__main__":
    main()
