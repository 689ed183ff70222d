#!/usr/bin/env python3
"""GELU's derivative (exact form) from real PyTorch (CPU), f32 and f64.

Writes tests/golden/gelu_grad.json, read by crates/lockstep-tensor/tests/gelu_grad_golden.rs.
Run from the repository root:

    python3 tools/golden_gelu_grad.py

For each f32 input x (written as its bit pattern): `gelu_backward(1, x)` from torch in float32
(`torch.ops.aten.gelu_backward`, one thread; a whole contiguous tensor, so torch's vectorised
kernel, with its scalar form for the last partial vector) and in float64 of the same x (the
reference the test measures both against, in f32 ulps).
"""

import json
import math
import os
import random
import struct

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "gelu_grad.json")


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def main():
    torch.set_num_threads(1)
    rng = random.Random(20261203)
    xs = [i / 400.0 for i in range(-4000, 4001)]  # [-10, 10] in steps of 1/400
    xs += [rng.gauss(0.0, 1.0) * s for s in (0.1, 1.0, 3.0) for _ in range(2000)]
    xs += [rng.uniform(-30.0, 30.0) for _ in range(1000)]
    # The erf ranges' thresholds (|x/√2| = 0.84375, 1.25, 1/0.35, 6) and their neighbours.
    for t in (0.84375, 1.25, 1 / 0.35, 6.0):
        c = f32(t * math.sqrt(2.0))
        for d in range(-8, 9):
            y = struct.unpack("<f", struct.pack("<I", bits(c) + d))[0]
            xs += [y, -y]
    xs += [0.0, -0.0, 1e-30, -1e-30, 1e-8, -1e-8, 14.0, -14.0, 20.0, -20.0, 1e4, -1e4]
    xs = [f32(v) for v in xs]
    x = torch.tensor(xs, dtype=torch.float32)
    one = torch.ones_like(x)
    g32 = torch.ops.aten.gelu_backward(one, x)
    x64 = x.double()
    g64 = torch.ops.aten.gelu_backward(torch.ones_like(x64), x64)
    out = {
        "torch": torch.__version__,
        "x_bits": [bits(v) for v in x.tolist()],
        "torch_f32_bits": [bits(v) for v in g32.tolist()],
        "torch_f64": g64.tolist(),
    }
    with open(OUT, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print(f"wrote {OUT}: {len(xs)} inputs, torch {torch.__version__}")


if __name__ == "__main__":
    main()
