#!/usr/bin/env python3
"""Times lockstep against PyTorch and NumPy on this machine, in one run, and writes the tables
into BENCHMARKS.md (each between its BEGIN/END markers).

Usage (from the repository root; needs `pip install torch numpy`):
    python3 bench/compare.py [--runs 5] [--no-write] [--all] [--isa avx2]

Without --all: the random streams only (this file). With --all, also the other comparison
scripts in this folder, one after the other in the same run: tensor_ops.py (reductions and
the scatter family), gemm.py, conv.py, dataloader.py and train.py; each one's output goes into its own
section.

Our side is `cargo run --release --example bench_streams` (best of N runs per row); the
reference side is timed here the same way: best of N, output tensors preallocated, one thread
(PyTorch's and NumPy's samplers are serial, as ours are, except the Philox fill).

`--isa avx2` runs both sides on their AVX2 paths (`LOCKSTEP_ISA=avx2` for lockstep,
`ATEN_CPU_CAPABILITY=avx2` for PyTorch's own kernels and `MKL_ENABLE_INSTRUCTIONS=AVX2`,
`ONEDNN_MAX_CPU_ISA=AVX2` for the MKL and oneDNN it calls — without those its GEMMs stay on
AVX-512, which on Zen 5 has twice AVX2's FMA peak — set for this process and every script and
binary it starts), so an AVX-512 machine measures what an AVX2-only one would run; the tables then go to
sections of their own (`<!-- BEGIN rng-avx2 -->` …), beside the default ones.
"""
import argparse, json, os, platform, subprocess, sys, time

