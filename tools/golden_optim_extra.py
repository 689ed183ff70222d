#!/usr/bin/env python3
"""More golden values from real PyTorch for lockstep's optimizers, schedulers and gradient
clipping (tests/golden/train/optim_extra.json), covering what tools/golden_optim.py does not:

  optimizers  `maximize=True` (SGD with momentum and weight decay, Adam, AdamW with amsgrad),
              float64 parameters (SGD nesterov, Adam amsgrad with weight decay, AdamW), and
              a 30-step Adam run (later bias corrections). Same layout as optim.json: four
              parameters of sizes 1, 10, 37, 100, initial values and gradients from a seeded
              torch.Generator, gradients fed in (p.grad = g) before each opt.step().
  schedulers  MultiStepLR with repeated milestones (gamma**2, gamma**3), LinearLR between two
              factors below 1, CosineAnnealingLR and StepLR over 25 steps.
  clip        clip_grad_norm_ over 20 gradients of many sizes (every tail length of the CPU
              norm kernel, a 2-D gradient, 1000 elements) for norm_type 2, inf, 1 and 3; a single
              gradient (its norm is |x|); float64 gradients; clip_grad_value_ in float32 and
              float64.

Run from the repository root with torch installed (CPU only):

    python3 tools/golden_optim_extra.py

The script re-executes itself with MKL_ENABLE_INSTRUCTIONS=AVX2, under which float32 torch.sqrt
on CPU is correctly rounded (MKL's AVX-512 vector sqrt is not; see tools/golden_optim.py), and
checks that it is. MKL's float64 sqrt is not correctly rounded under any setting (recorded under
machine.sqrt_misrounded), so the float64 Adam/AdamW cases are compared within the bound that
follows from it, not bit for bit (see crates/lockstep-nn/tests/optim.rs). All floats are exact (float32/float64 values as Python floats). Takes a few
seconds.
"""
import json
import os
import platform
import sys

if os.environ.get("MKL_ENABLE_INSTRUCTIONS") != "AVX2":
    os.environ["MKL_ENABLE_INSTRUCTIONS"] = "AVX2"
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:])

os.environ["CUDA_VISIBLE_DEVICES"] = ""
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "optim_extra.json")
SIZES = [1, 10, 37, 100]


def T(t):
    t = t.detach()
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "values": t.contiguous().reshape(-1).tolist()}


# (optimizer, kwargs, dtype, steps)
OPTIMIZERS = [
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01, maximize=True), torch.float32, 5),
    ("SGD", dict(lr=0.1, maximize=True), torch.float32, 5),
    ("Adam", dict(lr=0.01, maximize=True), torch.float32, 5),
    ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True), torch.float32, 5),
    ("Adam", dict(lr=0.003, betas=(0.5, 0.9), weight_decay=0.001), torch.float32, 30),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4), torch.float64, 5),
    ("SGD", dict(lr=0.05, momentum=0.8, dampening=0.3), torch.float64, 5),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.01), torch.float64, 5),
    ("AdamW", dict(lr=0.01, weight_decay=0.05), torch.float64, 5),
]


def optimizer_section():
    cases = []
    for k, (cls, kw, dtype, steps) in enumerate(OPTIMIZERS):
        g = torch.Generator().manual_seed(100 + k)
        init = [torch.randn(n, generator=g, dtype=dtype) for n in SIZES]
        grads = [[torch.randn(n, generator=g, dtype=dtype) * 0.1 for n in SIZES]
                 for _ in range(steps)]
        params = [p.clone().requires_grad_(True) for p in init]
        opt = getattr(torch.optim, cls)(params, **kw, foreach=False)
        after = []
        for s in range(steps):
            for p, gr in zip(params, grads[s]):
                p.grad = gr.clone()
            opt.step()
            after.append([T(p) for p in params])
        state = [{key: (T(v) if isinstance(v, torch.Tensor) else v)
                  for key, v in opt.state[p].items()} for p in params]
        cases.append({
            "optimizer": cls,
            "call": f"torch.optim.{cls}(params, foreach=False, "
                    + ", ".join(f"{a}={b}" for a, b in kw.items()) + f")  # {dtype}",
            "kwargs": {a: (list(b) if isinstance(b, tuple) else b) for a, b in kw.items()},
            "grad_none_at": None,
            "init": [T(p) for p in init],
            "grads": [[T(x) for x in step] for step in grads],
            "params_after_step": after,
            "final_state": state,
        })
    return cases


