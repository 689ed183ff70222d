#!/usr/bin/env python3
"""Times every example (crates/lockstep/examples/NAME.rs, release build) and its PyTorch twin
(tools/examples/NAME.py) in the same run, at 1 and 2 threads, and prints a Markdown table for
BENCHMARKS.md.

Per example and thread count: the whole run's wall and CPU time (user + system of the child,
from `wait4`), best of `--repeat`; the same program with no training (`START_UP` below: the
same flags with zero epochs/steps, so it loads the data, builds the model and prints its report)
timed the same way, and subtracted — the "work" columns (CPU time, and wall time: at two threads
the CPU time counts a spinning helper) compare the training alone, without
Python's and torch's start-up (about 2–3 s) or lockstep's; lockstep in nondeterministic mode
(`--nondeterministic`) against its default deterministic mode; and the peak resident memory of
each child (`ru_maxrss` of that process alone).

`time_sequence_prediction` runs a shortened configuration (`CONFIG`: the same flags on both
sides): its default (15 LBFGS steps of up to 20 evaluations over 1,000 points) takes minutes;
mnist and vae run 4× and 10× their default epochs, so that their work outweighs the noise of
the start-up subtracted.

usage (from the repository root): cargo build --release -p lockstep --examples &&
    python3 bench/examples.py [--repeat 3] [--profile release] [NAME ...]
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ["mnist", "vae", "dcgan", "time_sequence_prediction"]
# Flags given to both sides for every run of an example.
CONFIG = {
    "time_sequence_prediction": ["--steps", "1", "--L", "200", "--future", "200"],
    # More epochs than the defaults (14 and 10): lockstep's whole default run takes 0.9 s and
    # 0.2 s, so the work would be a difference of two start-ups of ≈ 3.3 s whose noise (±0.2 s)
    # is as large as PyTorch's work itself.
    "mnist": ["--epochs", "56"],
    "vae": ["--epochs", "100"],
}
# Flags added to measure start-up (no training step), both sides.
START_UP = {
    "mnist": ["--epochs", "0"],
    "vae": ["--epochs", "0"],
    "dcgan": ["--niter", "0"],
    "time_sequence_prediction": ["--steps", "0"],
}


def timed(cmd):
    """(wall s, CPU s, peak RSS MiB) of one run of `cmd`, from this child's own rusage."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: exit {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def best(cmd, repeat):
    runs = [timed(cmd) for _ in range(repeat)]
    return tuple(min(r[i] for r in runs) for i in range(3))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--profile", default="release", help="cargo profile directory of the build")
    p.add_argument("names", nargs="*", default=NAMES)
    a = p.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    print("| example | threads | lockstep wall / CPU (s) | PyTorch wall / CPU (s) | speed-up "
          "wall / CPU | start-up lockstep / PyTorch, CPU (s) | speed-up of the work, CPU / wall | "
          "nondet / det CPU (s) | peak RSS lockstep / PyTorch (MiB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in a.names:
        exe = os.path.join(target, a.profile, "examples", name)
        twin = [sys.executable, os.path.join(ROOT, "tools", "examples", f"{name}.py")]
        cfg = CONFIG.get(name, [])
        for threads in (1, 2):
            t = ["--threads", str(threads)] + cfg
            ours = best([exe, "--quiet"] + t, a.repeat)
            nondet = best([exe, "--quiet", "--nondeterministic"] + t, a.repeat)
            torch = best(twin + t, a.repeat)
            ours0 = best([exe, "--quiet"] + t + START_UP[name], a.repeat)
            torch0 = best(twin + t + START_UP[name], a.repeat)
            work = (torch[1] - torch0[1]) / max(ours[1] - ours0[1], 1e-9)
            work_wall = (torch[0] - torch0[0]) / max(ours[0] - ours0[0], 1e-9)
            print(f"| {name} | {threads} | {ours[0]:.2f} / {ours[1]:.2f} | "
                  f"{torch[0]:.2f} / {torch[1]:.2f} | {torch[0] / ours[0]:.2f}× / "
                  f"{torch[1] / ours[1]:.2f}× | {ours0[1]:.2f} / {torch0[1]:.2f} | {work:.2f}× / {work_wall:.2f}× | "
                  f"{nondet[1]:.2f} / {ours[1]:.2f} ({ours[1] / nondet[1]:.2f}×) | "
                  f"{ours[2]:.0f} / {torch[2]:.0f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
