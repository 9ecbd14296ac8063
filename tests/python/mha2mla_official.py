#!/usr/bin/env python3
"""Writes a LatentLab MHA2MLA folder in the official MHA2MLA code's checkpoint layout, for the
reader's tests (docs/official_mha2mla.md).

  mha2mla_official.py write SRC OUT --format 1|2 [--scores FILE --shape L,G,P]

SRC is a folder LatentLab saved (config.json with latentlab_mla). OUT gets the base model's
config.json with the official block (format 2: "mha2mla"; format 1: "RoPE" and "SVD"), the
tensors under the official names and row orders, and for 2-norm the tensor file torch.save
writes: format 2 ranks (uint8 [L, G, d_h], rank 0 the largest q*k score, the two dims of a pair
equal), format 1 scores (float32 [L, G, d_h/2]). FILE holds the float64 scores [L, G, P] the
strategy ranked; config.json names the file by a path of another machine, as the official code
leaves it.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file

VERSION1 = {"high": 1, "uniform": 2, "2-norm": 4, "low": 5}


def head_order(kept, head_dim):
    """LatentLab's converted dim order of a head: kept pairs, their partners, the rest ascending."""
    half = head_dim // 2
    order = list(kept) + [p + half for p in kept]
    return order + [i for i in range(head_dim) if i not in order]


def write(a):
    with open(os.path.join(a.src, "config.json")) as f:
        cfg = json.load(f)
    mla = cfg.pop("latentlab_mla")
    cfg["architectures"] = ["LlamaForCausalLM" if cfg["model_type"] == "llama" else "Qwen2ForCausalLM"]
    H, G = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg["head_dim"]
    r2 = 2 * mla["rope_pairs"]
    strategy, pairs = mla["rope_strategy"], mla["pairs"]
    weights = load_file(os.path.join(a.src, "model.safetensors"))
    out = {}
    for name, t in weights.items():
        if ".self_attn." not in name:
            out[name] = t
            continue
        prefix, local = name.split(".self_attn.")
        layer = int(prefix.split(".")[-1])
        p = prefix + ".self_attn."
        kind = local.split(".")[-1]
        if local.startswith("q_proj."):
            rows = t.reshape(H, d, *t.shape[1:])  # LatentLab: per head [RoPE | NoPE]
            if a.format == 2:  # every head's RoPE rows, then every head's NoPE rows
                out[name] = torch.cat([rows[:, :r2].reshape(H * r2, *t.shape[1:]),
                                       rows[:, r2:].reshape(H * (d - r2), *t.shape[1:])]).contiguous()
            else:  # back to the original order
                orig = torch.empty_like(rows)
                for h in range(H):
                    orig[h, head_order(pairs[layer][h // (H // G)], d)] = rows[h]
                out[name] = orig.reshape(t.shape).contiguous()
        elif local.startswith("k_rope_proj."):
            out[p + ("k_r_proj." if a.format == 2 else "W_k_r.") + kind] = t
        elif local.startswith("kv_down."):
            out[p + ("kv_proj.down_kv." if a.format == 2 else "W_down_k.") + kind] = t
        elif local.startswith("kv_up."):
            nope = G * (d - r2)
            out[p + ("kv_proj.up_k." if a.format == 2 else "W_up_k.") + kind] = t[:nope].contiguous()
            out[p + ("kv_proj.up_v." if a.format == 2 else "W_up_v.") + kind] = t[nope:].contiguous()
        elif local.startswith(("k_down.", "v_down.", "k_up.", "v_up.")):
            which = local.split(".")[0]
            names2 = {"k_down": "kv_proj.down_k", "v_down": "kv_proj.down_v", "k_up": "kv_proj.up_k",
                      "v_up": "kv_proj.up_v"}
            names1 = {"k_down": "W_down_k", "v_down": "W_down_v", "k_up": "W_up_k", "v_up": "W_up_v"}
            out[p + (names2 if a.format == 2 else names1)[which] + "." + kind] = t
        else:
            out[name] = t
    rank_name = "smollm1_tiny-2_norm_rank.pth" if a.format == 2 else "qk_tensor_tiny.pth"
    os.makedirs(a.out, exist_ok=True)
    if strategy == "2-norm":
        L = cfg["num_hidden_layers"]
        shape = tuple(int(x) for x in a.shape.split(","))
        scores = torch.from_numpy(np.fromfile(a.scores, dtype=np.float64).reshape(shape))
        if a.format == 2:
            # rank[i] = place of pair i when the pairs are sorted by score, largest first
            order = torch.argsort(scores, dim=-1, descending=True, stable=True)
            rank = torch.argsort(order, dim=-1, stable=True).to(torch.uint8)
            torch.save(torch.cat([rank, rank], dim=-1), os.path.join(a.out, rank_name))
        else:
            torch.save(scores.to(torch.float32), os.path.join(a.out, rank_name))
        assert scores.shape[0] == L
    if a.format == 2:
        cfg["mha2mla"] = {"model_name_or_path": "tiny", "partial_rope_version": strategy, "rope_dim_for_mla": r2,
                          "uniform_start_point": 0, "qk_tensor_path": "utils/" + rank_name if strategy == "2-norm"
                          else None, "svd_init_method": mla["svd_method"], "low_rank": mla["d_kv"],
                          "is_baseline": False, "is_gqa2mha2mla": False, "is_mla_from_scratch": False}
    else:
        k = mla["rope_pairs"]
        cfg["RoPE"] = {"partial_rope_version": VERSION1[strategy], "top_k_rope_dim": k, "last_k_rope_dim": k,
                       "uniform_start_point": 0, "uniform_step": d // r2, "n_gqa_group": H // G,
                       "qk_tensor_path": "../utils/" + rank_name if strategy == "2-norm" else None}
        cfg["SVD"] = {"method": 7 if mla["svd_method"] == "joint" else 2, "low_rank": mla["d_kv"]}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_file(out, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    for extra in ("tokenizer.json",):
        if os.path.exists(os.path.join(a.src, extra)):
            shutil.copy(os.path.join(a.src, extra), a.out)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("src")
    w.add_argument("out")
    w.add_argument("--format", type=int, required=True)
    w.add_argument("--scores", default="")
    w.add_argument("--shape", default="")
    a = p.parse_args()
    write(a)


if __name__ == "__main__":
    sys.exit(main())
