#!/usr/bin/env python3
"""Golden values from real PyTorch for lockstep's Adadelta, Adagrad and RMSprop optimizers and
the ExponentialLR, LambdaLR, OneCycleLR, ReduceLROnPlateau and SequentialLR schedulers
(tests/golden/train/optim_more.json).

  optimizers  same layout as tools/golden_optim_extra.py: four parameters of sizes 1, 10, 37,
              100, initial values and gradients from a seeded torch.Generator, gradients fed in
              (p.grad = g, or None at `grad_none_at` = [step, param]) before each opt.step()
              (foreach=False: PyTorch's single-tensor formulas).
  schedulers  the learning rate after construction and after each of many steps, for an SGD
              optimizer of base lr 0.1 or 0.03. LambdaLR's lambdas are named (LAMBDAS below;
              the Rust test defines the same functions). ReduceLROnPlateau is fed the metrics
              recorded with the case.

Run from the repository root with torch installed (CPU only):

    python3 tools/golden_optim_more.py

Like tools/golden_optim_extra.py it re-executes itself with MKL_ENABLE_INSTRUCTIONS=AVX2. All
three optimizers take a square root, and the torch build that recorded the committed file
(2.15.0+cu132, see machine.sqrt_misrounded) has a CPU torch.sqrt that is not correctly rounded in
float32 (about 19% of results) nor float64 (about 1.4%) whatever the setting; lockstep's is
correctly rounded. So the tests compare parameters and sqrt-dependent state within a bound that
follows from 1-ulp square roots, and the sqrt-free state (`step`, and `square_avg`, `sum`,
`grad_avg` when there is no weight decay) bit for bit. All floats are exact (float32/float64
values as Python floats).
"""
import json
import math
import os
import platform
import sys

if os.environ.get("MKL_ENABLE_INSTRUCTIONS") != "AVX2":
    os.environ["MKL_ENABLE_INSTRUCTIONS"] = "AVX2"
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:])

os.environ["CUDA_VISIBLE_DEVICES"] = ""
import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "optim_more.json")
SIZES = [1, 10, 37, 100]
F32, F64 = torch.float32, torch.float64


def T(t):
    t = t.detach()
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "values": t.contiguous().reshape(-1).tolist()}


# (optimizer, kwargs, dtype, steps, grad_none_at)
OPTIMIZERS = [
    ("Adadelta", dict(), F32, 6, None),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.01, maximize=True), F32, 6, None),
    ("Adadelta", dict(lr=2.0, rho=0.95), F32, 6, [2, 1]),
    ("Adagrad", dict(), F32, 6, None),
    ("Adagrad", dict(lr=0.05, lr_decay=0.1, weight_decay=0.01, initial_accumulator_value=0.1,
                     eps=1e-8), F32, 6, [3, 2]),
    ("Adagrad", dict(lr=0.1, maximize=True), F32, 6, None),
    ("RMSprop", dict(), F32, 6, None),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.01), F32, 6, None),
    ("RMSprop", dict(lr=0.003, alpha=0.9, centered=True, maximize=True), F32, 6, [1, 3]),
    ("RMSprop", dict(lr=0.02, momentum=0.5, eps=1e-6), F32, 6, None),
    ("Adadelta", dict(lr=0.7, weight_decay=0.02), F64, 5, None),
    ("Adagrad", dict(lr=0.05, lr_decay=0.01, initial_accumulator_value=0.2), F64, 5, None),
    ("RMSprop", dict(lr=0.01, momentum=0.8, centered=True), F64, 5, None),
    ("RMSprop", dict(lr=0.01, weight_decay=0.1), F64, 5, None),
]


def optimizer_section():
    cases = []
    for k, (cls, kw, dtype, steps, none_at) in enumerate(OPTIMIZERS):
        g = torch.Generator().manual_seed(300 + k)
        init = [torch.randn(n, generator=g, dtype=dtype) for n in SIZES]
        grads = [[torch.randn(n, generator=g, dtype=dtype) * 0.1 for n in SIZES]
                 for _ in range(steps)]
        params = [p.clone().requires_grad_(True) for p in init]
        opt = getattr(torch.optim, cls)(params, **kw, foreach=False)
        after = []
        for s in range(steps):
            for j, (p, gr) in enumerate(zip(params, grads[s])):
                p.grad = None if none_at == [s, j] else gr.clone()
            opt.step()
            after.append([T(p) for p in params])
        state = [{key: (T(v) if isinstance(v, torch.Tensor) else v)
                  for key, v in opt.state[p].items()} for p in params]
        cases.append({
            "optimizer": cls,
            "dtype": str(dtype).replace("torch.", ""),
            "call": f"torch.optim.{cls}(params, foreach=False, "
                    + ", ".join(f"{a}={b}" for a, b in kw.items()) + f")  # {dtype}",
            "kwargs": kw,
            "grad_none_at": none_at,
            "init": [T(p) for p in init],
            "grads": [[T(x) for x in step] for step in grads],
            "params_after_step": after,
            "final_state": state,
        })
    return cases


