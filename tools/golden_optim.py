#!/usr/bin/env python3
"""Golden values from real PyTorch for lockstep's optimizers, LR schedulers and gradient clipping
(tests/golden/train/optim.json).

Run from the repository root with torch installed (CPU only; the script hides CUDA itself):

    python3 tools/golden_optim.py

Sections:
  optimizers  float32, single-tensor path (foreach=False, as PyTorch picks by default on CPU: the
              script asserts that foreach=None gives the same bits). Four parameters of sizes 1,
              10, 37, 100 (vector bodies and tails), initial values and 5 gradients per
              parameter drawn from a seeded torch.Generator (recorded), gradients fed in
              (p.grad = g) before each opt.step(). Stored: parameters after every step, final
              state per parameter. Variant "skip": at step index 2 parameter 1 has grad None
              (the optimizer skips it: no state update, no step count).
  schedulers  optimizer.param_groups[0]['lr'] after construction and after each of 12
              sched.step() calls (each preceded by opt.step()), for base lr 0.1 and 0.05; also
              the scheduler's closed form (_get_closed_form_lr) where it has one, since the
              chainable recursive form that step() uses differs from it in the last bits.
              "large": Adam and AdamW on one 1000-element parameter near zero. Everything again
              under "optimizers_correctly_rounded_sqrt", computed in a subprocess with
              MKL_ENABLE_INSTRUCTIONS=AVX2: torch.sqrt on CPU goes through MKL's VML, whose
              AVX-512 path is not correctly rounded (~0.7% of results 1 ulp off), so Adam's
              denominators, and sometimes its parameters, depend on the CPU; the AVX2 run is
              what correctly rounded sqrt (Rust's f32::sqrt) gives.
  clip        nn.utils.clip_grad_norm_ (default foreach, as torch_train.py calls it; asserted
              equal to foreach=False) on parameters of sizes 10, 37, 1: returned total norm and
              clipped gradients; nn.utils.clip_grad_value_(0.01).
All floats are exact (float32 values converted to Python floats). Takes about 15 seconds.
"""
import json
import os
import platform
import subprocess
import sys

os.environ["CUDA_VISIBLE_DEVICES"] = ""
import torch  # noqa: E402
from torch import nn  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "optim.json")
SIZES = [1, 10, 37, 100]
STEPS = 5
SKIP_STEP, SKIP_PARAM = 2, 1


def T(t):
    t = t.detach()
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "values": t.contiguous().reshape(-1).tolist()}


OPTIMIZERS = [
    ("SGD", "torch.optim.SGD(params, lr=0.1)", dict(lr=0.1)),
    ("SGD", "torch.optim.SGD(params, lr=0.05, momentum=0.9)", dict(lr=0.05, momentum=0.9)),
    ("SGD", "torch.optim.SGD(params, lr=0.05, momentum=0.9, dampening=0.1)",
     dict(lr=0.05, momentum=0.9, dampening=0.1)),
    ("SGD", "torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)",
     dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)),
    ("SGD", "torch.optim.SGD(params, lr=0.05, weight_decay=0.01)", dict(lr=0.05, weight_decay=0.01)),
    ("Adam", "torch.optim.Adam(params, lr=0.01)", dict(lr=0.01)),
    ("Adam", "torch.optim.Adam(params, lr=0.001, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.01)",
     dict(lr=0.001, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.01)),
    ("Adam", "torch.optim.Adam(params, amsgrad=True)", dict(amsgrad=True)),
    ("AdamW", "torch.optim.AdamW(params, lr=0.01, weight_decay=0.01)",
     dict(lr=0.01, weight_decay=0.01)),
    ("AdamW", "torch.optim.AdamW(params, amsgrad=True, weight_decay=0.1)",
     dict(amsgrad=True, weight_decay=0.1)),
]


