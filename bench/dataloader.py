#!/usr/bin/env python3
"""DataLoader throughput, lockstep vs PyTorch, in one run on this machine.

Pipeline (both sides): the 1,797 UCI digits (8x8, /16), random crop 8 with zero padding 2,
horizontal flip p=0.5, Gaussian noise std 0.1, batch 64, shuffle, one full epoch; workers 0
and 2 (persistent). Best epoch of N after a warm-up epoch; prints samples/s and the ratio.

torchvision is not needed: the PyTorch transforms are plain torch ops in a Dataset, drawing
exactly what torchvision's RandomCrop / RandomHorizontalFlip draw (lockstep's
TorchCompatible mode reproduces its batches bit for bit; see tools/golden_data.py).

Usage, from the repository root:
    /opt/pyref/bin/python bench/dataloader.py [--epochs 10]
"""
import argparse
import gzip
import json
import os
import subprocess
import time

import torch
from torch.utils.data import DataLoader, Dataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIGITS = os.path.join(ROOT, "crates", "lockstep-data", "data", "digits.csv.gz")


def load_digits():
    with gzip.open(DIGITS, "rt") as f:
        rows = [list(map(int, line.split(","))) for line in f if line.strip()]
    x = torch.tensor([r[:64] for r in rows], dtype=torch.float32).reshape(-1, 1, 8, 8) / 16
    y = torch.tensor([r[64] for r in rows], dtype=torch.int64)
    return x, y


class AugDigits(Dataset):
    def __init__(self, x, y, std=0.1):
        self.x, self.y, self.std = x, y, std

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        img = torch.nn.functional.pad(self.x[i], (2, 2, 2, 2))
        top = torch.randint(0, 5, size=(1,)).item()
        left = torch.randint(0, 5, size=(1,)).item()
        img = img[:, top:top + 8, left:left + 8]
        if torch.rand(1) < 0.5:
            img = img.flip(-1)
        img = img + torch.randn_like(img) * self.std
        return img, self.y[i]


def torch_samples_per_s(workers, epochs):
    torch.manual_seed(0)
    x, y = load_digits()
    kw = dict(num_workers=workers)
    if workers:
        kw["persistent_workers"] = True
    dl = DataLoader(AugDigits(x, y), batch_size=64, shuffle=True, **kw)
    best = float("inf")
    for e in range(epochs + 1):
        t = time.perf_counter()
        n = sum(xb.shape[0] for xb, _ in dl)
        dt = time.perf_counter() - t
        assert n == len(y)
        if e:
            best = min(best, dt)
    return len(y) / best


def ours(epochs):
    cmd = ["cargo", "run", "--quiet", "--release", "-p", "lockstep-data", "--example", "bench_loader", "--",
           str(epochs)]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ref = {w: torch_samples_per_s(w, a.epochs) for w in (0, 2)}
    mine = ours(a.epochs)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, best of {a.epochs} epochs")
    print(f"{'pipeline':40} {'samples/s':>12} {'vs PyTorch':>10}")
    for w in (0, 2):
        print(f"{'PyTorch DataLoader workers=' + str(w):40} {ref[w]:12.0f} {1.0:10.1f}")
        for mode in ("PerSample", "TorchCompatible"):
            r = mine[f"lockstep {mode} workers={w}"]
            print(f"{'lockstep ' + mode + ' workers=' + str(w):40} {r:12.0f} {r / ref[w]:10.1f}x")


if __name__ == "__main__":
    main()
