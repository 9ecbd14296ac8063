#!/usr/bin/env python3
"""Reference side of the Llama engine tests, using Hugging Face transformers.

  hf_llama.py make OUT --type llama|qwen2|mistral|qwen3|smollm3|phi3|gemma3|qwen3_moe [--hidden 64 --layers 2 --heads 4 --kv-heads 2
                       --inter 96 --vocab 128 --tied --attention-bias --mlp-bias
                       --dtype float32 --max-shard-size 20KB --seed 0 --theta 10000 --max-pos 4096
                       --rope-type linear|dynamic|yarn|llama3 --rope-factor F --low-freq-factor L
                       --high-freq-factor H --original-max N --attention-factor A --beta-fast B
                       --no-rope-layers 1,1,0,1 (smollm3) --partial-rotary F (phi3) --rope-type longrope
                       --qk-gain LO,HI (uniform range of q_norm/k_norm weights: larger makes attention peakier)
                       --window W (mistral, phi3, gemma3) --layer-types s,s,f (gemma3) --query-scalar S
                       --local-theta T --softcap C
                       --experts E --top-k K --moe-inter I --norm-topk --mlp-only-layers 1,3 --sparse-step S
                       --fused-experts (qwen3_moe; the last writes transformers' 3-D expert tensors)]
  hf_llama.py logits DIR IDS.bin OUT.bin      (int64 ids (B, T) with --shape B,T; float32 logits out)
              [--expect-class DeepseekV3ForCausalLM: fail unless loaded as that class with no missing,
               unexpected or mismatched keys] [--mutate swap-kpe|latent-norm-one: negative controls
               on a DeepSeek-V3 model: two RoPE-key slots swapped / every latent norm weight 1]
  hf_llama.py generate DIR IDS.bin OUT.bin --shape 1,T --new N   (greedy; int64 ids of prompt + generation out)
"""
import argparse
import sys

import numpy as np
import torch