def run_optimizer(cls, kw, init, grads, skip, foreach):
    params = [p.clone().requires_grad_(True) for p in init]
    opt = getattr(torch.optim, cls)(params, **kw, foreach=foreach)
    after = []
    for s in range(STEPS):
        for j, p in enumerate(params):
            p.grad = None if (skip and s == SKIP_STEP and j == SKIP_PARAM) else grads[s][j].clone()
        opt.step()
        after.append([p.detach().clone() for p in params])
    state = []
    for p in params:
        st = opt.state[p]
        state.append({k: (T(v) if isinstance(v, torch.Tensor) else v) for k, v in st.items()})
    return after, state


def optimizer_section():
    g = torch.Generator().manual_seed(2024)
    init = [torch.randn(n, generator=g) for n in SIZES]
    grads = [[torch.randn(n, generator=g) * 0.1 for n in SIZES] for _ in range(STEPS)]
    cases = []
    for cls, call, kw in OPTIMIZERS:
        for skip in (False, True):
            after, state = run_optimizer(cls, kw, init, grads, skip, foreach=False)
            after_default, _ = run_optimizer(cls, kw, init, grads, skip, foreach=None)
            for a, b in zip(after, after_default):
                for x, y in zip(a, b):
                    assert torch.equal(x, y), f"{call}: foreach=None differs from foreach=False"
            cases.append({
                "optimizer": cls, "call": call.replace("params", "params, foreach=False"),
                "kwargs": {k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()},
                "grad_none_at": [SKIP_STEP, SKIP_PARAM] if skip else None,
                "params_after_step": [[T(x) for x in a] for a in after],
                "final_state": state,
            })
    # One 1000-element parameter near zero, so that a 1-ulp difference in Adam's sqrt shows in
    # the parameters (with |p| ~ 1 and updates ~ lr it is mostly absorbed by the final add).
    big_init = [torch.randn(1000, generator=g) * 1e-3]
    big_grads = [[torch.randn(1000, generator=g) * 0.1] for _ in range(STEPS)]
    big = []
    for cls, call, kw in OPTIMIZERS:
        if call in ("torch.optim.Adam(params, lr=0.01)",
                    "torch.optim.AdamW(params, lr=0.01, weight_decay=0.01)"):
            after, state = run_optimizer(cls, kw, big_init, big_grads, False, foreach=False)
            big.append({"optimizer": cls, "call": call.replace("params", "params, foreach=False"),
                        "kwargs": kw, "params_after_step": [[T(x) for x in a] for a in after],
                        "final_state": state})
    return {"sizes": SIZES, "init": [T(p) for p in init],
            "grads": [[T(x) for x in step] for step in grads], "cases": cases,
            "large": {"sizes": [1000], "init": [T(p) for p in big_init],
                      "grads": [[T(x) for x in step] for step in big_grads], "cases": big}}


SCHEDULERS = [
    "StepLR(opt, step_size=2, gamma=0.1)",
    "StepLR(opt, step_size=1, gamma=0.1)",
    "MultiStepLR(opt, milestones=[2, 5], gamma=0.5)",
    "CosineAnnealingLR(opt, T_max=10)",
    "CosineAnnealingLR(opt, T_max=3)",
    "CosineAnnealingLR(opt, T_max=2)",
    "CosineAnnealingLR(opt, T_max=10, eta_min=0.001)",
    "LinearLR(opt, start_factor=0.25, total_iters=4)",
    "LinearLR(opt, start_factor=1.0, end_factor=0.1, total_iters=5)",
]


def scheduler_section():
    cases = []
    for ctor in SCHEDULERS:
        for base in (0.1, 0.05):
            p = torch.zeros(1, requires_grad=True)
            opt = torch.optim.SGD([p], lr=base)
            sched = eval("torch.optim.lr_scheduler." + ctor, {"torch": torch, "opt": opt})
            lrs, last = [opt.param_groups[0]["lr"]], [sched.get_last_lr()[0]]
            closed = []
            if hasattr(sched, "_get_closed_form_lr"):
                closed.append(sched._get_closed_form_lr()[0])
            for _ in range(12):
                opt.step()
                sched.step()
                lrs.append(opt.param_groups[0]["lr"])
                last.append(sched.get_last_lr()[0])
                if hasattr(sched, "_get_closed_form_lr"):
                    closed.append(sched._get_closed_form_lr()[0])
            assert lrs == last
            cases.append({"scheduler": ctor, "base_lr": base, "lr": lrs,
                          "closed_form_lr": closed or None})
    return cases


