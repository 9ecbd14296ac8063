#!/usr/bin/env python3
# Encodes and decodes with Hugging Face `tokenizers` for the C++ tests: reads
# a cases file, prints the reference ids and texts as JSON.
"""usage: tok_encode.py TOKENIZER.json CASES.json

CASES: {"texts_hex": [...], "decode": [[ids], ...]}. Texts are hex-encoded
bytes, decoded as UTF-8 with errors="replace" (invalid input is repaired the
way LatentLab documents). Prints {"ids", "ids_special", "decoded",
"decoded_skip", "vocab_size", "pretok"}."""
import json
import sys

from tokenizers import Tokenizer


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    tok = Tokenizer.from_file(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        cases = json.load(f)
    texts = [bytes.fromhex(h).decode("utf-8", errors="replace") for h in cases.get("texts_hex", [])]
    out = {
        "ids": [tok.encode(t, add_special_tokens=False).ids for t in texts],
        "ids_special": [tok.encode(t, add_special_tokens=True).ids for t in texts],
        "decoded": [tok.decode(ids, skip_special_tokens=False).encode("utf-8").hex() for ids in cases.get("decode", [])],
        "decoded_skip": [tok.decode(ids, skip_special_tokens=True).encode("utf-8").hex() for ids in cases.get("decode", [])],
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        # The pre-tokenizer alone (no added tokens): the words BPE sees.
        "pretok": [[w for w, _ in tok.pre_tokenizer.pre_tokenize_str(t)] for t in texts] if tok.pre_tokenizer else [],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
