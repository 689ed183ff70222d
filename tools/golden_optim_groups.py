#!/usr/bin/env python3
"""Golden values from real PyTorch for optimizers over several parameter groups, each with its own
hyperparameters, and schedulers over such groups (tests/golden/train/optim_groups.json).

Run from the repository root with torch installed (CPU only; the script hides CUDA itself):

    python3 tools/golden_optim_groups.py

Four float32 parameters (sizes 10, 37, 1, 100) and STEPS gradients per parameter from a seeded
torch.Generator (recorded), fed in (p.grad = g) before each opt.step(), foreach=False (PyTorch's
single-tensor formulas, its CPU default). Each case lists its groups by parameter index (the
optimizer's flat parameter order is the groups' concatenation, as PyTorch numbers its state),
the constructor defaults and each group's overrides, optionally a scheduler stepped after every
opt.step(), and records every group's lr after construction and after each step, the parameters
after each step and the final optimizer state (state_dict()["state"], by flat index).

Square roots: this torch build's CPU torch.sqrt is not correctly rounded (MKL's vector sqrt;
about 19% of float32 results are 1 ulp off here whatever MKL_ENABLE_INSTRUCTIONS says), while
lockstep's is, as PyTorch's is on AVX2 machines. So the Adam/AdamW cases run with Tensor.sqrt
replaced by a correctly rounded one (the float64 square root rounded to float32, exact for
float32 since 53 >= 2*24 + 2); everything else is PyTorch's own AdamW. The script checks that
the sqrt-free state (step, exp_avg, exp_avg_sq) is bit-identical with and without the
replacement, and that the replacement is correctly rounded (against NumPy).
All floats are exact (float32 values converted to Python floats).
"""
import json
import os
import platform
import sys

os.environ["CUDA_VISIBLE_DEVICES"] = ""
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.optim import lr_scheduler as S  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "optim_groups.json")
SIZES = [10, 37, 1, 100]
STEPS = 8


def T(t):
    t = t.detach()
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "values": t.contiguous().reshape(-1).tolist()}


# name, optimizer, defaults, groups [(param indices, overrides)], scheduler (a Python expression
# of `opt`, or None), how the groups are given ("ctor": all to the constructor;
# "add_param_group": the first to the constructor, the others added after it).
CASES = [
    ("adamw_two_weight_decays", "AdamW", dict(lr=0.01),
     [([0, 1], dict(weight_decay=0.1)), ([2, 3], dict(weight_decay=0.0, lr=0.003))], None, "ctor"),
    ("adamw_amsgrad_in_one_group", "AdamW", dict(lr=0.01, weight_decay=0.05),
     [([3, 0], dict()), ([1, 2], dict(amsgrad=True, betas=(0.8, 0.99)))], None, "ctor"),
    ("adam_add_param_group", "Adam", dict(lr=0.02),
     [([0, 2], dict()), ([1, 3], dict(weight_decay=0.01, lr=0.005))], None, "add_param_group"),
    ("sgd_momentum_two_groups", "SGD", dict(lr=0.05, momentum=0.9),
     [([0, 2], dict()), ([1, 3], dict(momentum=0.5, dampening=0.1, weight_decay=0.01, lr=0.1))],
     None, "ctor"),
    ("sgd_nesterov_and_plain", "SGD", dict(lr=0.1),
     [([1], dict(momentum=0.9, nesterov=True)), ([0, 2, 3], dict(lr=0.03))], None, "ctor"),
    ("sgd_sequential_warmup_cosine", "SGD", dict(lr=0.1, momentum=0.9),
     [([0, 1], dict()), ([2, 3], dict(lr=0.03))],
     "S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=3), "
     "S.CosineAnnealingLR(opt, T_max=6)], milestones=[3])", "ctor"),
    ("adamw_lambda_warmup", "AdamW", dict(lr=0.01),
     [([0, 1, 3], dict(weight_decay=0.1)), ([2], dict(weight_decay=0.0, lr=0.02))],
     "S.LambdaLR(opt, lambda e: min(1.0, (e + 1) / 4))", "ctor"),
    ("sgd_step_lr", "SGD", dict(lr=0.2),
     [([0], dict()), ([1, 2, 3], dict(lr=0.07, momentum=0.8))],
     "S.StepLR(opt, step_size=3, gamma=0.5)", "ctor"),
]


def correct_sqrt(self):
    return torch.sqrt(self.double()).to(self.dtype)


def run(case, init, grads, patch_sqrt):
    name, cls, defaults, groups, sched_expr, how = case
    params = [p.clone().requires_grad_(True) for p in init]
    pg = [dict(params=[params[i] for i in idx], **ov) for idx, ov in groups]
    ctor = getattr(torch.optim, cls)
    if how == "ctor":
        opt = ctor(pg, **defaults, foreach=False)
    else:
        opt = ctor(pg[:1], **defaults, foreach=False)
        for g in pg[1:]:
            opt.add_param_group(g)
    sched = eval(sched_expr, {"S": S, "opt": opt}) if sched_expr else None
    lrs = [[g["lr"] for g in opt.param_groups]]
    after = []
    real_sqrt = torch.Tensor.sqrt
    if patch_sqrt:
        torch.Tensor.sqrt = correct_sqrt
    try:
        for s in range(STEPS):
            for j, p in enumerate(params):
                p.grad = grads[s][j].clone()
            opt.step()
            if sched is not None:
                sched.step()
            lrs.append([g["lr"] for g in opt.param_groups])
            after.append([T(p) for p in params])
    finally:
        torch.Tensor.sqrt = real_sqrt
    state = {str(k): {kk: (T(vv) if isinstance(vv, torch.Tensor) else vv) for kk, vv in v.items()}
             for k, v in opt.state_dict()["state"].items()}
    return {
        "name": name, "optimizer": cls, "defaults": {k: list(v) if isinstance(v, tuple) else v
                                                      for k, v in defaults.items()},
        "groups": [{"params": idx, **{k: list(v) if isinstance(v, tuple) else v
                                      for k, v in ov.items()}} for idx, ov in groups],
        "how": how, "scheduler": sched_expr, "lrs": lrs,
        "params_after_step": after, "final_state": state,
        "correctly_rounded_sqrt": patch_sqrt,
    }


def main():
    # The replacement is correctly rounded.
    x = torch.rand(100000, generator=torch.Generator().manual_seed(5)) * 4 + 0.25
    assert np.array_equal(correct_sqrt(x).numpy(), np.sqrt(x.numpy()))
    g = torch.Generator().manual_seed(2028)
    init = [torch.randn(n, generator=g) for n in SIZES]
    grads = [[torch.randn(n, generator=g) * 0.1 for n in SIZES] for _ in range(STEPS)]
    cases = []
    for case in CASES:
        adam = case[1] in ("Adam", "AdamW")
        rec = run(case, init, grads, patch_sqrt=adam)
        if adam:
            plain = run(case, init, grads, patch_sqrt=False)
            for i, st in rec["final_state"].items():
                for k in ("step", "exp_avg", "exp_avg_sq"):
                    # exp_avg depends on the parameters only through coupled weight decay
                    if case[1] == "AdamW" or k == "step":
                        assert st[k] == plain["final_state"][i][k], (case[0], i, k)
            assert rec["lrs"] == plain["lrs"]
        cases.append(rec)
    out = {
        "generator": "tools/golden_optim_groups.py",
        "torch": torch.__version__, "python": sys.version.split()[0],
        "machine": {"platform": platform.platform(), "processor": platform.machine()},
        "sizes": SIZES, "steps": STEPS,
        "init": [T(p) for p in init], "grads": [[T(x) for x in s] for s in grads],
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
