#!/usr/bin/env python3
"""GEMM: lockstep's blocked kernel vs NumPy (OpenBLAS) and PyTorch, at 1 and 2 threads.

Shapes are written m×k×n (A is m×k, B is k×n; 2·m·k·n flops):
256³, 1024³, 2048³, the wide low-K products 4096×64×4096 and 64×128×50257 (an LM head), and
64×50257×128 (long K, few outputs: the split-K case).

Our side runs `crates/lockstep-tensor/examples/gemm_bench.rs` (built with
`cargo build --release -p lockstep-tensor --example gemm_bench`, which the script runs itself
when the binary is missing), which prints JSON lines; the
FMA peak is measured by the same binary (`gemm_bench peak`). NumPy and PyTorch are timed in
subprocesses so that the thread count is set before the libraries load, with
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from their environment (some machines set them,
which would pin OpenBLAS to another core type). threadpoolctl, if installed, confirms the
OpenBLAS thread count and core type; without it the script asks NumPy's bundled OpenBLAS
through ctypes (`scipy_openblas_get_corename64_`, `…_get_num_threads64_`).

One-thread rows compare CPU time of the computing thread (best of several runs, for every
library), which other processes sharing the cores inflate far less than wall time; `--wall`
compares wall time throughout. Rows at more threads always use wall time, and so do the
split-K candidates (they compute in a pool thread even at one thread), which understates them.

Usage: /opt/pyref/bin/python bench/gemm.py [--bin PATH] [--threads 1 2] [--quick] [--wall]
                                           [--dtype float32 float64] [--shapes 1024 2048]
"""

import argparse
import json
import os
import subprocess
import sys

CASES = [
    (256, 256, 256),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 64, 4096),
    (64, 128, 50257),
    (64, 50257, 128),
]

TIMER = r"""
import json, sys, time
lib, dt, m, k, n, t = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
def best(f, min_secs=1.0):
    # Best wall time and best CPU time of this thread (the product's own, at one thread).
    f()
    start, b, bc, runs = time.perf_counter(), float("inf"), float("inf"), 0
    while runs < 3 or (time.perf_counter() - start < min_secs and runs < 50):
        c, s = time.thread_time(), time.perf_counter(); f()
        b = min(b, time.perf_counter() - s); bc = min(bc, time.thread_time() - c); runs += 1
    return b, bc
info = {}
if lib == "numpy":
    import numpy as np
    rng = np.random.default_rng(0)
    a = (rng.random((m, k)) - 0.5).astype(dt); b = (rng.random((k, n)) - 0.5).astype(dt)
    secs, cpu = best(lambda: a @ b)
    try:
        from threadpoolctl import threadpool_info
        info = [{x: d.get(x) for x in ("internal_api", "num_threads", "architecture", "version")}
                for d in threadpool_info()]
    except ImportError:
        # No threadpoolctl: ask NumPy's bundled OpenBLAS directly (scipy-openblas symbols).
        import ctypes, glob, os
        libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs",
                                      "libscipy_openblas*.so"))
        info = {"note": "threadpoolctl not installed"}
        try:
            lib = ctypes.CDLL(libs[0])
            lib.scipy_openblas_get_corename64_.restype = ctypes.c_char_p
            info["corename"] = lib.scipy_openblas_get_corename64_().decode()
            info["num_threads"] = lib.scipy_openblas_get_num_threads64_()
        except (IndexError, OSError, AttributeError) as e:
            info["error"] = f"could not query OpenBLAS: {e}"
else:
    import torch
    torch.set_num_threads(t)
    g = torch.Generator().manual_seed(0)
    a = torch.rand(m, k, generator=g, dtype=getattr(torch, dt)) - 0.5
    b = torch.rand(k, n, generator=g, dtype=getattr(torch, dt)) - 0.5
    secs, cpu = best(lambda: torch.matmul(a, b))
    info = {"threads": torch.get_num_threads(), "version": torch.__version__}
out = {"secs": secs, "gflops": 2 * m * k * n / secs / 1e9, "info": info}
if t == 1 and cpu > 0:
    out["cpu_gflops"] = 2 * m * k * n / cpu / 1e9
print(json.dumps(out))
"""


def clean_env(threads):
    env = dict(os.environ)
    for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(v, None)
    for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[v] = str(threads)
    return env


def python_side(lib, dt, m, k, n, t):
    out = subprocess.run(
        [sys.executable, "-c", TIMER, lib, dt, str(m), str(k), str(n), str(t)],
        env=clean_env(t), capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def ours(binary, *args):
    out = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.path.join(target, "release", "examples", "gemm_bench"))
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--quick", action="store_true", help="only 256³ and 1024³")
    p.add_argument("--wall", action="store_true", help="wall time at one thread too")
    p.add_argument("--dtype", nargs="+", default=["float32", "float64"])
    p.add_argument("--shapes", type=int, nargs="+", help="only these square sizes")
    args = p.parse_args()

    if not os.path.exists(args.bin):
        # First run (e.g. from `bench/compare.py --all`): build the example.
        subprocess.run(["cargo", "build", "--release", "-p", "lockstep-tensor", "--example",
                        "gemm_bench"], cwd=root, check=True, capture_output=True)
    peaks = {r["isa"]: r["gflops"] for r in ours(args.bin, "peak")}
    print("FMA peak, one thread (f32 GFLOP/s; f64 is half):", json.dumps(peaks))
    peak1 = max(peaks.values()) if peaks else float("nan")
    cases = CASES[:2] if args.quick else CASES
    if args.shapes:
        cases = [(s, s, s) for s in args.shapes]
    hdr = (f"{'m×k×n':>16} {'dt':>4} {'thr':>3} {'ours':>8} {'numpy':>8} {'torch':>8} "
           f"{'/numpy':>7} {'/torch':>7} {'%peak':>6}  our algo")
    print("one-thread rows:", "wall time" if args.wall else "CPU time of the computing thread")
    print(hdr)
    checked = False
    rows = []
    for dt in args.dtype:
        for (m, k, n) in cases:
            for t in args.threads:
                ldt = "f32" if dt == "float32" else "f64"
                runs = ours(args.bin, "gemm", ldt, m, n, k, t)
                if k >= 4096 and m * n <= 128 * 256:
                    for algo in ("matmul.splitk_completion", "matmul.splitk_fixed"):
                        runs += ours(args.bin, "gemm", ldt, m, n, k, t, "best", algo)
                npy = python_side("numpy", dt, m, k, n, t)
                tor = python_side("torch", dt, m, k, n, t)
                if t == 1 and not args.wall:
                    for r in [*runs, npy, tor]:
                        r["gflops"] = r.get("cpu_gflops", r["gflops"])
                best = max(runs, key=lambda r: r["gflops"])
                if not checked:
                    print("  numpy threadpool:", json.dumps(npy["info"]))
                    print("  torch:", json.dumps(tor["info"]))
                    checked = True
                peak = peak1 * t / (2 if dt == "float64" else 1)
                g = best["gflops"]
                row = (f"{m}×{k}×{n}", ldt, t, g, npy["gflops"], tor["gflops"])
                rows.append(row)
                algos = ", ".join(f"{r['algo']}={r['gflops']:.1f}" for r in runs)
                print(f"{row[0]:>16} {ldt:>4} {t:>3} {g:8.1f} {npy['gflops']:8.1f} "
                      f"{tor['gflops']:8.1f} {g / npy['gflops']:7.2f} {g / tor['gflops']:7.2f} "
                      f"{100 * g / peak:5.0f}%  {algos}", flush=True)


if __name__ == "__main__":
    main()
