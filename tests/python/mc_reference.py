#!/usr/bin/env python3
"""Reference side of the multiple-choice tests: lm-evaluation-harness's
loglikelihood convention written out with transformers and tokenizers.

  mc_reference.py MODEL_DIR ITEMS.jsonl     prints {"lls": [[...]], "acc": a, "acc_norm": b}

Per choice: trailing whitespace of the context moves to the continuation;
context+continuation and context are encoded without special tokens and the
continuation's tokens are the tail of the whole encoding; an empty context is
the tokenizer's EOS token. acc_norm divides by the continuation's length in
characters."""
import json
import sys

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM


def encode_request(tok, eos, context, continuation):
    """The context and continuation token ids of one request, lm-eval's way."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    if context == "":
        return [eos], tok.encode(continuation, add_special_tokens=False).ids
    whole = tok.encode(context + continuation, add_special_tokens=False).ids
    ctx = tok.encode(context, add_special_tokens=False).ids
    return ctx, whole[len(ctx):]


def main():
    model_dir, items_path = sys.argv[1], sys.argv[2]
    tok = Tokenizer.from_file(model_dir + "/tokenizer.json")
    eos = tok.token_to_id("<|endoftext|>")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    lls, acc, acc_norm = [], 0, 0
    with open(items_path, encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    for item in items:
        row = []
        for choice in item["choices"]:
            ctx, cont = encode_request(tok, eos, item["context"], choice)
            ids = torch.tensor([ctx + cont])
            with torch.no_grad():
                logprobs = torch.log_softmax(model(ids[:, :-1]).logits.double(), dim=-1)[0]
            n = len(ctx + cont)
            row.append(sum(logprobs[t - 1, (ctx + cont)[t]].item() for t in range(n - len(cont), n)))
        lls.append(row)
        best = max(range(len(row)), key=lambda k: row[k])
        norm = [row[k] / len(item["choices"][k]) for k in range(len(row))]
        best_norm = max(range(len(row)), key=lambda k: norm[k])
        acc += best == item["gold"]
        acc_norm += best_norm == item["gold"]
    print(json.dumps({"lls": lls, "acc": acc / len(items), "acc_norm": acc_norm / len(items)}))


if __name__ == "__main__":
    main()