SCHEDULERS = [
    ("MultiStepLR(opt, milestones=[2, 2, 5, 5, 5, 9], gamma=0.5)", 12),
    ("MultiStepLR(opt, milestones=[1, 3, 3], gamma=0.3)", 12),
    ("LinearLR(opt, start_factor=0.5, end_factor=0.7, total_iters=3)", 12),
    ("LinearLR(opt, start_factor=0.9, end_factor=0.0, total_iters=7)", 12),
    ("CosineAnnealingLR(opt, T_max=5, eta_min=0.01)", 25),
    ("CosineAnnealingLR(opt, T_max=7)", 25),
    ("StepLR(opt, step_size=3, gamma=0.7)", 25),
]


def scheduler_section():
    cases = []
    for ctor, steps in SCHEDULERS:
        for base in (0.1, 0.03):
            p = torch.zeros(1, requires_grad=True)
            opt = torch.optim.SGD([p], lr=base)
            sched = eval("torch.optim.lr_scheduler." + ctor, {"torch": torch, "opt": opt})
            lrs = [opt.param_groups[0]["lr"]]
            for _ in range(steps):
                opt.step()
                sched.step()
                lrs.append(opt.param_groups[0]["lr"])
                assert sched.get_last_lr()[0] == lrs[-1]
            cases.append({"scheduler": ctor, "base_lr": base, "lr": lrs})
    return cases


CLIP_SHAPES = [[2], [3], [4], [5], [6], [7], [8], [9], [12], [15], [16], [17], [23], [31], [33],
               [64], [100], [257], [1000], [16, 33]]


def clip_group(sizes, dtype, seed, norm_types, max_norms, value):
    g = torch.Generator().manual_seed(seed)
    grads = [torch.randn(*s, generator=g, dtype=dtype) * 0.3 for s in sizes]

    def fresh():
        ps = [torch.zeros(*s, dtype=dtype, requires_grad=True) for s in sizes]
        for p, gr in zip(ps, grads):
            p.grad = gr.clone()
        return ps

    cases = []
    for max_norm in max_norms:
        for norm_type in norm_types:
            ps = fresh()
            total = nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
            ps2 = fresh()
            total2 = nn.utils.clip_grad_norm_(ps2, max_norm, norm_type=norm_type, foreach=False)
            assert torch.equal(total, total2)
            assert all(torch.equal(a.grad, b.grad) for a, b in zip(ps, ps2))
            cases.append({"fn": "clip_grad_norm_", "max_norm": max_norm,
                          "norm_type": "inf" if norm_type == float("inf") else norm_type,
                          "total_norm": T(total), "clipped": [T(p.grad) for p in ps]})
    ps = fresh()
    nn.utils.clip_grad_value_(ps, value)
    cases.append({"fn": "clip_grad_value_", "clip_value": value,
                  "clipped": [T(p.grad) for p in ps]})
    return {"sizes": sizes, "grads": [T(x) for x in grads], "cases": cases}


def clip_section():
    inf = float("inf")
    return [
        clip_group(CLIP_SHAPES, torch.float32, 5, [2.0, inf, 1.0, 3.0], [0.5, 1000.0], 0.05),
        clip_group([[37]], torch.float32, 6, [2.0, inf], [0.5], 0.2),
        clip_group(CLIP_SHAPES, torch.float64, 7, [2.0, inf], [0.5, 1000.0], 0.05),
    ]


def sqrt_misrounded():
    """How often torch.sqrt differs from the correctly rounded square root (numpy's) here:
    0 for float32 under MKL_ENABLE_INSTRUCTIONS=AVX2; MKL's float64 vector sqrt is not
    correctly rounded on any instruction set (about 1.4% of results 1 ulp off with AVX2)."""
    g = torch.Generator().manual_seed(5)
    x = torch.rand(100000, generator=g) * 4 + 0.25
    y = torch.rand(100000, generator=g, dtype=torch.float64) * 4 + 0.25
    return {"float32_per_100000": int((x.sqrt().numpy() != np.sqrt(x.numpy())).sum()),
            "float64_per_100000": int((y.sqrt().numpy() != np.sqrt(y.numpy())).sum())}


def main():
    torch.set_num_threads(1)
    bad = sqrt_misrounded()
    assert bad["float32_per_100000"] == 0, f"float32 torch.sqrt is not correctly rounded: {bad}"
    out = {
        "generator": "tools/golden_optim_extra.py",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": {"cpu_capability": torch.backends.cpu.get_cpu_capability(),
                    "mkl_enable_instructions": os.environ.get("MKL_ENABLE_INSTRUCTIONS"),
                    "sqrt_misrounded": bad},
        "optimizers": optimizer_section(),
        "schedulers": scheduler_section(),
        "clip": clip_section(),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
