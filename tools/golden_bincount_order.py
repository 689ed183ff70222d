#!/usr/bin/env python3
"""Writes tests/golden/tensor/bincount_order.json: torch.bincount with float32 weights on inputs
large enough that lockstep's deterministic kernel splits the work (300,000 values, 1000 and 7
bins), at 1 thread, where PyTorch adds each bin's weights in index order. The inputs are drawn
from torch.manual_seed(seed) (randint, then randn), which lockstep's Generator reproduces, so
only the seeds and the outputs' bit patterns are stored (with input checksums).

usage: python3 tools/golden_bincount_order.py
"""
import json, os
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "tensor", "bincount_order.json")
torch.set_num_threads(1)
cases = []
for seed, n, bins in ((0, 300000, 1000), (1, 300000, 7)):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, bins, (n,), generator=g)
    w = torch.randn(n, generator=g)
    out = torch.bincount(x, w, bins)
    cases.append({
        "seed": seed, "n": n, "bins": bins,
        "x_sum": int(x.sum()), "w_bits_first": [int(v) for v in w[:4].view(torch.int32)],
        "out_bits": [int(v) & 0xFFFFFFFF for v in out.view(torch.int32)],
    })
with open(OUT, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {OUT}")
