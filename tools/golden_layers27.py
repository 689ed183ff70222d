#!/usr/bin/env python3
"""Golden values from real PyTorch for the layers and losses of issue 27
(tests/golden/train/layers27.json).

Run from the repository root with torch installed (CPU only; the script hides CUDA itself):

    python3 tools/golden_layers27.py

Sections:

  init         after torch.manual_seed(s), s in (0, 5), each constructor in INIT_CTORS
               (float32): state_dict names, shapes and every value (exact: float32 -> Python
               float), and sha256 of torch.get_rng_state() afterwards.
  activations  F.leaky_relu, F.silu, F.softplus on float64 and float32 inputs: the output and
               the gradient of (y*W).sum() with respect to the input (W recorded).
  losses       F.binary_cross_entropy, F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.kl_div in
               float64 with every reduction: the loss and the gradients of the input (and of
               the target where lockstep has one); reduction='none' is backpropagated with a
               recorded grad_output.
  cells        nn.LSTMCell, nn.GRUCell, nn.RNNCell after .double(), parameters overwritten with
               recorded float64 draws: outputs for a batched and an unbatched input, with and
               without hx, and the gradients of (out*W).sum() (summed over h and c for LSTM)
               with respect to the input, hx and every parameter.
  cells_f32    the same cells in float32 (a batched input with states, an unbatched one
               without), PyTorch's float32 results.
  convs        nn.Conv1d and nn.ConvTranspose2d: inputs and parameters are float32 values
               (recorded); the reference is computed in float64 from them (lockstep's
               convolutions are float32 kernels, compared within 1e-5).

Tensors are stored as {"shape": [...], "dtype": "...", "values": [flat, row-major]}.
Takes a few seconds.
"""
import hashlib
import json
import os
import platform
import sys

os.environ["CUDA_VISIBLE_DEVICES"] = ""
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "layers27.json")
F64 = torch.float64


def T(t):
    t = t.detach()
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "values": t.contiguous().reshape(-1).tolist()}


def rng_sha():
    return hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest()


GEN = torch.Generator().manual_seed(2027)


def draw(*shape, lo=-1.0, hi=1.0, dtype=F64):
    return (torch.rand(*shape, generator=GEN, dtype=F64) * (hi - lo) + lo).to(dtype)


# ----------------------------------------------------------------------------------------------

INIT_CTORS = [
    "nn.LSTMCell(3, 5)",
    "nn.LSTMCell(1, 51)",
    "nn.GRUCell(4, 3)",
    "nn.RNNCell(3, 4)",
    "nn.RNNCell(3, 4, bias=False, nonlinearity='relu')",
    "nn.Conv1d(3, 4, 3)",
    "nn.Conv1d(4, 6, 5, stride=2, padding=1, dilation=2, groups=2, bias=False)",
    "nn.ConvTranspose2d(3, 4, 4, stride=2, padding=1)",
    "nn.ConvTranspose2d(8, 2, (3, 2), stride=(2, 1), padding=(1, 0), output_padding=(1, 0), bias=False)",
    "nn.ConvTranspose2d(4, 6, 3, groups=2)",
]


def init_section():
    out = []
    for ctor in INIT_CTORS:
        for seed in (0, 5):
            torch.manual_seed(seed)
            m = eval(ctor, {"nn": nn})
            out.append({
                "ctor": ctor,
                "seed": seed,
                "state_dict": [[k, T(v)] for k, v in m.state_dict().items()],
                "rng_sha256": rng_sha(),
            })
    return out