def make(a):
    from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM, MistralConfig,
                              MistralForCausalLM, Phi3Config,
                              Phi3ForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM,
                              SmolLM3Config, SmolLM3ForCausalLM)

    torch.manual_seed(a.seed)
    common = dict(
        vocab_size=a.vocab,
        hidden_size=a.hidden,
        intermediate_size=a.inter,
        num_hidden_layers=a.layers,
        num_attention_heads=a.heads,
        num_key_value_heads=a.kv_heads,
        max_position_embeddings=a.max_pos,
        rms_norm_eps=1e-5,
        tie_word_embeddings=a.tied,
    )
    rope = {"rope_type": a.rope_type or "default", "rope_theta": a.theta}
    if a.rope_type and a.rope_type != "longrope":
        rope["factor"] = a.rope_factor
    if a.rope_type == "llama3":
        rope.update(low_freq_factor=a.low_freq_factor, high_freq_factor=a.high_freq_factor,
                    original_max_position_embeddings=a.original_max)
    if a.rope_type == "yarn":
        rope["original_max_position_embeddings"] = a.original_max
        if a.attention_factor:
            rope["attention_factor"] = a.attention_factor
        if a.beta_fast:
            rope["beta_fast"] = a.beta_fast
    if a.rope_type == "longrope":
        # One factor per rotating frequency pair, distinct so that a wrong pair shows.
        head_dim = a.head_dim or a.hidden // a.heads
        pairs = int(head_dim * (a.partial_rotary or 1.0)) // 2
        g = torch.Generator().manual_seed(a.seed + 1)
        rope["short_factor"] = (1.0 + torch.rand(pairs, generator=g)).tolist()
        rope["long_factor"] = (2.0 + 4.0 * torch.rand(pairs, generator=g)).tolist()
    if a.partial_rotary:
        rope["partial_rotary_factor"] = a.partial_rotary
    common["rope_parameters"] = rope
    if a.head_dim:
        common["head_dim"] = a.head_dim
    if a.type == "qwen3_moe":
        from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
        only = [int(x) for x in a.mlp_only_layers.split(",")] if a.mlp_only_layers else []
        cfg = Qwen3MoeConfig(num_experts=a.experts, num_experts_per_tok=a.top_k, moe_intermediate_size=a.moe_inter,
                             norm_topk_prob=a.norm_topk, mlp_only_layers=only, decoder_sparse_step=a.sparse_step,
                             attention_bias=a.attention_bias, **common)
        model = Qwen3MoeForCausalLM(cfg)
    elif a.type == "gemma3":
        # RoPE per layer type: the scaling (if any) on the full layers, the local base on the windowed ones.
        nested = {"full_attention": rope, "sliding_attention": {"rope_type": "default", "rope_theta": a.local_theta}}
        common["rope_parameters"] = nested
        types = None
        if a.layer_types:
            types = ["sliding_attention" if t == "s" else "full_attention" for t in a.layer_types.split(",")]
        cfg = Gemma3TextConfig(sliding_window=a.window or 4096, layer_types=types, query_pre_attn_scalar=a.query_scalar,
                               final_logit_softcapping=a.softcap or None, hidden_activation="gelu_pytorch_tanh",
                               pad_token_id=0, bos_token_id=2, eos_token_id=1, **common)
        model = Gemma3ForCausalLM(cfg)
    elif a.type == "qwen3":
        cfg = Qwen3Config(attention_bias=a.attention_bias, **common)
        model = Qwen3ForCausalLM(cfg)
    elif a.type == "smollm3":
        nope = [int(x) for x in a.no_rope_layers.split(",")] if a.no_rope_layers else None
        cfg = SmolLM3Config(no_rope_layers=nope, pad_token_id=None, bos_token_id=None, eos_token_id=None, **common)
        model = SmolLM3ForCausalLM(cfg)
    elif a.type == "phi3":
        extra = {}
        if a.original_max:
            extra["original_max_position_embeddings"] = a.original_max
        cfg = Phi3Config(sliding_window=a.window or None, pad_token_id=0, **extra, **common)
        model = Phi3ForCausalLM(cfg)
    elif a.type == "qwen2":
        cfg = Qwen2Config(**common)
        model = Qwen2ForCausalLM(cfg)
    elif a.type == "mistral":
        cfg = MistralConfig(sliding_window=a.window or None, **common)
        model = MistralForCausalLM(cfg)
    else:
        cfg = LlamaConfig(attention_bias=a.attention_bias, mlp_bias=a.mlp_bias, **common)
        model = LlamaForCausalLM(cfg)
    # Larger than the default init so that every layer matters in the logits.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "q_norm" in name or "k_norm" in name:
                p.uniform_(*(float(x) for x in a.qk_gain.split(",")))
            elif "norm" in name:
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, a.std)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[a.dtype]
    model = model.to(dtype)
    kwargs = {}
    if a.max_shard_size:
        kwargs["max_shard_size"] = a.max_shard_size
    if a.fused_experts:  # transformers' in-memory layout of the experts (3-D tensors)
        kwargs["save_original_format"] = False
    model.save_pretrained(a.out, safe_serialization=True, **kwargs)


def load_checked(a):
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(a.dir, dtype=torch.float32, attn_implementation="eager",
                                                       output_loading_info=True)
    if a.expect_class:
        problems = {k: v for k, v in info.items() if v}
        if type(model).__name__ != a.expect_class or problems:
            sys.exit(f"{a.dir}: loaded as {type(model).__name__}, loading problems {problems}")
    return model


def mutate(model, how):
    with torch.no_grad():
        for layer in model.model.layers:
            att = layer.self_attn
            if how == "swap-kpe":
                rows = att.kv_a_proj_with_mqa.weight
                r = att.kv_lora_rank
                a, b = rows[r].clone(), rows[r + 2].clone()
                rows[r], rows[r + 2] = b, a
            elif how == "latent-norm-one":
                att.kv_a_layernorm.weight.fill_(1.0)
            else:
                sys.exit(f"unknown mutation {how}")


def logits(a):
    b, t = (int(x) for x in a.shape.split(","))
    ids = np.fromfile(a.ids, dtype=np.int64).reshape(b, t)
    model = load_checked(a)
    if a.mutate:
        mutate(model, a.mutate)
    model.eval()
    with torch.no_grad():
        out = model(torch.from_numpy(ids)).logits.float().numpy()
    out.astype(np.float32).tofile(a.out)


def generate(a):
    b, t = (int(x) for x in a.shape.split(","))
    ids = torch.from_numpy(np.fromfile(a.ids, dtype=np.int64).reshape(b, t))
    model = load_checked(a)
    model.eval()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, use_cache=True, max_new_tokens=a.new,
                             pad_token_id=0)
    out.numpy().astype(np.int64).tofile(a.out)