# LambdaLR's lambdas, by name (the Rust test defines the same).
LAMBDAS = {
    "inv": lambda e: 1.0 / (1.0 + e),
    "warmup": lambda e: (e + 1) / 5 if e < 5 else 0.5,
    "lin": lambda e: 1.0 - e / 40.0,
}

SCHEDULERS = [
    ("ExponentialLR(opt, gamma=0.9)", 40),
    ("ExponentialLR(opt, gamma=0.97)", 40),
    ("LambdaLR(opt, lr_lambda=inv)", 30),
    ("LambdaLR(opt, lr_lambda=warmup)", 30),
    ("LambdaLR(opt, lr_lambda=lin)", 30),
    ("OneCycleLR(opt, max_lr=1.0, total_steps=50, cycle_momentum=False)", 49),
    ("OneCycleLR(opt, max_lr=0.5, total_steps=40, pct_start=0.25, anneal_strategy='linear', "
     "cycle_momentum=False)", 39),
    ("OneCycleLR(opt, max_lr=0.2, total_steps=60, three_phase=True, div_factor=10.0, "
     "final_div_factor=100.0, cycle_momentum=False)", 59),
    ("OneCycleLR(opt, max_lr=0.3, total_steps=45, pct_start=0.4, anneal_strategy='linear', "
     "three_phase=True, cycle_momentum=False)", 44),
    ("SequentialLR(opt, schedulers=[LinearLR(opt, start_factor=0.1, total_iters=4), "
     "ExponentialLR(opt, gamma=0.9)], milestones=[5])", 30),
    ("SequentialLR(opt, schedulers=[ConstantLR(opt, factor=0.5, total_iters=3), "
     "StepLR(opt, step_size=4, gamma=0.5), CosineAnnealingLR(opt, T_max=8)], "
     "milestones=[4, 12])", 30),
]

PLATEAU = [
    "ReduceLROnPlateau(opt)",
    "ReduceLROnPlateau(opt, mode='max', factor=0.5, patience=2, threshold=0.01)",
    "ReduceLROnPlateau(opt, factor=0.3, patience=1, threshold=0.05, threshold_mode='abs', "
    "cooldown=2, min_lr=0.001)",
    "ReduceLROnPlateau(opt, mode='max', factor=0.7, patience=0, threshold_mode='abs', "
    "threshold=0.0, eps=0.01)",
    "ReduceLROnPlateau(opt, factor=0.9, patience=3, cooldown=1, min_lr=0.02)",
]


def scheduler_section():
    env = {"torch": torch}
    env.update(LAMBDAS)
    for n in ["ExponentialLR", "LambdaLR", "OneCycleLR", "SequentialLR", "LinearLR",
              "ConstantLR", "StepLR", "CosineAnnealingLR", "ReduceLROnPlateau"]:
        env[n] = getattr(torch.optim.lr_scheduler, n)
    cases = []
    for ctor, steps in SCHEDULERS:
        for base in (0.1, 0.03):
            p = torch.zeros(1, requires_grad=True)
            opt = torch.optim.SGD([p], lr=base)
            sched = eval(ctor, dict(env, opt=opt))
            lrs = [opt.param_groups[0]["lr"]]
            for _ in range(steps):
                opt.step()
                sched.step()
                lrs.append(opt.param_groups[0]["lr"])
                assert sched.get_last_lr()[0] == lrs[-1]
            cases.append({"scheduler": ctor, "base_lr": base, "lr": lrs})
    plateau = []
    g = np.random.default_rng(7)
    for k, ctor in enumerate(PLATEAU):
        # A noisy, mostly flat metric, with plateaus and a few improvements.
        metrics = [float(x) for x in (1.0 / (1 + 0.1 * np.arange(60)) * (k % 2 * 2 - 1) * -1
                                       + g.normal(0, 0.02, 60)).round(3)]
        for base in (0.1, 0.03):
            p = torch.zeros(1, requires_grad=True)
            opt = torch.optim.SGD([p], lr=base)
            sched = eval(ctor, dict(env, opt=opt))
            lrs = [opt.param_groups[0]["lr"]]
            for m in metrics:
                opt.step()
                sched.step(m)
                lrs.append(opt.param_groups[0]["lr"])
            plateau.append({"scheduler": ctor, "base_lr": base, "metrics": metrics, "lr": lrs})
    return cases, plateau


def sqrt_misrounded():
    g = torch.Generator().manual_seed(5)
    x = torch.rand(100000, generator=g) * 4 + 0.25
    y = torch.rand(100000, generator=g, dtype=torch.float64) * 4 + 0.25
    return {"float32_per_100000": int((x.sqrt().numpy() != np.sqrt(x.numpy())).sum()),
            "float64_per_100000": int((y.sqrt().numpy() != np.sqrt(y.numpy())).sum())}


def main():
    torch.set_num_threads(1)
    bad = sqrt_misrounded()
    sched, plateau = scheduler_section()
    out = {
        "generator": "tools/golden_optim_more.py",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": {"cpu_capability": torch.backends.cpu.get_cpu_capability(),
                    "mkl_enable_instructions": os.environ.get("MKL_ENABLE_INSTRUCTIONS"),
                    "sqrt_misrounded": bad},
        "optimizers": optimizer_section(),
        "schedulers": sched,
        "plateau": plateau,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
