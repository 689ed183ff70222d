#!/usr/bin/env python3
"""Golden values for lockstep's 2-D pooling (forward and backward) from real PyTorch.

Writes tests/golden/tensor/pool.json; run from the repository root with torch installed:
    python3 tools/golden_pool.py
Inputs are a fixed formula (no RNG), so the file is the same on every run.
"""
import json, math, os
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def data(shape, phase):
    n = math.prod(shape)
    return torch.tensor([math.sin(i * 0.37 + phase) * 3 for i in range(n)], dtype=torch.float32).reshape(shape)


CASES = [
    # shape, kernel, stride, padding, dilation, ceil_mode, count_include_pad
    ((2, 3, 7, 9), (2, 2), (2, 2), (0, 0), (1, 1), False, True),
    ((1, 2, 8, 8), (3, 3), (2, 2), (1, 1), (1, 1), False, True),
    ((1, 2, 8, 8), (3, 3), (2, 2), (1, 1), (1, 1), False, False),
    ((2, 1, 9, 7), (3, 2), (2, 3), (1, 1), (1, 1), True, True),
    ((1, 1, 10, 10), (3, 3), (1, 1), (0, 0), (2, 2), False, True),
    ((1, 3, 5, 5), (5, 5), (1, 1), (2, 2), (1, 1), False, False),
]


def main():
    out = {"generator": "tools/golden_pool.py", "library": "torch " + torch.__version__, "cases": []}
    for k, (shape, ker, st, pad, dil, ceil, cip) in enumerate(CASES):
        x = data(shape, k).requires_grad_(True)
        y, idx = F.max_pool2d(x, ker, st, pad, dil, ceil_mode=ceil, return_indices=True)
        gy = data(y.shape, 100 + k)
        (gx,) = torch.autograd.grad(y, x, gy)
        case = {"shape": list(shape), "kernel": list(ker), "stride": list(st), "padding": list(pad),
                "dilation": list(dil), "ceil_mode": ceil, "count_include_pad": cip,
                "input": x.detach().flatten().tolist(), "grad_output_max": gy.flatten().tolist(),
                "max": y.detach().flatten().tolist(), "max_shape": list(y.shape),
                "max_indices": idx.flatten().tolist(), "max_grad_input": gx.flatten().tolist()}
        if dil == (1, 1):
            x2 = data(shape, k).requires_grad_(True)
            a = F.avg_pool2d(x2, ker, st, pad, ceil_mode=ceil, count_include_pad=cip)
            ga = data(a.shape, 200 + k)
            (gx2,) = torch.autograd.grad(a, x2, ga)
            case.update({"avg": a.detach().flatten().tolist(), "avg_shape": list(a.shape),
                         "grad_output_avg": ga.flatten().tolist(), "avg_grad_input": gx2.flatten().tolist()})
        out["cases"].append(case)
    adaptive = []
    for shape, osz in [((2, 3, 7, 9), (3, 4)), ((1, 2, 10, 5), (4, 5)), ((1, 1, 5, 5), (7, 3))]:
        x = data(shape, 7).requires_grad_(True)
        a = F.adaptive_avg_pool2d(x, osz)
        g = data(a.shape, 300)
        (gx,) = torch.autograd.grad(a, x, g)
        adaptive.append({"shape": list(shape), "output_size": list(osz), "input": x.detach().flatten().tolist(),
                         "out": a.detach().flatten().tolist(), "grad_output": g.flatten().tolist(),
                         "grad_input": gx.flatten().tolist()})
    out["adaptive"] = adaptive
    with open(os.path.join(ROOT, "tests", "golden", "tensor", "pool.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