def activations_section():
    cases = [
        ("leaky_relu", {"negative_slope": 0.01}, lambda x: F.leaky_relu(x)),
        ("leaky_relu", {"negative_slope": 0.2}, lambda x: F.leaky_relu(x, 0.2)),
        ("silu", {}, F.silu),
        ("softplus", {"beta": 1.0, "threshold": 20.0}, F.softplus),
        ("softplus", {"beta": 2.0, "threshold": 1.0}, lambda x: F.softplus(x, 2.0, 1.0)),
        ("softplus", {"beta": 0.5, "threshold": 3.0}, lambda x: F.softplus(x, 0.5, 3.0)),
    ]
    out = []
    for dtype in (F64, torch.float32):
        for name, kw, f in cases:
            x = draw(4, 7, lo=-4.0, hi=4.0, dtype=dtype)
            x.view(-1)[0] = 0.0
            x.view(-1)[1] = -0.0
            x = x.requires_grad_()
            w = draw(4, 7, dtype=dtype)
            y = f(x)
            (y * w).sum().backward()
            out.append({"op": name, "kwargs": kw, "x": T(x), "w": T(w), "y": T(y),
                        "grad_x": T(x.grad)})
    return out


def losses_section():
    out = []

    def run(op, kwargs, x, t, weight=None, target_grad=True):
        x = x.clone().requires_grad_()
        t = t.clone().requires_grad_(target_grad)
        kw = dict(kwargs)
        if weight is not None:
            kw["weight"] = weight
        y = getattr(F, op)(x, t, **kw)
        gout = draw(*y.shape) if y.dim() > 0 else None
        if gout is None:
            y.backward()
        else:
            y.backward(gout)
        case = {"op": op, "kwargs": kwargs, "input": T(x), "target": T(t), "loss": T(y),
                "grad_input": T(x.grad)}
        if weight is not None:
            case["weight"] = T(weight)
        if gout is not None:
            case["grad_output"] = T(gout)
        if target_grad:
            case["grad_target"] = T(t.grad)
        out.append(case)

    for red in ("mean", "sum", "none"):
        p = draw(3, 5, lo=0.02, hi=0.98)
        t = draw(3, 5, lo=0.0, hi=1.0)
        t.view(-1)[:4] = torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=F64)
        run("binary_cross_entropy", {"reduction": red}, p, t, target_grad=False)
        run("binary_cross_entropy", {"reduction": red}, p, t, weight=draw(3, 5, lo=0.1, hi=2.0),
            target_grad=False)
        run("binary_cross_entropy", {"reduction": red}, p, t, weight=draw(5, lo=0.1, hi=2.0),
            target_grad=False)
        # Probabilities of exactly 0 and 1: the logs clamp at -100.
        p2 = p.clone()
        p2.view(-1)[:4] = torch.tensor([0.0, 1.0, 1.0, 0.0], dtype=F64)
        run("binary_cross_entropy", {"reduction": red}, p2, t, target_grad=False)
        x, y = draw(2, 3, 4, lo=-2, hi=2), draw(2, 3, 4, lo=-2, hi=2)
        run("l1_loss", {"reduction": red}, x, y)
        for beta in (1.0, 0.5, 0.0):
            run("smooth_l1_loss", {"reduction": red, "beta": beta}, x, y)
        for delta in (1.0, 0.7):
            run("huber_loss", {"reduction": red, "delta": delta}, x, y)
    for red in ("mean", "sum", "none", "batchmean"):
        lp = torch.log_softmax(draw(4, 6, lo=-2, hi=2), 1)
        tp = torch.softmax(draw(4, 6, lo=-2, hi=2), 1)
        tp.view(-1)[:2] = 0.0
        run("kl_div", {"reduction": red, "log_target": False}, lp, tp, target_grad=False)
        run("kl_div", {"reduction": red, "log_target": True}, lp, torch.log_softmax(
            draw(4, 6, lo=-2, hi=2), 1), target_grad=False)
    return out


CELL_CTORS = [
    "nn.LSTMCell(3, 5)",
    "nn.LSTMCell(3, 4, bias=False)",
    "nn.GRUCell(3, 5)",
    "nn.GRUCell(2, 3, bias=False)",
    "nn.RNNCell(3, 5)",
    "nn.RNNCell(3, 4, nonlinearity='relu')",
]