def distill(a):
    """The distillation loss of one micro-batch from transformers' logits of
    both models: a T^2 KL(teacher || student at T) + (1 - a) CE, the KL's sum
    over the vocabulary averaged over the predicted positions."""
    import json

    import torch.nn.functional as F

    b, t = (int(x) for x in a.shape.split(","))
    windows = torch.from_numpy(np.fromfile(a.ids, dtype=np.int64).reshape(b, t))
    inputs, targets = windows[:, :-1], windows[:, 1:].reshape(-1)
    with torch.no_grad():
        student = load_checked(argparse.Namespace(dir=a.student, expect_class=""))
        teacher = load_checked(argparse.Namespace(dir=a.teacher, expect_class=""))
        s = student(inputs).logits.float().reshape(-1, student.config.vocab_size)
        tl = teacher(inputs).logits.float().reshape(-1, teacher.config.vocab_size)
    temp = a.temperature
    kd = F.kl_div(F.log_softmax(s / temp, -1), F.log_softmax(tl / temp, -1), reduction="sum",
                  log_target=True) / s.shape[0]
    ce = F.cross_entropy(s, targets)
    total = a.alpha * temp * temp * kd + (1 - a.alpha) * ce
    with open(a.out, "w") as f:
        json.dump({"total": total.item(), "ce": ce.item(), "kd": kd.item()}, f)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--type", default="llama")
    m.add_argument("--hidden", type=int, default=64)
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--heads", type=int, default=4)
    m.add_argument("--kv-heads", type=int, default=2)
    m.add_argument("--head-dim", type=int, default=0)
    m.add_argument("--inter", type=int, default=96)
    m.add_argument("--vocab", type=int, default=128)
    m.add_argument("--theta", type=float, default=10000.0)
    m.add_argument("--max-pos", type=int, default=4096)
    m.add_argument("--rope-type", default="")
    m.add_argument("--rope-factor", type=float, default=1.0)
    m.add_argument("--low-freq-factor", type=float, default=1.0)
    m.add_argument("--high-freq-factor", type=float, default=4.0)
    m.add_argument("--original-max", type=int, default=0)
    m.add_argument("--attention-factor", type=float, default=0.0)
    m.add_argument("--beta-fast", type=float, default=0.0)
    m.add_argument("--std", type=float, default=0.1)
    m.add_argument("--tied", action="store_true")
    m.add_argument("--attention-bias", action="store_true")
    m.add_argument("--mlp-bias", action="store_true")
    m.add_argument("--experts", type=int, default=4)
    m.add_argument("--top-k", type=int, default=2)
    m.add_argument("--moe-inter", type=int, default=32)
    m.add_argument("--norm-topk", action="store_true")
    m.add_argument("--mlp-only-layers", default="")
    m.add_argument("--sparse-step", type=int, default=1)
    m.add_argument("--fused-experts", action="store_true")
    m.add_argument("--window", type=int, default=0)
    m.add_argument("--layer-types", default="", help="gemma3: s (sliding) or f (full) per layer, comma-separated")
    m.add_argument("--query-scalar", type=int, default=256)
    m.add_argument("--local-theta", type=float, default=10000.0)
    m.add_argument("--softcap", type=float, default=0.0)
    m.add_argument("--no-rope-layers", default="")
    m.add_argument("--partial-rotary", type=float, default=0.0)
    m.add_argument("--qk-gain", default="0.5,1.5")
    m.add_argument("--dtype", default="float32")
    m.add_argument("--max-shard-size", default="")
    m.add_argument("--seed", type=int, default=0)
    lg = sub.add_parser("logits")
    lg.add_argument("dir")
    lg.add_argument("ids")
    lg.add_argument("out")
    lg.add_argument("--shape", required=True)
    lg.add_argument("--expect-class", default="")
    lg.add_argument("--mutate", default="")
    gen = sub.add_parser("generate")
    gen.add_argument("dir")
    gen.add_argument("ids")
    gen.add_argument("out")
    gen.add_argument("--shape", required=True)
    gen.add_argument("--new", type=int, required=True)
    gen.add_argument("--expect-class", default="")
    ds = sub.add_parser("distill")
    ds.add_argument("teacher")
    ds.add_argument("student")
    ds.add_argument("ids")
    ds.add_argument("out")
    ds.add_argument("--shape", required=True)
    ds.add_argument("--alpha", type=float, required=True)
    ds.add_argument("--temperature", type=float, required=True)
    a = p.parse_args()
    {"make": make, "logits": logits, "generate": generate, "distill": distill}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
