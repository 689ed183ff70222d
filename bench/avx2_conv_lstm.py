#!/usr/bin/env python3
"""AVX2 against AVX-512 and PyTorch, one thread, by on-CPU time (so a busy shared machine still
gives comparable figures): conv2d 3x3 64->64 56x56 batch 8 (forward and input gradient) and
one LSTM layer's training products (T 8, batch 32, H 128: `lstm_input`, `lstm_layer`, their
backwards) beside PyTorch's `nn.LSTM` forward + backward of the same layer. lockstep's path is
chosen with `LOCKSTEP_ISA`, PyTorch's with `ATEN_CPU_CAPABILITY` (and MKL's and oneDNN's switches); each configuration runs in its
own process, all of them `--rounds` times interleaved, and the best of the rounds is printed,
with GFLOP/s and the fraction of `gemm_bench peak` (same run).

Usage (from the repository root): python3 bench/avx2_conv_lstm.py [--rounds 3]"""
import argparse, json, os, subprocess, sys

# PyTorch on one path: ATen's own kernels (ATEN_CPU_CAPABILITY) and the MKL and oneDNN calls, which
# ignore it (on Zen 5 their AVX-512 GEMMs have twice AVX2's FMA peak).
TORCH_ISA = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                      "ONEDNN_MAX_CPU_ISA": "AVX2"},
             "avx512": {"ATEN_CPU_CAPABILITY": "avx512"}}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXE = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "examples")

TORCH = r'''
import json, sys, time, torch, torch.nn.functional as F
torch.set_num_threads(1); torch.manual_seed(0)
def best(f, runs):
    for _ in range(3): f()
    b = float("inf")
    for _ in range(runs):
        c = time.thread_time(); f(); b = min(b, time.thread_time() - c)
    return b
x = torch.randn(8, 64, 56, 56); w = torch.randn(64, 64, 3, 3); gy = torch.randn(8, 64, 56, 56)
lstm = torch.nn.LSTM(128, 128); xs = torch.randn(8, 32, 128, requires_grad=True)
def lstm_step():
    y, _ = lstm(xs); y.backward(torch.ones_like(y))
print(json.dumps({"conv2d forward": best(lambda: F.conv2d(x, w, padding=1), 5),
                  "conv2d input grad": best(lambda: torch.nn.grad.conv2d_input(x.shape, w, gy, padding=1), 5),
                  "lstm layer": best(lstm_step, 50)}))
'''


def run(cmd, env):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=dict(os.environ, **env)).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "lockstep-tensor", "--example", "conv_bench",
                    "--example", "lstm_bench", "--example", "gemm_bench"], cwd=ROOT, check=True)
    best = {}
    put = lambda k, v: best.__setitem__(k, min(best.get(k, float("inf")), v))
    for _ in range(a.rounds):
        for isa in ("avx2", "avx512"):
            for l in run([os.path.join(EXE, "conv_bench"), "5", "issue", "conv2d"], {"LOCKSTEP_ISA": isa}).splitlines():
                d = json.loads(l)
                if d["mode"] == "det" and "weight" not in d["name"]:
                    put((isa, d["name"]), d["cpu_seconds"])
            lstm = [json.loads(l) for l in run([os.path.join(EXE, "lstm_bench"), "40"], {"LOCKSTEP_ISA": isa}).splitlines()]
            for d in lstm:
                put((isa, d["name"]), d["cpu_seconds"])
            put((isa, "lstm layer"), sum(d["cpu_seconds"] for d in lstm))
        for cap in ("avx2", "avx512"):
            for k, v in json.loads(run([sys.executable, "-c", TORCH], dict(TORCH_ISA[cap], CUDA_VISIBLE_DEVICES=""))).items():
                put(("torch " + cap, k), v)
        for l in run([os.path.join(EXE, "gemm_bench"), "peak"], {}).splitlines():
            if l.startswith("{"):
                d = json.loads(l)
                put(("peak", d["isa"]), -d["gflops"] * 1e9)
    conv_flops = 2 * 8 * 64 * 56 * 56 * 64 * 9
    lstm_flops = {"lstm_input": 2 * 256 * 512 * 128, "lstm_layer": 2 * 7 * 32 * 512 * 128,
                  "lstm_layer_backward": 4 * 7 * 32 * 512 * 128, "lstm_input_backward": 4 * 256 * 512 * 128}
    lstm_flops["lstm layer"] = sum(lstm_flops.values())
    flops = {"conv2d forward": conv_flops, "conv2d input grad": conv_flops, **lstm_flops}
    print("| row (one thread, best CPU time) | path | lockstep | GFLOP/s (of peak) | PyTorch same ISA | PyTorch / lockstep |")
    print("|---|---|---|---|---|---|")
    for name in flops:
        for isa in ("avx2", "avx512"):
            t, peak = best[(isa, name)], -best[("peak", isa)]
            g = flops[name] / t
            theirs = best.get(("torch " + isa, name))
            ratio = f"**{theirs / t:.2f}×**" if theirs else ""
            tt = f"{theirs * 1e3:.3f} ms" if theirs else ""
            print(f"| {name} | {isa} | {t * 1e3:.3f} ms | {g / 1e9:.1f} ({g / peak:.0%}) | {tt} | {ratio} |")
    print(f"\nFMA peak (gemm_bench peak, best of the rounds): avx2 {-best[('peak', 'avx2')] / 1e9:.1f}, "
          f"avx512 {-best[('peak', 'avx512')] / 1e9:.1f} GFLOP/s. `lstm layer`: the sum of the four lstm rows "
          f"against PyTorch's nn.LSTM forward + backward (its autograd included).")


if __name__ == "__main__":
    main()
