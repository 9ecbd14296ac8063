#!/usr/bin/env python3
"""Reference side of the quantized-cache tests: the number format of
docs/kv_quant.md written out with numpy alone.

  kv_quant_ref.py X.f32 ROWS WIDTH BITS GROUP OUT_PREFIX

X.f32 holds ROWS x WIDTH little-endian float32 values. Writes
OUT_PREFIX.codes (uint8, ROWS x WIDTH*BITS/8), OUT_PREFIX.scale and
OUT_PREFIX.zero (float32, ROWS x WIDTH/g) and OUT_PREFIX.deq (float32,
ROWS x WIDTH): per group of g = min(GROUP, WIDTH) values, zero = min,
scale = (max - min) / (2^BITS - 1), q = round-half-even((x - zero) / scale)
clipped to [0, 2^BITS - 1] (0 where scale is 0), x_hat = zero + q * scale;
the codes of consecutive values share a byte, the first in the low bits."""
import sys

import numpy as np


def main():
    path, rows, width, bits, group, out = sys.argv[1:7]
    rows, width, bits, group = int(rows), int(width), int(bits), int(group)
    g = min(group, width)
    x = np.fromfile(path, dtype="<f4").reshape(rows, width // g, g)
    levels = np.float32(2 ** bits - 1)
    lo = x.min(axis=2, keepdims=True)
    hi = x.max(axis=2, keepdims=True)
    scale = ((hi - lo) / levels).astype(np.float32)
    zero = lo.astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))
    q = np.where(scale > 0, np.round((x - zero) / safe), np.float32(0))
    q = np.clip(q, 0, levels).astype(np.uint8).reshape(rows, width)
    per_byte = 8 // bits
    packed = np.zeros((rows, width // per_byte), dtype=np.uint8)
    for j in range(per_byte):
        packed |= (q[:, j::per_byte] << (j * bits)).astype(np.uint8)
    deq = (zero + q.reshape(rows, width // g, g).astype(np.float32) * scale).astype(np.float32)
    packed.tofile(out + ".codes")
    scale.reshape(rows, width // g).tofile(out + ".scale")
    zero.reshape(rows, width // g).tofile(out + ".zero")
    deq.reshape(rows, width).tofile(out + ".deq")


if __name__ == "__main__":
    main()
