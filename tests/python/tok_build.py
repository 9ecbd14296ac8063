#!/usr/bin/env python3
# Builds reference tokenizer.json files with Hugging Face `tokenizers`: small
# BPE models in GPT-2, SmolLM, Llama-3 and Qwen2 style (byte-level) and in
# Llama-2 and Mistral style (SentencePiece-style BPE with byte fallback), for
# the C++ tests.
"""usage: tok_build.py STYLE VOCAB OUT.json CORPUS... [--string-merges]

STYLE: gpt2 | gpt2prefix | smollm | llama3 | qwen2 | phi4mini | llama2 | metaspace | gemma3 (see build()), or a family that uses
one of these pipelines with its own added tokens: qwen3 (qwen2), smollm3 (llama3), phi3 (llama2)."""
import json
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# o200k (Phi-4-mini's tokenizer.json): letters split at case changes, up to three digits.
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPACE = "\u2581"


def sentencepiece_style(style, vocab, corpus):
    """Llama-2 (legacy: Prepend/Replace normalizer, no pre-tokenizer) or Mistral
    (Metaspace pre-tokenizer, prepend_scheme first): characters, not bytes, with
    <unk> 0, <s> 1, </s> 2, the 256 <0xNN> tokens 3..258, then the merges."""
    def configure(tok):
        if style == "llama2":
            tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
            tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                             decoders.Strip(" ", 1, 0)])
        else:
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=True)
            tok.decoder = decoders.Sequence([decoders.Metaspace(replacement=SPACE, prepend_scheme="first", split=True),
                                             decoders.ByteFallback(), decoders.Fuse()])

    specials = ["<unk>", "<s>", "</s>"]
    draft = Tokenizer(models.BPE(unk_token="<unk>"))
    configure(draft)
    draft.train(corpus, trainers.BpeTrainer(vocab_size=vocab - 256, min_frequency=2, special_tokens=specials,
                                            show_progress=False))
    trained = json.loads(draft.to_str())["model"]
    ordered = specials + ["<0x%02X>" % b for b in range(256)]
    ordered += [t for t, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]) if t not in specials]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(ordered)}, merges=merges, unk_token="<unk>",
                               fuse_unk=True, byte_fallback=True))
    configure(tok)
    tok.add_special_tokens([AddedToken(t, normalized=False) for t in specials])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    tok.add_special_tokens([AddedToken("<|lstrip|>", lstrip=True, normalized=False)])
    tok.add_tokens([AddedToken("xyzzy", single_word=True), "plugh"])
    return tok


def gemma_style(vocab, corpus):
    """Gemma-3: spaces replaced by U+2581 (no prefix), a Split on " " that finds none, BPE with byte
    fallback over whole segments, <pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4, the 256 <0xNN> tokens,
    then the merges; "<bos> $A"; chat tokens added. Merges are learnt on words split at U+2581."""
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
    draft = Tokenizer(models.BPE(unk_token="<unk>"))
    draft.normalizer = normalizers.Replace(" ", SPACE)
    draft.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never", split=True)
    draft.train(corpus, trainers.BpeTrainer(vocab_size=vocab - 256, min_frequency=2, special_tokens=specials,
                                            show_progress=False))
    trained = json.loads(draft.to_str())["model"]
    ordered = specials + ["<0x%02X>" % b for b in range(256)]
    ordered += [t for t, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]) if t not in specials]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(ordered)}, merges=merges, unk_token="<unk>",
                               fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", SPACE)
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False)
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, normalized=False) for t in specials])
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos> $B",
                                                       special_tokens=[("<bos>", 2)])
    tok.add_special_tokens([AddedToken("<start_of_turn>", normalized=False),
                            AddedToken("<end_of_turn>", normalized=False)])
    return tok


def build(style, vocab, corpus):
    if style in ("llama2", "metaspace"):
        return sentencepiece_style(style, vocab, corpus)
    if style == "gemma3":
        return gemma_style(vocab, corpus)
    if style == "qwen2":
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    elif style == "phi4mini":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(O200K), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
        specials = ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"]
    elif style == "llama3":
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ])
        specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    elif style == "smollm":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ])
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    elif style in ("gpt2", "gpt2prefix"):
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=(style == "gpt2prefix"))
        specials = ["<|endoftext|>"]
    else:
        raise SystemExit("unknown style " + style)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train(corpus, trainer)
    if style == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
            special_tokens=[("<|begin_of_text|>", bos)])
        # Added tokens with non-default flags (special and not).
        tok.add_special_tokens([AddedToken("<|lstrip|>", lstrip=True, normalized=False),
                                AddedToken("<|rstrip|>", rstrip=True, normalized=False)])
        tok.add_tokens([AddedToken("xyzzy", single_word=True), "plugh"])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        tok.add_tokens(["<|user|>", "[NEW]"])
    return tok


# The families whose tokenizer is one of the pipelines above with added tokens of their own.
FAMILIES = {
    # Qwen3: the Qwen2 tokenizer with its chat and reasoning tokens (the latter not special).
    "qwen3": ("qwen2", [AddedToken("<|im_start|>", special=True, normalized=False),
                        AddedToken("<think>", special=False, normalized=False),
                        AddedToken("</think>", special=False, normalized=False)]),
    # SmolLM3: the Llama-3 tokenizer with chat and reasoning tokens.
    "smollm3": ("llama3", [AddedToken("<|im_start|>", special=True, normalized=False),
                           AddedToken("<|im_end|>", special=True, normalized=False),
                           AddedToken("<think>", special=True, normalized=False)]),
    # Phi-3: the Llama-2 tokenizer with chat tokens that strip the space after them.
    "phi3": ("llama2", [AddedToken("<|endoftext|>", special=True, normalized=False),
                        AddedToken("<|user|>", special=True, rstrip=True, normalized=False),
                        AddedToken("<|assistant|>", special=True, rstrip=True, normalized=False),
                        AddedToken("<|end|>", special=True, rstrip=True, normalized=False)]),
}


def build_family(style, vocab, corpus):
    if style not in FAMILIES:
        return build(style, vocab, corpus)
    base, added = FAMILIES[style]
    tok = build(base, vocab, corpus)
    tok.add_special_tokens([t for t in added if t.special])
    tok.add_tokens([t for t in added if not t.special])
    return tok


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) < 4:
        raise SystemExit(__doc__)
    style, vocab, out, corpus = args[0], int(args[1]), args[2], args[3:]
    tok = build_family(style, vocab, corpus)
    tok.save(out)
    if "--string-merges" in sys.argv:  # the older "a b" form of the merges
        with open(out, encoding="utf-8") as f:
            j = json.load(f)
        j["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
        with open(out, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)
    print(json.dumps({"vocab_size": tok.get_vocab_size(with_added_tokens=True)}))


if __name__ == "__main__":
    main()
