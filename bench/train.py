#!/usr/bin/env python3
"""Training speed, lockstep vs PyTorch, same machine, same run.

1. One training step (forward, backward, SGD with momentum) of the `lockstep train` models:
   mlp (H=256, batch 64), cnn (batch 64), lstm (H=128, batch 32), and gru and rnn (the lstm
   model with nn.GRU / nn.RNN in its place; not torch_train.py's), at 1 and 2 threads; lockstep in
   deterministic and nondeterministic mode. Each configuration runs in its own process, so the
   peak resident memory (VmHWM / ru_maxrss) is that configuration's.
2. The lstm step's floor: its multiply-adds at this machine's measured FMA peak (`gemm_bench
   peak`), beside 2x PyTorch's best at one thread (the issue-10 goal).
3. A whole run: `torch_train.py` vs `lockstep train` with the same flags (2 epochs, 0 workers).
4. The gpt training step (spec defaults) against `torch_gpt.py`, deterministic and not, at 1 and 2
   threads, wall and CPU time per step (`--gpt-only` runs just this row).

Usage (from the repository root; needs `pip install torch numpy` and a release build):
    python3 bench/train.py [--steps 200] [--rounds 3] [--spec ../shared/spec/train/torch_train.py] [--isa avx2]

`--isa avx2` runs both sides on their AVX2 paths (`LOCKSTEP_ISA=avx2`, `ATEN_CPU_CAPABILITY=avx2`, and
`MKL_ENABLE_INSTRUCTIONS=AVX2`, `ONEDNN_MAX_CPU_ISA=AVX2` for the MKL and oneDNN that PyTorch's GEMMs and
convolutions call: ATen's switch does not reach them, and on Zen 5 their AVX-512 code has twice the AVX2
FMA peak; inherited by every process this script starts); the FMA peak line is then that path's peak.
Binaries are looked for under `$CARGO_TARGET_DIR` (default `target/`).
"""
import argparse, json, os, resource, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
ISA_ENV = {"avx2": {"LOCKSTEP_ISA": "avx2", "ATEN_CPU_CAPABILITY": "avx2",
                    "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
           "avx512": {"LOCKSTEP_ISA": "avx512", "ATEN_CPU_CAPABILITY": "avx512"}}
SIZES = {"mlp": (256, 64), "cnn": (64, 64), "lstm": (128, 32), "gru": (128, 32), "rnn": (128, 32)}

TORCH_STEP = r'''
import json, resource, sys, time, importlib.util
import torch, torch.nn.functional as F
spec = importlib.util.spec_from_file_location("tt", sys.argv[1]); tt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tt)
kind, threads, steps, hidden, batch = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
torch.set_num_threads(threads); torch.manual_seed(0)
class RecNet(torch.nn.Module):
    """torch_train.py's LstmNet with nn.GRU or nn.RNN in place of nn.LSTM."""
    def __init__(self, cls, hidden, p):
        super().__init__()
        self.rec = cls(8, hidden, num_layers=2, batch_first=True, dropout=p)
        self.head = torch.nn.Linear(hidden, 10)
    def forward(self, x):
        out, _ = self.rec(x.view(-1, 8, 8))
        return self.head(out[:, -1])
rec = {"gru": torch.nn.GRU, "rnn": torch.nn.RNN}
model = RecNet(rec[kind], hidden, 0.1) if kind in rec else tt.build_model(kind, hidden, 0.1); model.train()
x = torch.rand(batch, 64); y = torch.randint(0, 10, (batch,))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
def step():
    loss = F.cross_entropy(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
for _ in range(10): step()
best, total = float("inf"), 0.0
for _ in range(steps):
    t = time.perf_counter(); step(); s = time.perf_counter() - t
    best = min(best, s); total += s
print(json.dumps({"best": best, "mean": total / steps, "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
'''


def ours(kind, threads, mode, steps, fast=False):
    exe = os.path.join(TARGET, "release", "examples", "train_bench")
    out = subprocess.run([exe, kind, str(threads), mode, str(steps)] + (["fast"] if fast else []),
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def theirs(spec, kind, threads, steps):
    h, b = SIZES[kind]
    out = subprocess.run([sys.executable, "-c", TORCH_STEP, spec, kind, str(threads), str(steps), str(h), str(b)],
                         check=True, capture_output=True, text=True, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    return json.loads(out.stdout.strip().splitlines()[-1])


def lstm_macs(h, b, steps=8, inputs=8, classes=10):
    """Multiply-adds of one training step of `torch_train.py`'s lstm (2 layers, batch-first 8×8
    sequences, a linear head on the last output): (forward, backward). The products on the zero
    initial state (step 0's `h·W_hhᵀ`, its `W_hh` gradient and `h0`'s gradient) are left out:
    they are exact zeros, and lockstep skips them."""
    g = 4 * h
    proj0, proj1 = steps * b * g * inputs, steps * b * g * h
    rec = (steps - 1) * b * g * h
    head = b * classes * h
    fwd = proj0 + rec + proj1 + rec + head
    # Layer 1: hidden-state and W_hh gradients through the steps, W_ih's and the input's
    # gradients; layer 0 the same without the input's; the head's weight and input gradients.
    bwd = (2 * rec + 2 * proj1) + (2 * rec + proj0) + 2 * head
    return fwd, bwd


def fma_peak(isa="default"):
    """One core's f32 multiply-adds per second, from `gemm_bench peak`: its best instruction set,
    or the one `--isa` names."""
    exe = os.path.join(TARGET, "release", "examples", "gemm_bench")
    out = subprocess.run([exe, "peak"], check=True, capture_output=True, text=True).stdout
    peaks = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if isa != "default":
        peaks = [p for p in peaks if p.get("isa") == isa] or peaks
    return max(p["gflops"] for p in peaks) * 1e9 / 2


def wall(cmd, env=None):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return time.perf_counter() - t


def timed(cmd, env=None):
    """(wall, CPU) seconds of one child process (its user + system time, from its rusage)."""
    r0, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    w, r1 = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
    return w, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


# torch_gpt.py unchanged, timed from inside its own process: every `AdamW.step` (one per
# optimizer step) records the wall clock and the process's CPU time (all threads) as it returns,
# so importing torch and loading the data (which varied by tens of seconds here) fall outside.
TORCH_GPT_TIMED = r'''
import importlib.util, json, sys, time, torch
spec = importlib.util.spec_from_file_location("torch_gpt", sys.argv[1]); tg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tg)
marks, step = [], torch.optim.AdamW.step
def timed_step(self, *args, **kw):
    r = step(self, *args, **kw); marks.append((time.perf_counter(), time.process_time())); return r
torch.optim.AdamW.step = timed_step
sys.argv = [sys.argv[1]] + sys.argv[2:]
tg.main()
print(json.dumps({"marks": marks}))
'''


def gpt_rows(a):
    """The gpt training step (the spec's defaults: 4 layers, 4 heads, width 128, block 64, batch 16;
    no evaluation, no sampling), wall and CPU time per step, best of the rounds; lockstep
    deterministic and nondeterministic against torch_gpt.py, same flags, same run.

    lockstep: the time of `--max-iters HI` minus `--max-iters LO` over HI - LO steps (its start-up,
    a few milliseconds, and the first steps cancel). PyTorch: one run of HI steps timed inside its
    process (TORCH_GPT_TIMED), from the end of step LO to the end of step HI; the difference of
    two runs does not work for it here, its start-up varies by more than the steps take."""
    lo, hi = a.gpt_iters
    exe = os.path.join(TARGET, "release", "lockstep")
    data = os.path.join(ROOT, "crates", "lockstep-data", "data", "tinyshakespeare.txt.gz")
    common = ["--eval-interval", "0", "--sample-tokens", "0"]
    print(f"\ngpt, one training step (default config, no evaluation or sampling), wall / CPU per step, "
          f"steps {lo + 1}..{hi}, best of {a.rounds} rounds (lockstep: run of {hi} − run of {lo} steps; "
          f"PyTorch: timed inside its process).\n")
    print("| threads | lockstep det | lockstep nondet | det / nondet (CPU) | PyTorch | PyTorch / det (wall) | "
          "PyTorch / det (CPU) | per round (wall) |")
    print("|---|---|---|---|---|---|---|---|")
    for threads in (1, 2):
        t = ["--threads", str(threads)]
        lock = {
            "det": lambda n: [exe, "train", "--model", "gpt", "--json", "--max-iters", str(n)] + common + t,
            "nondet": lambda n: [exe, "train", "--model", "gpt", "--json", "--nondeterministic",
                                 "--max-iters", str(n)] + common + t,
        }
        best = {k: (float("inf"), float("inf")) for k in ("det", "nondet", "torch")}
        # Each round's PyTorch / det wall ratio: how far the best-of figures can be trusted (on a
        # shared host a burst of load slows one side of a round; the median round holds up better
        # than the ratio of two best-of figures taken in different rounds).
        per_round = []
        for _ in range(a.rounds):
            for k, c in lock.items():
                (w0, c0), (w1, c1) = timed(c(lo)), timed(c(hi))
                w, cpu = (w1 - w0) / (hi - lo), (c1 - c0) / (hi - lo)
                best[k] = (min(best[k][0], w), min(best[k][1], cpu))
                if k == "det":
                    det_w = w
            out = subprocess.run([sys.executable, "-c", TORCH_GPT_TIMED, a.gpt_spec, "--data", data,
                                  "--max-iters", str(hi)] + common + t, check=True, capture_output=True,
                                 text=True, env=dict(os.environ, CUDA_VISIBLE_DEVICES="",
                                                     OMP_NUM_THREADS=str(threads))).stdout
            marks = json.loads(out.strip().splitlines()[-1])["marks"]
            (w0, c0), (w1, c1) = marks[lo - 1], marks[hi - 1]
            w, cpu = (w1 - w0) / (hi - lo), (c1 - c0) / (hi - lo)
            best["torch"] = (min(best["torch"][0], w), min(best["torch"][1], cpu))
            per_round.append(w / det_w)
        f = lambda k: f"{best[k][0]*1e3:.1f} / {best[k][1]*1e3:.1f} ms"
        (dw, dc), (_, nc), (tw, tc) = best["det"], best["nondet"], best["torch"]
        print(f"| {threads} | {f('det')} | {f('nondet')} | {dc/nc:.2f}× | {f('torch')} | **{tw/dw:.2f}×** | "
              f"**{tc/dc:.2f}×** | {' '.join(f'{r:.2f}' for r in per_round)} "
              f"(median {statistics.median(per_round):.2f}) |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure every configuration this many times, interleaved (lockstep det, nondet, "
                         "PyTorch, again); the table shows the best of the rounds and each round's ratio")
    ap.add_argument("--spec", default=os.path.join(ROOT, "..", "shared", "spec", "train", "torch_train.py"))
    ap.add_argument("--isa", choices=["default", "avx2", "avx512"], default="default",
                    help="run lockstep and PyTorch on this instruction-set path (LOCKSTEP_ISA and "
                         "ATEN_CPU_CAPABILITY, set before torch is imported)")
    ap.add_argument("--gpt-spec", default=os.path.join(ROOT, "..", "shared", "spec", "train", "torch_gpt.py"))
    ap.add_argument("--gpt-iters", type=int, nargs=2, default=(10, 50), metavar=("LO", "HI"),
                    help="the gpt row times HI minus LO optimizer steps")
    ap.add_argument("--gpt-only", action="store_true", help="only the gpt row")
    a = ap.parse_args()
    if a.isa != "default":
        os.environ.update(ISA_ENV[a.isa])
    if a.gpt_only:
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "lockstep-cli", "--bin", "lockstep"],
                       cwd=ROOT, check=True)
        gpt_rows(a)
        return
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "lockstep-cli", "--example", "train_bench",
                    "--bin", "lockstep"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "lockstep-tensor", "--example", "gemm_bench"],
                   cwd=ROOT, check=True)
    import torch
    print(f"One training step (forward + backward + SGD momentum), best and mean over {a.steps} steps after 10 "
          f"warm-up steps (on a loaded machine compare the best-of figures); peak RSS of the process. "
          f"`cnn fast`: lockstep with `set_allow_fast_conv(true)` (Winograd). PyTorch {torch.__version__}"
          f" ({torch.backends.cpu.get_cpu_capability()} kernels; lockstep path {os.environ.get('LOCKSTEP_ISA', 'default')}).\n")
    print("| model | threads | lockstep det best / mean | lockstep nondet best / mean | det / nondet (best) | "
          "PyTorch best / mean | PyTorch / det (best) | per round | peak RSS lockstep | peak RSS PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ms = lambda r: f"{r['best']*1e3:.3f} / {r['mean']*1e3:.3f} ms"
    # Best of the rounds' bests, and the mean of the round with that best.
    best = lambda runs: min(runs, key=lambda r: r["best"])
    torch_best = {}
    for kind, fast in (("mlp", False), ("cnn", False), ("cnn", True), ("lstm", False), ("gru", False),
                        ("rnn", False)):
        for threads in (1, 2):
            ds, ns, ts = [], [], []
            for _ in range(a.rounds):
                ds.append(ours(kind, threads, "det", a.steps, fast))
                ns.append(ours(kind, threads, "nondet", a.steps, fast))
                ts.append(theirs(a.spec, kind, threads, a.steps))
            d, n, t = best(ds), best(ns), best(ts)
            torch_best[kind, threads] = t["best"]
            rounds = " ".join(f"{tr['best']/dr['best']:.2f}" for dr, tr in zip(ds, ts))
            name = kind + (" fast" if fast else "")
            print(f"| {name} | {threads} | {ms(d)} | {ms(n)} | {d['best']/n['best']:.2f}× | "
                  f"{ms(t)} | **{t['best']/d['best']:.2f}×** | {rounds} | {d['peak_rss_kb']/1024:.0f} MiB | "
                  f"{t['peak_rss_kb']/1024:.0f} MiB |", flush=True)
    h, b = SIZES["lstm"]
    fwd, bwd = lstm_macs(h, b)
    peak = fma_peak(a.isa)
    print(f"\nlstm floor: its step's products are {(fwd + bwd) / 1e6:.1f} M multiply-adds (forward {fwd / 1e6:.1f} M, "
          f"backward {bwd / 1e6:.1f} M; step 0's zero-state products left out); at this machine's FMA peak of "
          f"{peak / 1e9:.1f} G multiply-adds/s on one core (`gemm_bench peak`) they alone take "
          f"{(fwd + bwd) / peak * 1e3:.2f} ms; 2× PyTorch's best at 1 thread is {torch_best['lstm', 1] / 2 * 1e3:.2f} ms.")
    data = os.path.join(ROOT, "crates", "lockstep-data", "data", "digits.csv.gz")
    print("\nA whole run, `torch_train.py` vs `lockstep train`, same flags (`--epochs 2 --workers 0`), wall time "
          "including start-up.\n")
    print("| model | threads | lockstep train | torch_train.py | ratio |")
    print("|---|---|---|---|---|")
    exe = os.path.join(TARGET, "release", "lockstep")
    for kind in ("mlp", "cnn", "lstm"):
        for threads in (1, 2):
            flags = ["--model", kind, "--epochs", "2", "--threads", str(threads)]
            ours_t = wall([exe, "train", "--json"] + flags)
            theirs_t = wall([sys.executable, a.spec, "--data", data] + flags, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
            print(f"| {kind} | {threads} | {ours_t:.2f} s | {theirs_t:.2f} s | **{theirs_t/ours_t:.2f}×** |", flush=True)
    gpt_rows(a)


if __name__ == "__main__":
    main()
