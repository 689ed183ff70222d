#!/usr/bin/env python3
"""Golden reports of the normative PyTorch GPT program, for `lockstep train --model gpt`.

Writes tests/golden/gpt/runs.json. Run from the repository root with torch installed (CPU
only; the script hides CUDA devices itself):

    python3 tools/golden_gpt.py [PATH/TO/torch_gpt.py]

PATH defaults to ../shared/spec/train/torch_gpt.py (relative to the repository root). Each run
is `python3 torch_gpt.py ARGS --data crates/lockstep-data/data/tinyshakespeare.txt.gz` in a
fresh subprocess; the file stores ARGS exactly as passed (without --data) and the JSON object
the program printed, unmodified (floats as Python's json writes them: repr, round-trips
exactly).

The grid is small configurations (tests replay them in debug builds on 2 cores): 1-2 layers,
1-4 heads, width 16-48, block 8-32, batch 2-8, 3-10 steps, bias on/off, dropout 0/0.1/0.3,
gradient accumulation 1/2/3, warmup + cosine or constant lr, evaluation intervals, top-k 0/5,
clipping on/off, several seeds and prompts. Everything the program draws is deterministic, so
the bit-exact fields (vocabulary, init_sha256, names, windows, masks, lrs) do not depend on the
machine; losses, grad norms and the final parameters depend on PyTorch's CPU kernels' summation
order (the CPU and thread count are recorded). One run is repeated and must print the identical
report.
"""
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "gpt", "runs.json")
DATA = os.path.join(ROOT, "crates", "lockstep-data", "data", "tinyshakespeare.txt.gz")
DEFAULT_SCRIPT = os.path.join(ROOT, "..", "shared", "spec", "train", "torch_gpt.py")

BASE = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
        "--batch-size", "4", "--max-iters", "4", "--warmup-iters", "2", "--eval-interval", "2",
        "--eval-iters", "2", "--sample-tokens", "20", "--top-k", "5", "--seed", "0"]


def with_(args, **kw):
    """BASE with some flags replaced (underscores in names become dashes)."""
    out = list(args)
    for k, v in kw.items():
        flag = "--" + k.replace("_", "-")
        if flag in out:
            out[out.index(flag) + 1] = str(v)
        else:
            out += [flag, str(v)]
    return out


def grid():
    return [
        BASE,
        with_(BASE, bias=0),
        with_(BASE, dropout=0.0),
        with_(BASE, dropout=0.3, grad_accum=2),
        with_(BASE, grad_accum=3, batch_size=2),
        with_(BASE, decay_lr=0, lr=3e-3),
        with_(BASE, n_layer=2, n_head=4, n_embd=32, block_size=16, seed=1),
        with_(BASE, n_embd=48, n_head=3, block_size=32, batch_size=8, max_iters=3, bias=0),
        with_(BASE, n_head=1, top_k=0, temperature=1.0, seed=7),
        with_(BASE, grad_clip=0.0, seed=3),
        with_(BASE, grad_clip=0.05, weight_decay=0.5, beta1=0.8, beta2=0.99),
        with_(BASE, max_iters=10, warmup_iters=3, lr_decay_iters=8, min_lr=2e-4, eval_interval=5,
              seed=1337),
        with_(BASE, warmup_iters=0, eval_interval=0, prompt="ROMEO:", seed=11),
        with_(BASE, val_fraction=0.5, eval_iters=3, eval_interval=3, dropout=0.3, seed=5),
        with_(BASE, n_layer=2, dropout=0.1, grad_accum=2, batch_size=3, top_k=50, seed=2),
        with_(BASE, max_iters=6, warmup_iters=10, lr=1e-2, sample_tokens=40, temperature=0.5),
    ]


def run(script, args):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, script, *args, "--data", DATA], env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"torch_gpt.py {' '.join(args)} failed:\n{p.stderr}")
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
    import torch

    script = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_SCRIPT)
    t0 = time.time()
    runs = []
    for args in grid():
        t = time.time()
        report = run(script, args)
        print(f"{time.time() - t:6.1f}s {' '.join(args)}", file=sys.stderr)
        runs.append({"args": args, "report": report})
    again = run(script, runs[3]["args"])
    assert again == runs[3]["report"], "torch_gpt.py is not deterministic"

    out = {
        "generator": "tools/golden_gpt.py",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "script": "shared/spec/train/torch_gpt.py",
        "data": "crates/lockstep-data/data/tinyshakespeare.txt.gz",
        "runs": runs,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT}: {len(runs)} runs in {time.time() - t0:.0f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
