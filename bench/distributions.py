#!/usr/bin/env python3
"""NumPy's gamma/beta/poisson/binomial (Generator and RandomState) against lockstep, in one run.

Builds and runs `crates/lockstep-rng/examples/bench_distributions.rs` (release), times the same
calls in NumPy (best of N, a fresh generator per run, as the example does; per row, rounds of
lockstep then NumPy interleaved so both see the same machine load), checks that both
drew the same bits (wrapping sum of the 64-bit patterns of the output), and prints a Markdown
table; `--write` puts it between the `<!-- BEGIN rng-dist -->` markers of BENCHMARKS.md.

    python3 bench/distributions.py [--runs 5] [--rounds 3] [--n 1000000] [--filter TEXT] [--write]
"""
import argparse
import json
import os
import platform
import subprocess
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def checksum(a):
    a = np.ascontiguousarray(a)
    return int(a.view(np.uint64).sum(dtype=np.uint64))


def numpy_call(cls, name, params):
    args = [float(p) for p in params.split(", ")]
    if name == "binomial":
        args[0] = int(args[0])

    def run(n):
        g = np.random.default_rng(0) if cls == "Generator" else np.random.RandomState(0)
        return getattr(g, name)(*args, size=n)

    return run


def best_of(runs, f):
    f()
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def cpu_name():
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--filter", default="", help="only the rows whose call contains this")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "lockstep-rng", "--example",
                    "bench_distributions"], cwd=ROOT, check=True)
    exe = os.path.join(ROOT, "target", "release", "examples", "bench_distributions")
    out = subprocess.run([exe, "1", "1000"], check=True, capture_output=True, text=True).stdout
    names = [json.loads(line)["name"] for line in out.splitlines()]
    rows = []
    for full in names:
        if a.filter and a.filter not in full:
            continue
        cls, rest = full.split(".", 1)
        name, params = rest[:-1].split("(", 1)
        f = numpy_call(cls, name, params)
        ours, ref, same = float("inf"), float("inf"), None
        # Interleaved rounds (ours, then NumPy), best of all: both see the same machine load.
        for _ in range(a.rounds):
            line = subprocess.run([exe, str(a.runs), str(a.n), full], check=True,
                                  capture_output=True, text=True).stdout.splitlines()[0]
            r = json.loads(line)
            if same is None:
                same = checksum(f(a.n)) == r["checksum"]
            ours = min(ours, r["seconds"])
            ref = min(ref, best_of(a.runs, lambda: f(a.n)))
        rows.append((full, ours, ref, same))
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {cpu_name()}, {os.cpu_count()} cores, by "
        f"`python3 bench/distributions.py --runs {a.runs} --rounds {a.rounds} --n {a.n}` (per row, "
        f"{a.rounds} interleaved rounds of lockstep then NumPy, each the best of {a.runs} runs; "
        "best of all; a fresh generator per run; 1 thread; this machine is shared, so expect "
        "±15 %). \"same bits\": the wrapping sum of the outputs' 64-bit patterns agrees.",
        "",
        f"| NumPy {np.__version__} call, 10^{len(str(a.n)) - 1} values | lockstep | NumPy | "
        "speed-up (NumPy / ours) | same bits |",
        "|---|---|---|---|---|",
    ]
    for name, ours, ref, same in rows:
        lines.append(f"| `{name}` | {ours * 1e3:.1f} ms | {ref * 1e3:.1f} ms | "
                     f"**{ref / ours:.2f}×** | {'yes' if same else 'NO'} |")
    table = "\n".join(lines)
    print(table)
    if a.write:
        path = os.path.join(ROOT, "BENCHMARKS.md")
        text = open(path).read()
        begin, end = "<!-- BEGIN rng-dist -->", "<!-- END rng-dist -->"
        if begin in text:
            head, rest = text.split(begin, 1)
            text = head + begin + "\n" + table + "\n" + end + rest.split(end, 1)[1]
        else:
            text = text.replace("<!-- END rng -->", "<!-- END rng -->\n\n" + begin + "\n" + table
                                + "\n" + end, 1)
        open(path, "w").write(text)
    if not all(r[3] for r in rows):
        raise SystemExit("some rows drew different bits from NumPy")


if __name__ == "__main__":
    main()