def cells_section(dtype=F64, combos=((2, True), (2, False), (None, True), (None, False))):
    out = []
    for ctor in CELL_CTORS:
        m = eval(ctor, {"nn": nn}).to(dtype)
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(draw(*p.shape, lo=-0.7, hi=0.7, dtype=dtype))
        lstm = ctor.startswith("nn.LSTMCell")
        h = m.hidden_size
        for batch, with_hx in combos:
            if True:
                m.zero_grad()
                xs = (batch, m.input_size) if batch else (m.input_size,)
                hs = (batch, h) if batch else (h,)
                x = draw(*xs, dtype=dtype).requires_grad_()
                hx = draw(*hs, dtype=dtype).requires_grad_() if with_hx else None
                cx = draw(*hs, dtype=dtype).requires_grad_() if (with_hx and lstm) else None
                if lstm:
                    ho, co = m(x, (hx, cx) if with_hx else None)
                    w, v = draw(*hs, dtype=dtype), draw(*hs, dtype=dtype)
                    ((ho * w).sum() + (co * v).sum()).backward()
                else:
                    ho = m(x, hx)
                    w = draw(*hs, dtype=dtype)
                    (ho * w).sum().backward()
                case = {"ctor": ctor, "params": [[k, T(p)] for k, p in m.named_parameters()],
                        "x": T(x), "h": T(ho), "w": T(w), "grad_x": T(x.grad),
                        "grad_params": [[k, T(p.grad)] for k, p in m.named_parameters()]}
                if with_hx:
                    case["hx"] = T(hx)
                    case["grad_hx"] = T(hx.grad)
                if lstm:
                    case["c"] = T(co)
                    case["v"] = T(v)
                    if with_hx:
                        case["cx"] = T(cx)
                        case["grad_cx"] = T(cx.grad)
                out.append(case)
    return out


CONV_CTORS = [
    ("nn.Conv1d(3, 4, 3)", (2, 3, 9)),
    ("nn.Conv1d(4, 6, 5, stride=2, padding=1, dilation=2, groups=2)", (2, 4, 13)),
    ("nn.Conv1d(2, 3, 1, bias=False)", (1, 2, 5)),
    ("nn.ConvTranspose2d(3, 4, 4, stride=2, padding=1)", (2, 3, 4, 4)),
    ("nn.ConvTranspose2d(5, 2, 4, stride=1, padding=0, bias=False)", (2, 5, 1, 1)),
    ("nn.ConvTranspose2d(2, 3, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2))",
     (1, 2, 3, 4)),
    ("nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2)", (2, 4, 3, 3)),
    ("nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, dilation=2)", (2, 2, 4, 3)),
]


def convs_section():
    out = []
    for ctor, xshape in CONV_CTORS:
        m = eval(ctor, {"nn": nn})
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(draw(*p.shape, dtype=torch.float32))
        m = m.double()
        m.zero_grad()
        x = draw(*xshape, dtype=torch.float32).double().requires_grad_()
        y = m(x)
        w = draw(*y.shape, dtype=torch.float32).double()
        (y * w).sum().backward()
        out.append({"ctor": ctor, "params": [[k, T(p.float())] for k, p in m.named_parameters()],
                    "x": T(x.float()), "w": T(w.float()), "y": T(y), "grad_x": T(x.grad),
                    "grad_params": [[k, T(p.grad)] for k, p in m.named_parameters()]})
    return out


def main():
    torch.set_num_threads(1)
    doc = {
        "generated_by": "tools/golden_layers27.py",
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "init": init_section(),
        "activations": activations_section(),
        "losses": losses_section(),
        "cells": cells_section(),
        "convs": convs_section(),
        # Last, so that the draws above do not move: the cells in float32 (PyTorch's CPU
        # kernels in float32; compared within 1e-5).
        "cells_f32": cells_section(torch.float32, ((2, True), (None, False))),
    }
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
