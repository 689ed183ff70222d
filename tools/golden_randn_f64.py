#!/usr/bin/env python3
"""Golden values for lockstep's torch-compatible `randn`/`normal_` in float64 (16-block path,
whose transform calls glibc's log/cos/sin): SHA-256 of the little-endian output bytes of
`torch.randn` / `Tensor.normal_` from real PyTorch, for several seeds, sizes and mean/std.

Run on Linux x86-64 with glibc >= 2.28 on a CPU with FMA (the bits lockstep reproduces):
    python3 tools/golden_randn_f64.py > crates/lockstep-rng/tests/golden/torch_randn_f64.json
"""
import hashlib
import json
import platform

import torch

torch.set_num_threads(1)
cases = []
for seed, n, mean, std in [
    (0, 16, 0.0, 1.0),
    (1, 1000, 0.0, 1.0),
    (42, 100_003, 0.0, 1.0),
    (2**40 + 7, 1_000_000, 0.0, 1.0),
    (123, 65_537, -3.5, 0.25),
    (7, 4096, 1e3, 1e-3),
]:
    torch.manual_seed(seed)
    x = torch.empty(n, dtype=torch.float64).normal_(mean, std)
    b = x.numpy().astype("<f8").tobytes()
    cases.append({
        "seed": seed, "n": n, "mean": mean, "std": std,
        "sha256": hashlib.sha256(b).hexdigest(),
        "first": [float(v) for v in x[:4]],
        "last": float(x[-1]),
    })
print(json.dumps({
    "torch": torch.__version__,
    "libc": " ".join(platform.libc_ver()),
    "cases": cases,
}, indent=1))
