#!/usr/bin/env python3
"""How far `lockstep train --model gpt` drifts from PyTorch over a long run, and how fast both are.

    python3 tools/gpt_drift.py [--lockstep PATH] [--script PATH/TO/torch_gpt.py] [--steps 1000]
                               [--speed]

Runs the normative program (default ../shared/spec/train/torch_gpt.py) and the lockstep binary
(default $CARGO_TARGET_DIR/release/lockstep, else target/release/lockstep) with torch_gpt.py's
default configuration and --max-iters STEPS on the embedded Tiny Shakespeare, writes both
reports to tests/golden/gpt/drift.json and prints a Markdown table: the step loss at steps 1,
10, 100 and STEPS, the evaluations, the relative differences, and whether init_sha256, lrs and
sample_ids agree.

--speed instead times both at --threads 1 and 2 (4 layers, 4 heads, width 128, block 64,
batch 16, no evaluation, no sampling): each program runs 5 and 25 steps and the difference of
the times gives steps/s without start-up (Python's import of torch, reading the corpus). Times
are the children's CPU seconds (fair at 1 thread on a busy machine); --wall uses wall time
(for 2 threads, on an idle machine).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "crates", "lockstep-data", "data", "tinyshakespeare.txt.gz")
OUT = os.path.join(ROOT, "tests", "golden", "gpt", "drift.json")


def default_lockstep():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "lockstep")


def run_torch(script, args):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, script, *args, "--data", DATA], env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_lockstep(binary, args):
    p = subprocess.run([binary, "train", "--model", "gpt", *args, "--data", DATA, "--json"],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def drift(a):
    args = ["--max-iters", str(a.steps)]
    t = time.time()
    torch_r = run_torch(a.script, args)
    print(f"torch_gpt.py: {time.time() - t:.0f}s", file=sys.stderr)
    t = time.time()
    ls_r = run_lockstep(a.lockstep, args)
    print(f"lockstep: {time.time() - t:.0f}s", file=sys.stderr)
    with open(OUT, "w") as f:
        json.dump({"generator": "tools/gpt_drift.py", "args": args, "torch": torch_r,
                   "lockstep": ls_r}, f, separators=(",", ":"))
        f.write("\n")
    print("| step | PyTorch loss | lockstep loss | relative difference |")
    print("|---:|---:|---:|---:|")
    for s in sorted({1, 10, 100, a.steps}):
        if s <= a.steps:
            x, y = torch_r["step_losses"][s - 1], ls_r["step_losses"][s - 1]
            print(f"| {s} | {x:.6f} | {y:.6f} | {rel(y, x):.1e} |")
    print()
    print("| eval at step | PyTorch train / val | lockstep train / val | largest relative difference |")
    print("|---:|---:|---:|---:|")
    for et, el in zip(torch_r["evals"], ls_r["evals"]):
        if et["iter"] in (0, 50, 100, 500, a.steps) or et["iter"] == a.steps:
            d = max(rel(el["train"], et["train"]), rel(el["val"], et["val"]))
            print(f"| {et['iter']} | {et['train']:.4f} / {et['val']:.4f} | "
                  f"{el['train']:.4f} / {el['val']:.4f} | {d:.1e} |")
    print()
    same = [k for k in ("init_sha256", "parameter_names", "lrs", "sample_ids")
            if torch_r[k] == ls_r[k]]
    differ = [k for k in ("init_sha256", "parameter_names", "lrs", "sample_ids")
              if torch_r[k] != ls_r[k]]
    print(f"identical: {', '.join(same)}; different: {', '.join(differ) or 'none'}")
    if torch_r["sample_ids"] != ls_r["sample_ids"]:
        first = next(i for i, (x, y) in enumerate(zip(torch_r["sample_ids"], ls_r["sample_ids"]))
                     if x != y)
        print(f"sample_ids part at token {first}")


def speed(a):
    base = ["--eval-interval", "0", "--sample-tokens", "0"]

    def timed(cmd):
        # CPU seconds (user + system) of the child: a fair measure at 1 thread on a loaded
        # machine; wall time with --wall (needed for 2 threads, meaningful on an idle machine).
        r0, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True,
                       env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
        r1, t1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        if a.wall:
            return t1 - t
        return (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)

    print("| threads | PyTorch steps/s | lockstep steps/s | lockstep / PyTorch |")
    print("|---:|---:|---:|---:|")
    for threads in a.threads.split(","):
        rates = []
        for cmd in ([sys.executable, a.script], [a.lockstep, "train", "--model", "gpt"]):
            t = {}
            for n in (5, 25):
                t[n] = timed([*cmd, *base, "--threads", threads, "--max-iters", str(n),
                              "--data", DATA])
            rates.append(20 / (t[25] - t[5]))
        print(f"| {threads} | {rates[0]:.2f} | {rates[1]:.2f} | {rates[1] / rates[0]:.2f}x |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lockstep", default=default_lockstep())
    p.add_argument("--script",
                   default=os.path.join(ROOT, "..", "shared", "spec", "train", "torch_gpt.py"))
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--speed", action="store_true")
    p.add_argument("--threads", default="1,2", help="--speed: thread counts")
    p.add_argument("--wall", action="store_true", help="--speed: wall time, not CPU time")
    a = p.parse_args()
    if a.speed:
        speed(a)
    else:
        drift(a)


if __name__ == "__main__":
    main()
