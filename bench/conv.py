#!/usr/bin/env python3
"""Times conv2d forward and both backward passes (3x3, 64->64, 56x56, batch 8, padding 1) in
lockstep (det and nondet) and PyTorch at 1 and 2 threads, in the same run; prints a Markdown
table. Usage (from the repository root): python3 bench/conv.py [--runs 5]"""
import argparse, json, os, subprocess, time
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def best(runs, f):
    f()
    b = float("inf")
    for _ in range(runs):
        t = time.perf_counter(); f(); b = min(b, time.perf_counter() - t)
    return b


def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--runs", type=int, default=5); a = ap.parse_args()
    cmd = ["cargo", "run", "--quiet", "--release", "-p", "lockstep-tensor", "--example", "conv_bench", "--", str(a.runs)]
    ours = [json.loads(l) for l in subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout.splitlines() if l.strip()]
    torch.manual_seed(0)
    x = torch.randn(8, 64, 56, 56); w = torch.randn(64, 64, 3, 3); gy = torch.randn(8, 64, 56, 56)
    ref = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        ref[("conv2d forward", threads)] = best(a.runs, lambda: F.conv2d(x, w, padding=1))
        ref[("conv2d input grad", threads)] = best(a.runs, lambda: torch.nn.grad.conv2d_input(x.shape, w, gy, padding=1))
        ref[("conv2d weight grad", threads)] = best(a.runs, lambda: torch.nn.grad.conv2d_weight(x, w.shape, gy, padding=1))
    rows = {}
    for r in ours:
        rows.setdefault((r["name"], r["threads"]), {})[r["mode"]] = r["seconds"]
    print(f"| op (torch {torch.__version__}) | threads | lockstep det | lockstep nondet | det / nondet | PyTorch | PyTorch / det |")
    print("|---|---|---|---|---|---|---|")
    for (name, threads), m in rows.items():
        t = ref[(name, threads)]
        print(f"| {name} | {threads} | {m['det']*1e3:.1f} ms | {m['nondet']*1e3:.1f} ms | {m['det']/m['nondet']:.2f}× | {t*1e3:.1f} ms | **{t/m['det']:.2f}×** |")


if __name__ == "__main__":
    main()
