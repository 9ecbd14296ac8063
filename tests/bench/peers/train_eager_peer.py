#!/usr/bin/env python3
"""The training benchmark's peer: the same step in PyTorch eager mode, on
transformers' own LlamaForCausalLM of the same shape (random weights, the
embedding tied where the engine's is), in the same precision: forward, cross-entropy on the next token,
backward, gradient clipping to norm 1, AdamW (lr 1e-4, betas 0.9/0.95, weight
decay 0.01, LibTorch's default implementation for CPU tensors), zeroing the
gradients.

  train_eager_peer.py --hidden D --layers L --heads H --kv-heads K --head-dim E
      --intermediate I --vocab V --batch B --seq T --steps N [--bf16] [--tied]
  prints {"step_seconds": s, "tokens_per_s": t} (mean of N steps after one warm-up)

--bf16 runs the forward and loss under torch.autocast("cpu", dtype=bfloat16)
with fp32 weights, as the engine's bf16 autocast does."""
import argparse
import json
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    p = argparse.ArgumentParser()
    for name in ("hidden", "layers", "heads", "kv-heads", "head-dim", "intermediate", "vocab", "batch", "seq",
                 "steps"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--tied", action="store_true")
    a = p.parse_args()
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                      num_key_value_heads=a.kv_heads, head_dim=a.head_dim, intermediate_size=a.intermediate,
                      vocab_size=a.vocab, max_position_embeddings=max(2048, a.seq), tie_word_embeddings=a.tied,
                      rms_norm_eps=1e-5,
                      attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.01)
    gen = torch.Generator().manual_seed(1)

    def step():
        ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(input_ids=ids[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, a.vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    seconds = (time.perf_counter() - t0) / a.steps
    print(json.dumps({"step_seconds": seconds, "tokens_per_s": a.batch * a.seq / seconds}))


if __name__ == "__main__":
    main()
