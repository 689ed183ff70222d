#!/usr/bin/env python3
"""The memory-bound rows of issue 31 (`sum` 64 Mi f32, embedding backward 32k×512 → 50k),
lockstep (deterministic mode) against PyTorch in the same run, with a plain read's bandwidth.

    python3 bench/mem_bound.py [--runs 15] [--rounds 3] [--isa avx2]

Our side is `cargo run --release -p lockstep-tensor --example mem_bound`; PyTorch's the same
cases timed here. Each round runs both sides; the table gives the best over the rounds of each
side's best of `--runs`, and each round's ratio. One-thread rows are timed by the on-CPU time
of the timing thread on both sides (comparable while other processes share the cores), the
two-thread rows by wall time (take them with more salt on a busy machine). `--isa avx2` runs
both on their AVX2 paths (`LOCKSTEP_ISA`, `ATEN_CPU_CAPABILITY`, and MKL's and oneDNN's
`MKL_ENABLE_INSTRUCTIONS`, `ONEDNN_MAX_CPU_ISA`, set before torch loads).
"""
import argparse, json, os, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ISA_ENV = {"avx2": {"LOCKSTEP_ISA": "avx2", "ATEN_CPU_CAPABILITY": "avx2",
                    "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
           "avx512": {"LOCKSTEP_ISA": "avx512", "ATEN_CPU_CAPABILITY": "avx512"}}
BYTES = {"sum 64Mi f32": 64 << 22, "embedding_backward 32k x 512 -> 50k": (32 << 10) * 512 * 4,
         "read 256MiB": 256 << 20}


def ours(runs):
    cmd = ["cargo", "run", "--quiet", "--release", "-p", "lockstep-tensor", "--example", "mem_bound", "--",
           str(runs)]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return {(r["case"], r["threads"]): r for r in map(json.loads, filter(str.strip, out.splitlines()))}


def theirs(runs):
    import torch
    g = torch.Generator().manual_seed(0)
    x = torch.rand(64 << 20, generator=g) - 0.5
    grad = torch.rand(32 << 10, 512, generator=g) - 0.5
    ids = torch.randint(0, 50_000, (32 << 10,), generator=g)
    cases = [("sum 64Mi f32", lambda: x.sum()),
             ("embedding_backward 32k x 512 -> 50k",
              lambda: torch.ops.aten.embedding_dense_backward(grad, ids, 50_000, -1, False))]
    res = {}
    for name, f in cases:
        for t in (1, 2):
            torch.set_num_threads(t)
            f()
            wall = cpu = float("inf")
            for _ in range(runs):
                w0, c0 = time.perf_counter(), time.thread_time()
                f()
                wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.thread_time() - c0)
            res[name, t] = {"wall": wall, "cpu": cpu}
    return res, torch.__version__, torch.backends.cpu.get_cpu_capability()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--isa", choices=["default", "avx2", "avx512"], default="default")
    a = ap.parse_args()
    if a.isa != "default":
        os.environ.update(ISA_ENV[a.isa])
    code = "import sys, json; sys.path.insert(0, %r); import mem_bound as m; r, v, c = m.theirs(%d); " \
           "print(json.dumps([v, c, [[k[0], k[1], x] for k, x in r.items()]]))" % (os.path.dirname(__file__), a.runs)
    rounds = []
    for _ in range(a.rounds):
        o = ours(a.runs)
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
        ver, cap, rows = json.loads(out.strip().splitlines()[-1])
        rounds.append((o, {(n, t): x for n, t, x in rows}))
    clock = lambda t: "cpu" if t == 1 else "wall"
    read = min(o["read 256MiB", 1]["cpu"] for o, _ in rounds)
    print(f"PyTorch {ver} ({cap} kernels), lockstep path {os.environ.get('LOCKSTEP_ISA', 'default')}; "
          f"best of {a.runs} runs × {a.rounds} rounds; plain read (xor-fold, 1 thread): "
          f"{BYTES['read 256MiB'] / read / 1e9:.1f} GB/s\n")
    b = min(o["sum 64Mi f32 one piece at a time", 1]["cpu"] for o, _ in rounds)
    print(f"lockstep sum 64Mi f32 with one piece at a time on this path (the AVX2 schedule before the "
          f"four-piece kernel, same bits), 1 thread: {b * 1e3:.2f} ms ({BYTES['sum 64Mi f32'] / b / 1e9:.1f} GB/s)\n")
    print("| case | threads | clock | lockstep det | PyTorch | PyTorch / det | per round | det GB/s (read) | of plain read |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ("sum 64Mi f32", "embedding_backward 32k x 512 -> 50k"):
        for t in (1, 2):
            k, c = (name, t), clock(t)
            d = min(o[k][c] for o, _ in rounds)
            p = min(th[k][c] for _, th in rounds)
            per = " ".join(f"{th[k][c] / o[k][c]:.2f}" for o, th in rounds)
            gbs = BYTES[name] / d / 1e9
            frac = f"{gbs / (BYTES['read 256MiB'] / read / 1e9):.0%}" if t == 1 else "–"
            print(f"| {name} | {t} | {c} | {d * 1e3:.2f} ms | {p * 1e3:.2f} ms | **{p / d:.2f}×** | {per} | "
                  f"{gbs:.1f} | {frac} |", flush=True)


if __name__ == "__main__":
    main()
