#!/usr/bin/env python3
"""Times conv2d forward and both backward passes in lockstep (det and nondet) and PyTorch at 1
and 2 threads, in the same run; prints a Markdown table.

Shapes: `issue` (default): 3x3, 64->64, 56x56, batch 8, padding 1. `cnn`: the two convolutions
of `lockstep train --model cnn` (batch 64: 1->16 at 8x8, 16->32 at 4x4; 3x3, padding 1).

Usage (from the repository root): python3 bench/conv.py [--runs 5] [--shapes issue|cnn]"""
import argparse, json, os, subprocess, time
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {
    "issue": [("", (8, 64, 56, 56), (64, 64, 3, 3))],
    "cnn": [("conv1 1→16 8×8 b64", (64, 1, 8, 8), (16, 1, 3, 3)),
            ("conv2 16→32 4×4 b64", (64, 16, 4, 4), (32, 16, 3, 3))],
}


def best(runs, f):
    f()
    b = float("inf")
    for _ in range(runs):
        t = time.perf_counter(); f(); b = min(b, time.perf_counter() - t)
    return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--shapes", choices=sorted(SHAPES), default="issue")
    a = ap.parse_args()
    cmd = ["cargo", "run", "--quiet", "--release", "-p", "lockstep-tensor", "--example", "conv_bench", "--",
           str(a.runs), a.shapes]
    ours = [json.loads(l) for l in subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout.splitlines() if l.strip()]
    torch.manual_seed(0)
    ref = {}
    for label, xs, ws in SHAPES[a.shapes]:
        x = torch.randn(*xs); w = torch.randn(*ws); gy = torch.randn(xs[0], ws[0], xs[2], xs[3])
        name = lambda op: f"{op} {label}" if label else op
        for threads in (1, 2):
            torch.set_num_threads(threads)
            ref[(name("conv2d forward"), threads)] = best(a.runs, lambda: F.conv2d(x, w, padding=1))
            ref[(name("conv2d input grad"), threads)] = best(a.runs, lambda: torch.nn.grad.conv2d_input(x.shape, w, gy, padding=1))
            ref[(name("conv2d weight grad"), threads)] = best(a.runs, lambda: torch.nn.grad.conv2d_weight(x, w.shape, gy, padding=1))
    rows = {}
    for r in ours:
        rows.setdefault((r["name"], r["threads"]), {})[r["mode"]] = r["seconds"]
    print(f"| op (torch {torch.__version__}) | threads | lockstep det | lockstep nondet | det / nondet | PyTorch | PyTorch / det |")
    print("|---|---|---|---|---|---|---|")
    for (name, threads), m in rows.items():
        t = ref[(name, threads)]
        print(f"| {name} | {threads} | {m['det']*1e3:.3f} ms | {m['nondet']*1e3:.3f} ms | {m['det']/m['nondet']:.2f}× | {t*1e3:.3f} ms | **{t/m['det']:.2f}×** |")


if __name__ == "__main__":
    main()
