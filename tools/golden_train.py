#!/usr/bin/env python3
"""Golden reports of the normative PyTorch training program, for `lockstep train`.

Writes tests/golden/train/runs.json. Run from the repository root with torch and numpy
installed (CPU only; the script hides CUDA devices itself):

    python3 tools/golden_train.py [PATH/TO/torch_train.py]

PATH defaults to ../shared/spec/train/torch_train.py (relative to the repository root). Each
run is `python3 torch_train.py ARGS --data crates/lockstep-data/data/digits.csv.gz` in a fresh
subprocess; the file stores ARGS exactly as passed (without --data) and the JSON object the
program printed, unmodified (floats as Python's json writes them: repr, round-trips exactly).

Grids:
  A  every model x (sgd momentum 0.9 lr 0.05 | adam lr 0.01) x workers 0/2 x aug torch/numpy
     x seeds 0/7, each --epochs 1 --max-steps 3
  B  flag coverage for every model (workers 0, --epochs 2 --max-steps 4 unless noted): sgd
     nesterov + weight decay; adamw; StepLR and CosineAnnealingLR on tiny epochs (--epochs 3
     --max-steps 0 --test-size 1700: 97 training samples, 4 batches of 32,32,32,1); clip-grad-norm
     0.5; dropout 0.5 hidden 32 batch 16; aug none with 0 and 3 workers
  C  drift: every model, seed 0, sgd momentum 0.9 lr 0.05, aug torch, workers 0,
     --max-steps 1000 --epochs 100

Everything the program draws is deterministic, so the bit-exact fields (split, init_sha256,
shuffling, noise, dropout) do not depend on the machine; the step losses and final_sha256 depend
on the summation order of PyTorch's CPU kernels, i.e. on the CPU and its thread count, which are
recorded ("threads", "machine"). One run is repeated and must print the identical report.

Takes about 11.5 minutes on a 2-core Xeon (torch 2.15.0, numpy 2.4.6; measured 11m19s and 11m38s):
78 short runs of 4-13 s each (mostly starting Python and torch), grid C about 2.5 minutes.
"""
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "train", "runs.json")
DATA = os.path.join(ROOT, "crates", "lockstep-data", "data", "digits.csv.gz")
DEFAULT_SCRIPT = os.path.join(ROOT, "..", "shared", "spec", "train", "torch_train.py")

MODELS = ["mlp", "cnn", "lstm"]
SGD = ["--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.05"]
ADAM = ["--optimizer", "adam", "--lr", "0.01"]


def grid_a():
    runs = []
    for model in MODELS:
        for opt in (SGD, ADAM):
            for workers in ("0", "2"):
                for aug in ("torch", "numpy"):
                    for seed in ("0", "7"):
                        runs.append(["--model", model, *opt, "--workers", workers, "--aug", aug,
                                     "--seed", seed, "--epochs", "1", "--max-steps", "3"])
    return runs


def grid_b():
    short = ["--epochs", "2", "--max-steps", "4"]
    tiny = ["--epochs", "3", "--max-steps", "0", "--test-size", "1700"]
    variants = [
        ["--optimizer", "sgd", "--nesterov", "--momentum", "0.9", "--lr", "0.05",
         "--weight-decay", "1e-4", *short],
        ["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.01", *short],
        [*SGD, "--scheduler", "step", *tiny],
        [*SGD, "--scheduler", "cosine", *tiny],
        [*ADAM, "--scheduler", "cosine", *tiny],
        [*SGD, "--clip-grad-norm", "0.5", *short],
        [*ADAM, "--clip-grad-norm", "0.5", *short],
        [*SGD, "--dropout", "0.5", "--hidden", "32", "--batch-size", "16", *short],
        [*SGD, "--aug", "none", "--workers", "0", *short],
        [*SGD, "--aug", "none", "--workers", "3", *short],
    ]
    runs = []
    for model in MODELS:
        for v in variants:
            args = ["--model", model, "--seed", "0", *v]
            if "--workers" not in args:
                args += ["--workers", "0"]
            if "--aug" not in args:
                args += ["--aug", "torch"]
            runs.append(args)
    return runs


def grid_c():
    return [["--model", model, "--seed", "0", *SGD, "--aug", "torch", "--workers", "0",
             "--max-steps", "1000", "--epochs", "100"] for model in MODELS]


def run(script, args):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, script, *args, "--data", DATA], env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"torch_train.py {' '.join(args)} failed:\n{p.stderr}")
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    return json.loads(lines[-1])


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        return ""


def main():
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import numpy as np
    import torch

    script = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_SCRIPT
    script = os.path.abspath(script)
    t0 = time.time()
    runs = []
    for grid, arglists in (("A", grid_a()), ("B", grid_b()), ("C", grid_c())):
        for args in arglists:
            t = time.time()
            report = run(script, args)
            print(f"{grid} {time.time() - t:6.1f}s {' '.join(args)}", file=sys.stderr)
            runs.append({"grid": grid, "args": args, "report": report})

    # Determinism check: a run with worker processes, repeated, prints the identical report.
    again = run(script, runs[2]["args"])
    assert again == runs[2]["report"], "torch_train.py is not deterministic"
    # The tiny-epoch runs really have 97 training samples: 4 batches (32, 32, 32, 1) per epoch.
    for r in runs:
        if "--test-size" in r["args"]:
            assert r["report"]["steps"] == 12, r

    out = {
        "generator": "tools/golden_train.py",
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "script": "shared/spec/train/torch_train.py",
        "data": "crates/lockstep-data/data/digits.csv.gz",
        "runs": runs,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT}: {len(runs)} runs in {time.time() - t0:.0f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
