#!/usr/bin/env python3
"""Golden values from real PyTorch (CPU) for issue 28's tensor primitives.

Writes tests/golden/transformer_prims.json, read by
crates/lockstep-tensor/tests/transformer_prims.rs and crates/lockstep-nn/tests/transformer_prims.rs.
Run from the repository root:

    python3 tools/golden_transformer_prims.py

Inputs are written with every case (the Rust side needs no PyTorch RNG). Floats are written with
repr (exact for f64; f32 values are exact as f64); NaN and infinities as "nan", "inf", "-inf".
The topk cases are tie- and NaN-heavy on purpose: PyTorch documents no order of equal values,
so the golden file pins what torch's CPU kernel does (the version is recorded).
"""

import json
import math
import os
import random

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "transformer_prims.json")
DT = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "bool",
}


def enc(t):
    out = []
    for v in t.reshape(-1).tolist():
        if isinstance(v, float) and not math.isfinite(v):
            out.append("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
        else:
            out.append(v)
    return out


def tens(t):
    t = t.detach()
    return {"dtype": DT[t.dtype], "shape": list(t.shape), "data": enc(t)}


gen = torch.Generator().manual_seed(28)
rnd = random.Random(28)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)


def ties(shape, levels, dtype, nan=0.0):
    """Values from a few levels (many ties), some NaN for float dtypes."""
    n = math.prod(shape)
    v = [float(rnd.randrange(levels)) - levels // 2 for _ in range(n)]
    if dtype.is_floating_point:
        for i in range(n):
            if rnd.random() < nan:
                v[i] = float("nan")
    if dtype == torch.uint8:
        v = [abs(x) % 256 for x in v]
    return torch.tensor(v, dtype=torch.float64).to(dtype).reshape(shape)


# Comparisons: mixed dtypes (PyTorch's promotion), broadcasting, 0-dim operands, NaN.
compare = []
nan = float("nan")
pairs = [
    (torch.tensor([[0.1, nan, -1.0, 2.5]], dtype=torch.float32), torch.tensor([[0.1], [nan], [2.5]], dtype=torch.float32)),
    (torch.tensor([0.1, 0.5, nan, 3.0], dtype=torch.float32), torch.tensor([0.1, 0.5, 1.0, 3.0], dtype=torch.float64)),
    (torch.tensor([16777217, 3, -2, 0], dtype=torch.int64), torch.tensor([16777216.0, 3.0, -1.5, 0.0], dtype=torch.float32)),
    (torch.tensor([1, 200, 3], dtype=torch.uint8), torch.tensor([1, -200, 4], dtype=torch.int64)),
    (torch.tensor([True, False, True]), torch.tensor([0.5, 0.0, 1.0], dtype=torch.float32)),
    (torch.tensor([True, False, True]), torch.tensor([1, 0, 0], dtype=torch.uint8)),
    (torch.tensor([0.1, 0.2, 0.30000001], dtype=torch.float32), torch.tensor(0.2, dtype=torch.float64)),
    (torch.tensor([1, 2, 3], dtype=torch.int64), torch.tensor(2.5, dtype=torch.float64)),
    (torch.tensor(2, dtype=torch.int64), torch.tensor([1.5, 2.0, 2.5], dtype=torch.float64)),
    (torch.tensor([1.0, 2.0], dtype=torch.float32), torch.tensor(2, dtype=torch.int64)),
]
for a, b in pairs:
    for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
        compare.append({"op": op, "a": tens(a), "b": tens(b), "out": tens(getattr(torch, op)(a, b))})
compare_scalar = []
scalar_inputs = [
    torch.tensor([0.1, 0.2, nan, -0.0, 1e30], dtype=torch.float32),
    torch.tensor([0.1, 0.2, nan, -0.0, 1e30], dtype=torch.float64),
    torch.tensor([16777217, 16777216, 2, -3, 0], dtype=torch.int64),
    torch.tensor([0, 1, 2, 255], dtype=torch.uint8),
    torch.tensor([True, False]),
]
for a in scalar_inputs:
    for s in [0.1, 16777216.0, 2.0, -0.0, 0.5, float("inf"), float("nan")]:
        for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
            compare_scalar.append({"op": op, "a": tens(a), "scalar": enc(torch.tensor([s], dtype=torch.float64))[0], "out": tens(getattr(torch, op)(a, s))})

# masked_fill (out of place: self and mask broadcast), and its gradient.
masked_fill = []
for shape, mshape, value, dtype in [
    ([2, 3, 4], [3, 4], float("-inf"), torch.float32),
    ([2, 3, 4], [2, 1, 4], -1e9, torch.float32),
    ([4], [3, 4], 5.0, torch.float32),
    ([3, 4], [3, 4], 0.1, torch.float64),
    ([3, 4], [4], 2.7, torch.int64),
    ([2, 2], [2, 2], 0.5, torch.bool),
]:
    x = ties(shape, 7, dtype) if dtype != torch.bool else torch.tensor([[True, False], [False, True]])
    m = torch.rand(*mshape, generator=gen) < 0.4
    case = {"x": tens(x), "mask": tens(m), "value": enc(torch.tensor([value], dtype=torch.float64))[0]}
    case["out"] = tens(x.masked_fill(m, value))
    if dtype.is_floating_point:
        xv = x.clone().requires_grad_(True)
        y = xv.masked_fill(m, value)
        g = randn(*y.shape, dtype=dtype)
        y.backward(g)
        case["grad_out"] = tens(g)
        case["grad_x"] = tens(xv.grad)
    masked_fill.append(case)

# tril / triu over the last two dimensions.
triangles = []
for shape, dtype in [([4, 5], torch.float32), ([2, 3, 5], torch.float64), ([5, 3], torch.int64), ([2, 1, 3, 3], torch.bool), ([0, 3], torch.float32)]:
    x = (ties(shape, 9, dtype) if dtype != torch.bool else torch.rand(*shape, generator=gen) < 0.7)
    for d in [-6, -2, -1, 0, 1, 2, 7]:
        triangles.append({"x": tens(x), "diagonal": d, "tril": tens(torch.tril(x, d)), "triu": tens(torch.triu(x, d))})

# topk: ties and NaN, both code paths (64·k ≤ n: partial_sort; else nth_element + sort).
topk = []
for it in range(240):
    dtype = [torch.float32, torch.float64, torch.int64, torch.uint8][it % 4]
    n = rnd.choice([1, 2, 3, 4, 5, 8, 16, 17, 20, 33, 64, 65, 100, 200, 700])
    rows = rnd.choice([1, 2, 3])
    levels = rnd.choice([1, 2, 3, 5, 50, 100000])
    shape = [rows, n] if rnd.random() < 0.7 else [n, rows]
    dim = 1 if shape[1] == n and (shape[0] != n or rnd.random() < 0.5) else 0
    x = ties(shape, levels, dtype, nan=0.1 if rnd.random() < 0.4 else 0.0)
    k = rnd.randrange(0, n + 1) if rnd.random() < 0.5 else rnd.randrange(0, min(n, 12) + 1)
    largest, sorted_ = rnd.random() < 0.5, rnd.random() < 0.7
    v, i = torch.topk(x, k, dim=dim, largest=largest, sorted=sorted_)
    topk.append({"x": tens(x), "k": k, "dim": dim, "largest": largest, "sorted": sorted_, "values": tens(v), "indices": tens(i)})

# split / split_with_sizes: the pieces' shapes.
split = []
for n, size in [(10, 3), (9, 3), (2, 5), (0, 5), (7, 7), (7, 1)]:
    split.append({"n": n, "split_size": size, "lengths": [p.shape[0] for p in torch.split(torch.zeros(n), size)]})

# 4-D batched matmul and its gradients: (B, H, T, d) @ (B, H, d, T), and with the right operand
# a transpose(-2, -1) view of (B, H, T, d).
matmul = []
for B, H, T, d, tr in [(2, 3, 5, 4, False), (2, 3, 5, 4, True), (1, 2, 7, 8, True), (2, 1, 3, 16, False)]:
    a = randn(B, H, T, d).requires_grad_(True)
    b0 = randn(B, H, T, d) if tr else randn(B, H, d, T)
    b = b0.clone().requires_grad_(True)
    y = a @ (b.transpose(-2, -1) if tr else b)
    g = randn(*y.shape)
    y.backward(g)
    matmul.append({"a": tens(a), "b": tens(b0), "transpose_b": tr, "y": tens(y), "grad_out": tens(g), "grad_a": tens(a.grad), "grad_b": tens(b.grad)})

# arange as GPT uses it (positions), and a float one.
arange = [
    {"start": 0, "end": 7, "step": 1, "dtype": "i64", "out": tens(torch.arange(0, 7, dtype=torch.long))},
    {"start": 0, "end": 64, "step": 1, "dtype": "i64", "out": tens(torch.arange(0, 64, dtype=torch.long))},
    {"start": 0.0, "end": 1.0, "step": 0.1, "dtype": "f32", "out": tens(torch.arange(0.0, 1.0, 0.1, dtype=torch.float32))},
]

# LayerNorm(bias=False): forward and gradients of the input and the weight.
layer_norm = []
for shape, ns in [([2, 3, 8], [8]), ([4, 6], [6])]:
    ln = torch.nn.LayerNorm(ns, bias=False)
    with torch.no_grad():
        ln.weight.copy_(randn(*ns))
    x = randn(*shape).requires_grad_(True)
    y = ln(x)
    g = randn(*y.shape)
    y.backward(g)
    layer_norm.append({"normalized_shape": ns, "state_dict": list(ln.state_dict().keys()), "weight": tens(ln.weight), "x": tens(x), "y": tens(y), "grad_out": tens(g), "grad_x": tens(x.grad), "grad_weight": tens(ln.weight.grad)})

out = {
    "torch": torch.__version__,
    "compare": compare,
    "compare_scalar": compare_scalar,
    "masked_fill": masked_fill,
    "triangles": triangles,
    "topk": topk,
    "split": split,
    "matmul": matmul,
    "arange": arange,
    "layer_norm": layer_norm,
}
with open(OUT, "w") as f:
    json.dump(out, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {OUT}: {len(compare) + len(compare_scalar)} comparisons, {len(topk)} topk cases")