def clip_section():
    g = torch.Generator().manual_seed(77)
    sizes = [10, 37, 1]
    grads = [torch.randn(n, generator=g) * 0.3 for n in sizes]
    cases = []

    def fresh():
        ps = [torch.zeros(n, requires_grad=True) for n in sizes]
        for p, gr in zip(ps, grads):
            p.grad = gr.clone()
        return ps

    for max_norm in (0.5, 100.0):
        for norm_type in (2.0, float("inf")):
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
    nn.utils.clip_grad_value_(ps, 0.01)
    cases.append({"fn": "clip_grad_value_", "clip_value": 0.01, "clipped": [T(p.grad) for p in ps]})
    return {"sizes": sizes, "grads": [T(x) for x in grads], "cases": cases}


def sqrt_check():
    """How torch.sqrt rounds here: on CPU it goes through MKL's VML (vsSqrt/vdSqrt, HA mode),
    whose AVX-512 code path is not correctly rounded (about 0.7% of float32 results are 1 ulp
    off); with MKL_ENABLE_INSTRUCTIONS=AVX2 it is. Adam's denominator uses it."""
    import numpy as np
    x = torch.rand(100000, generator=torch.Generator().manual_seed(5)) * 4 + 0.25
    return {"float32_sqrt_misrounded_per_100000": int((x.sqrt().numpy() != np.sqrt(x.numpy())).sum())}


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": cpu, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "mkl_enable_instructions": os.environ.get("MKL_ENABLE_INSTRUCTIONS"),
            "sqrt": sqrt_check()}


CHILD = "LOCKSTEP_GOLDEN_OPTIM_CHILD"


def main():
    torch.set_num_threads(1)
    if os.environ.get(CHILD):
        json.dump({"machine": machine(), "optimizers": optimizer_section()}, sys.stdout)
        return
    # The same optimizer cases with MKL restricted to AVX2, where torch.sqrt is correctly
    # rounded (what a Rust f32::sqrt gives): only Adam/AdamW cases can differ.
    env = dict(os.environ, **{CHILD: "1", "MKL_ENABLE_INSTRUCTIONS": "AVX2"})
    child = json.loads(subprocess.run([sys.executable, os.path.abspath(__file__)], env=env,
                                      check=True, capture_output=True, text=True).stdout)
    assert child["machine"]["sqrt"]["float32_sqrt_misrounded_per_100000"] == 0, child["machine"]
    opt = optimizer_section()
    differ = [c["call"] for c, d in zip(opt["cases"], child["optimizers"]["cases"]) if c != d]
    differ += ["large: " + c["call"] for c, d in zip(opt["large"]["cases"],
                                                    child["optimizers"]["large"]["cases"]) if c != d]
    out = {
        "generator": "tools/golden_optim.py",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": machine(),
        "optimizers": opt,
        "optimizers_correctly_rounded_sqrt": {
            "note": "same cases, run with MKL_ENABLE_INSTRUCTIONS=AVX2 (torch.sqrt correctly "
                    "rounded); `differ` lists the calls whose results differ from `optimizers`; "
                    "cases/large_cases hold those results, null where identical",
            "machine": child["machine"], "differ": differ,
            "cases": [d if c != d else None
                      for c, d in zip(opt["cases"], child["optimizers"]["cases"])],
            "large_cases": [d if c != d else None for c, d in
                            zip(opt["large"]["cases"], child["optimizers"]["large"]["cases"])]},
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
