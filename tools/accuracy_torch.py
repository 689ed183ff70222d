#!/usr/bin/env python3
"""PyTorch's rounding error on lockstep's accuracy cases (issue 15, "Accuracy").

Writes tests/golden/tensor/accuracy.json, read by crates/lockstep-tensor/tests/accuracy.rs and
crates/lockstep-tensor/tests/accuracy_conv.rs. Run from the repository root:

    python3 tools/accuracy_torch.py

Each case's data comes from a counter-based generator that both sides compute exactly (no
PyTorch RNG): splitmix64 of the element index and the case's seed, the top 24 bits as a
uniform in [0, 1) (exact in float32); "normal" data is the sum of four such uniforms minus 2,
added in float64 (exact) and rounded once to float32. PyTorch runs the op in float32 on one
thread; the truth is the same op in float64 on the float32 inputs. The error recorded is the
normwise relative error max|y - ref| / max|ref| (one number per case), which the Rust tests
compare with their own under a bound stated beside it.
"""

import json
import os

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "tensor", "accuracy.json")
MASK = (1 << 64) - 1


def splitmix64(z):
    """Vectorised splitmix64 finaliser of uint64 array `z` (wrapping arithmetic)."""
    z = (z + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(MASK)
    z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(MASK)
    z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(MASK)
    return z ^ (z >> np.uint64(31))


def uniform(seed, n):
    """float64 values k * 2^-24 (exact in float32), k from the top 24 bits."""
    i = np.arange(n, dtype=np.uint64) + np.uint64(seed) * np.uint64(1 << 40)
    with np.errstate(over="ignore"):
        z = splitmix64(i)
    return (z >> np.uint64(40)).astype(np.float64) * 2.0**-24


def data(kind, seed, shape):
    n = int(np.prod(shape))
    if kind == "uniform":
        v = uniform(seed, n)
    elif kind == "signed":  # uniform in [-10, 10)
        v = uniform(seed, n) * 20.0 - 10.0
    elif kind == "normal":
        v = sum(uniform(seed * 4 + j, n) for j in range(4)) - 2.0
    elif kind == "offset":  # mean 10, for var/std
        v = sum(uniform(seed * 4 + j, n) for j in range(4)) + 8.0
    else:
        raise ValueError(kind)
    return torch.from_numpy(v.astype(np.float32).reshape(shape))


CASES = [
    # name, op, data kind, seed, shape, dim
    ("sum_uniform_1M", "sum", "uniform", 1, [1 << 20], None),
    ("sum_normal_4M", "sum", "normal", 2, [4 << 20], None),
    ("sum_dim_outer_1000003x3", "sum_dim", "uniform", 3, [1000003, 3], 0),
    ("sum_dim_inner_1000x4096", "sum_dim", "uniform", 4, [1000, 4096], 1),
    ("mean_dim_outer_1000003x3", "mean_dim", "uniform", 3, [1000003, 3], 0),
    ("mean_uniform_1M", "mean", "uniform", 1, [1 << 20], None),
    ("cumsum_uniform_1M", "cumsum", "uniform", 5, [1 << 20], 0),
    ("cumsum_outer_4096x256", "cumsum", "uniform", 6, [4096, 256], 0),
    ("softmax_256x4096", "softmax", "signed", 7, [256, 4096], 1),
    ("log_softmax_256x4096", "log_softmax", "signed", 7, [256, 4096], 1),
    ("logsumexp_256x4096", "logsumexp", "signed", 7, [256, 4096], 1),
    ("var_offset_1024x4096", "var", "offset", 8, [1024, 4096], 1),
    ("std_offset_1024x4096", "std", "offset", 8, [1024, 4096], 1),
    ("var_all_offset_4M", "var", "offset", 13, [4 << 20], None),
    ("std_all_offset_4M", "std", "offset", 13, [4 << 20], None),
    # conv2d: x [4, 16, 32, 32] "signed"/10, w [32, 16, 3, 3] "signed"/10, padding 1
    ("conv2d_3x3_16to32", "conv2d", "signed", 9, [4, 16, 32, 32], None),
    ("conv2d_1x1_64to64", "conv2d", "signed", 10, [2, 64, 16, 16], None),
]

CONV_W = {"conv2d_3x3_16to32": (11, [32, 16, 3, 3], 1), "conv2d_1x1_64to64": (12, [64, 64, 1, 1], 0)}


def run(op, x, dim, extra=None):
    if op == "sum":
        return x.sum()
    if op == "sum_dim":
        return x.sum(dim)
    if op == "mean_dim":
        return x.mean(dim)
    if op == "mean":
        return x.mean()
    if op == "cumsum":
        return x.cumsum(dim)
    if op == "softmax":
        return torch.softmax(x, dim)
    if op == "log_softmax":
        return torch.log_softmax(x, dim)
    if op == "logsumexp":
        return torch.logsumexp(x, dim)
    if op == "var":
        return x.var() if dim is None else x.var(dim)
    if op == "std":
        return x.std() if dim is None else x.std(dim)
    if op == "conv2d":
        w, pad = extra
        return torch.nn.functional.conv2d(x, w, padding=pad)
    raise ValueError(op)


def main():
    torch.set_num_threads(1)
    cases = []
    for name, op, kind, seed, shape, dim in CASES:
        x = data(kind, seed, shape)
        extra = extra64 = None
        if op == "conv2d":
            x = x / 10
            wseed, wshape, pad = CONV_W[name]
            w = data(kind, wseed, wshape) / 10
            extra, extra64 = (w, pad), (w.double(), pad)
        y = run(op, x, dim, extra)
        ref = run(op, x.double(), dim, extra64)
        err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
        case = {"name": name, "op": op, "data": kind, "seed": seed, "shape": shape, "dim": dim,
                "torch_error": err}
        if op == "conv2d":
            case["weight_seed"], case["weight_shape"], case["padding"] = CONV_W[name]
        cases.append(case)
        print(f"{name:<28} torch rel. error {err:.3e}")
    doc = {
        "generator": "tools/accuracy_torch.py",
        "torch": torch.__version__,
        "threads": 1,
        "error": "max|y - ref| / max|ref|, ref = the op in float64 on the float32 inputs",
        "cases": cases,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
