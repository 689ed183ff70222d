#!/usr/bin/env python3
"""Golden values for lockstep's optim::LBFGS: torch.optim.LBFGS (line_search_fn=None) on a small
least-squares problem (a linear layer's weight and bias, data from torch.manual_seed(0)), in
float64 and float32, with PyTorch's defaults and with a short history (history_size=3,
max_iter=7) so that old pairs are dropped. Records the inputs, the loss each step(closure)
returns, the parameters after each step and state['func_evals'] / state['n_iter'].

usage: python3 tools/examples/golden_lbfgs.py   (writes tests/golden/examples/lbfgs.json)
Needs: pip install torch (the committed file: torch 2.15.0).
"""
import json
import os

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def case(dtype, opts, steps):
    torch.manual_seed(0)
    x = torch.randn(16, 5, dtype=dtype)
    y = torch.randn(16, 3, dtype=dtype)
    w = torch.randn(3, 5, dtype=dtype, requires_grad=True)
    b = torch.zeros(3, dtype=dtype, requires_grad=True)
    inputs = {k: v.detach().flatten().tolist() for k, v in dict(x=x, y=y, w=w, b=b).items()}
    opt = torch.optim.LBFGS([w, b], **opts)

    def closure():
        opt.zero_grad()
        loss = ((x @ w.t() + b - y) ** 2).mean()
        loss.backward()
        return loss

    out = []
    for _ in range(steps):
        loss = opt.step(closure)
        st = opt.state[w]
        out.append({"loss": loss.item(), "w": w.detach().flatten().tolist(),
                    "b": b.detach().flatten().tolist(),
                    "func_evals": st["func_evals"], "n_iter": st["n_iter"]})
    return {"dtype": str(dtype).replace("torch.", ""), "opts": opts, "inputs": inputs,
            "steps": out}


def main():
    cases = []
    for dtype in (torch.float64, torch.float32):
        cases.append(case(dtype, {}, 3))
        cases.append(case(dtype, {"lr": 0.5, "max_iter": 7, "history_size": 3}, 4))
    doc = {"generated_by": "tools/examples/golden_lbfgs.py",
           "torch": torch.__version__.split("+")[0], "cases": cases}
    with open(os.path.join(ROOT, "tests", "golden", "examples", "lbfgs.json"), "w") as f:
        json.dump(doc, f)
        f.write("\n")


if __name__ == "__main__":
    main()
