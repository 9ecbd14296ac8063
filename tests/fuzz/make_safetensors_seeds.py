#!/usr/bin/env python3
"""Writes the safetensors fuzz seeds into OUTDIR (no binary files in the
repository): two small files with F32/BF16 tensors and metadata, and a
scalar next to an empty tensor.

usage: make_safetensors_seeds.py OUTDIR"""
import json
import os
import struct
import sys


def write(path, header, data):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "two_tensors.safetensors"),
          {"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
           "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}}, bytes(range(22)))
    write(os.path.join(out, "scalar_and_empty.safetensors"),
          {"x": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}, "y": {"dtype": "U8", "shape": [0, 5],
                                                                          "data_offsets": [8, 8]}}, bytes(8))


if __name__ == "__main__":
    main()
