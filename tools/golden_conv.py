#!/usr/bin/env python3
"""Golden values for lockstep's conv2d and its two backward primitives, from real PyTorch.

Writes tests/golden/tensor/conv.json; run from the repository root with torch installed:
    python3 tools/golden_conv.py
Inputs are a fixed formula (no RNG), so the file is the same on every run. Summation orders
differ between PyTorch (MKL-DNN / its own GEMM) and lockstep, so the test compares with a
tolerance relative to the magnitude of the terms, not bits.
"""
import json, math, os
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def data(shape, phase):
    n = math.prod(shape)
    return torch.tensor([math.sin(i * 0.61 + phase) for i in range(n)], dtype=torch.float32).reshape(shape)


CASES = [
    # input, weight, stride, padding, dilation, groups, bias
    ((2, 3, 9, 8), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, True),
    ((1, 4, 10, 7), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2, False),
    ((2, 5, 6, 6), (7, 5, 1, 1), (1, 1), (0, 0), (1, 1), 1, True),
    ((1, 6, 8, 8), (6, 1, 3, 3), (1, 1), (1, 1), (1, 1), 6, True),
    ((3, 2, 5, 11), (3, 2, 5, 3), (2, 3), (2, 1), (1, 1), 1, True),
    # >= 16 channels, 3x3, stride 1: lockstep's heuristic runs Winograd F(4x4, 3x3) here.
    ((1, 16, 6, 7), (16, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1, True),
    ((1, 17, 5, 8), (16, 17, 3, 3), (1, 1), (2, 0), (1, 1), 1, False),
]


def main():
    cases = []
    torch.set_num_threads(1)
    for k, (xs, ws, st, pad, dil, grp, has_bias) in enumerate(CASES):
        x = data(xs, k).requires_grad_(True)
        w = data(ws, 10 + k).requires_grad_(True)
        b = data((ws[0],), 20 + k) if has_bias else None
        y = F.conv2d(x, w, b, st, pad, dil, grp)
        gy = data(y.shape, 30 + k)
        gx, gw = torch.autograd.grad(y, (x, w), gy)
        cases.append({
            "input_shape": list(xs), "weight_shape": list(ws), "stride": list(st), "padding": list(pad),
            "dilation": list(dil), "groups": grp,
            "input": x.detach().flatten().tolist(), "weight": w.detach().flatten().tolist(),
            "bias": b.flatten().tolist() if has_bias else None,
            "output_shape": list(y.shape), "output": y.detach().flatten().tolist(),
            "grad_output": gy.flatten().tolist(),
            "grad_input": gx.flatten().tolist(), "grad_weight": gw.flatten().tolist(),
        })
    out = {"generator": "tools/golden_conv.py", "library": "torch " + torch.__version__, "cases": cases}
    with open(os.path.join(ROOT, "tests", "golden", "tensor", "conv.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
