#!/usr/bin/env python3
"""Times every example (crates/lockstep/examples/NAME.rs, release build) and its PyTorch twin
(tools/examples/NAME.py) in the same run, at 1 and 2 threads, with the examples' default
settings: wall time and CPU time (user + system of the child), best of `--repeat` runs, and
prints a Markdown table for BENCHMARKS.md. The twin's time includes Python's and torch's
start-up (about a second); the example's includes loading the data.

usage (from the repository root): cargo build --release -p lockstep --examples &&
    python3 bench/examples.py [--repeat 3] [NAME ...]
"""
import argparse
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ["mnist", "vae", "dcgan", "time_sequence_prediction"]


def timed(cmd):
    """(wall seconds, CPU seconds) of one run of `cmd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def best(cmd, repeat):
    runs = [timed(cmd) for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("names", nargs="*", default=NAMES)
    a = p.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    print("| example | threads | lockstep wall / CPU (s) | PyTorch wall / CPU (s) | speed-up (wall) |")
    print("|---|---|---|---|---|")
    for name in a.names:
        exe = os.path.join(target, "release", "examples", name)
        for threads in (1, 2):
            ours = best([exe, "--threads", str(threads), "--quiet"], a.repeat)
            torch = best([sys.executable, os.path.join(ROOT, "tools", "examples", f"{name}.py"),
                          "--threads", str(threads)], a.repeat)
            print(f"| {name} | {threads} | {ours[0]:.2f} / {ours[1]:.2f} | "
                  f"{torch[0]:.2f} / {torch[1]:.2f} | {torch[0] / ours[0]:.2f}× |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