# What `--isa NAME` sets: lockstep's instruction-set switch and PyTorch's kernel choice (ATen's own
# kernels, and MKL's and oneDNN's, which ignore ATEN_CPU_CAPABILITY).
ISA_ENV = {"avx2": {"LOCKSTEP_ISA": "avx2", "ATEN_CPU_CAPABILITY": "avx2",
                    "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
           "avx512": {"LOCKSTEP_ISA": "avx512", "ATEN_CPU_CAPABILITY": "avx512"}}


def apply_isa(isa):
    """Sets the environment for `--isa` before torch is imported (ATen reads it once)."""
    if isa != "default":
        os.environ.update(ISA_ENV[isa])
    return "" if isa == "default" else "-" + isa


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 10_000_000


CLOCK = time.perf_counter  # `--cpu-time`: time.thread_time (on-CPU time of this thread)
# The rows whose work runs on the timing thread on both sides (others fill in parallel, where
# the calling thread's CPU time says nothing); `--cpu-time` times these by on-CPU time.
CPU_ROWS = {"torch.randn f64 1e7", "torch.randn f64 1e7 (platform libm transform)"}


def best_of(runs, f, cpu_row=False):
    """(wall, clock) best of `runs`: `clock` is CLOCK's for a CPU_ROWS row, else wall time."""
    clock = CLOCK if cpu_row else time.perf_counter
    f()
    best = [float("inf"), float("inf")]
    for _ in range(runs):
        t, c = time.perf_counter(), clock()
        f()
        best = [min(best[0], time.perf_counter() - t), min(best[1], clock() - c)]
    return tuple(best)


def reference_timings(runs):
    import numpy as np
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x32 = torch.empty(N)
    x64 = torch.empty(N, dtype=torch.float64)
    g = np.random.default_rng(0)
    rs = np.random.RandomState(0)
    out = np.empty(N)
    return {
        "torch.rand f32 1e7": ("PyTorch " + torch.__version__, best_of(runs, lambda: x32.uniform_())),
        "torch.randn f32 1e7": ("PyTorch " + torch.__version__, best_of(runs, lambda: x32.normal_())),
        "torch.randn f64 1e7": ("PyTorch " + torch.__version__, best_of(runs, lambda: x64.normal_(), True)),
        "numpy Generator.random f64 1e7": ("NumPy " + np.__version__, best_of(runs, lambda: g.random(out=out))),
        "numpy Generator.standard_normal f64 1e7": (
            "NumPy " + np.__version__, best_of(runs, lambda: g.standard_normal(out=out))),
        "numpy RandomState.rand f64 1e7": ("NumPy " + np.__version__, best_of(runs, lambda: rs.random_sample(N))),
    }


def ours(runs):
    cmd = ["cargo", "run", "--quiet", "--release", "-p", "lockstep-rng", "--example", "bench_streams", "--", str(runs)]
    text = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def table(rows, ref):
    lines = ["| benchmark | threads | lockstep | reference | reference time | speed-up (ref / ours) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if CLOCK is not time.perf_counter and r["name"] in CPU_ROWS:
            r["seconds"] = r["cpu_seconds"]
        ms = r["seconds"] * 1e3
        if r["name"] in ref and r["threads"] == 1:
            lib, t = ref[r["name"]]
            t = t[r["name"] in CPU_ROWS]
            lines.append(f"| {r['name']} | 1 | {ms:.1f} ms | {lib} | {t * 1e3:.1f} ms | **{t / r['seconds']:.2f}×** |")
        else:
            gbs = r["elements"] * 4 / r["seconds"] / 1e9
            lines.append(f"| {r['name']} | {r['threads']} | {ms:.1f} ms ({gbs:.2f} GB/s) | – | – | – |")
    return "\n".join(lines)


SECTIONS = [
    ("tensor-ops-lockstep", "Reductions and the scatter family: lockstep, det vs nondet (benches/reduce_index.rs)",
     ["cargo", "bench", "-q", "-p", "lockstep-tensor", "--bench", "reduce_index"]),
    ("tensor-ops", "Reductions and the scatter family: PyTorch, same cases (bench/tensor_ops.py)", ["tensor_ops.py"]),
    ("gemm", "GEMM (bench/gemm.py)", ["gemm.py"]),
    ("conv", "Convolution (bench/conv.py)", ["conv.py"]),
    ("dataloader", "DataLoader (bench/dataloader.py)", ["dataloader.py"]),
    ("train", "Training steps and whole runs (bench/train.py)", ["train.py"]),
]


def write_section(name, title, body):
    path = os.path.join(ROOT, "BENCHMARKS.md")
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if begin not in text:
        text += f"\n## {title}\n\n{begin}\n{end}\n"
    pre, rest = text.split(begin, 1)
    _, post = rest.split(end, 1)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(pre + begin + "\n" + body + end + post)
    os.replace(tmp, path)


def run_others(write, suffix=""):
    here = os.path.dirname(os.path.abspath(__file__))
    for name, title, cmd in SECTIONS:
        print(f"== {title}", flush=True)
        argv = cmd if cmd[0] == "cargo" else [sys.executable, os.path.join(here, cmd[0])] + cmd[1:]
        env = dict(os.environ, LOCKSTEP_QUICK="1")
        r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env)
        out = r.stdout if r.returncode == 0 else r.stdout + "\nFAILED:\n" + r.stderr[-2000:]
        print(out)
        if write:
            stamp = time.strftime("%Y-%m-%d")
            body = out if out.lstrip().startswith("|") else "```\n" + out.rstrip() + "\n```\n"
            flag = f" --isa {suffix[1:]}" if suffix else ""
            write_section(name + suffix, title + (f" ({suffix[1:].upper()} path)" if suffix else ""),
                          f"Measured {stamp} by `python3 bench/compare.py --all{flag}`.\n\n" + body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--isa", choices=["default", "avx2", "avx512"], default="default",
                    help="run lockstep and PyTorch on this instruction-set path (LOCKSTEP_ISA and "
                         "ATEN_CPU_CAPABILITY); the tables go to their own sections")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time the randn f64 rows (serial on both sides) by the on-CPU time of the timing "
                         "thread, on both sides (comparable while other processes share the cores)")
    a = ap.parse_args()
    suffix = apply_isa(a.isa)
    if a.cpu_time:
        global CLOCK
        CLOCK = time.thread_time
    rows = ours(a.runs)
    ref = reference_timings(a.runs)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    body = (f"Measured {time.strftime('%Y-%m-%d')} on {cpu}, {os.cpu_count()} cores, by "
            f"`python3 bench/compare.py --runs {a.runs}{' --isa ' + a.isa if suffix else ''}"
            f"{' --cpu-time' if a.cpu_time else ''}` (best of {a.runs}{', on-CPU time' if a.cpu_time else ''}; same machine, same run; "
            f"this machine is shared, so expect ±15 %).\n\n" + table(rows, ref) + "\n")
    print(body)
    if not a.no_write:
        write_section("rng" + suffix, "Random streams" + (f" ({a.isa.upper()} path)" if suffix else ""), body)
    if a.all:
        run_others(not a.no_write, suffix)


if __name__ == "__main__":
    sys.exit(main())
