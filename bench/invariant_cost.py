#!/usr/bin/env python3
"""What invariant seeding's micro-shard sum costs: `lockstep train --seeding invariant` at
batch 64, one thread, CPU time (user + system, of the child process alone; the machine may be
shared) of a whole run, best of `--rounds`.

Per model (mlp, cnn, lstm: `torch_train.py`'s; gpt: `torch_gpt.py`'s defaults, 4 layers,
width 128, block 64):
* `default`: invariant seeding as it now is, the step's gradient summed over micro-shards of
  8 samples (8 micro-shards at batch 64);
* `one shard`: `--micro-batch 64`, the whole batch one micro-shard (the same work as an
  un-sharded step, plus the gradients' copy through the exchange);
* `old` (with `--old BIN`, a build from before the change; mlp, cnn, lstm): invariant seeding
  without micro-shards, the whole batch's mean loss in one backward;
* `torch`: torch seeding (PyTorch's draws, no micro-shards), the same sizes;
* `before` (with `--before BIN`, another build, e.g. from before a speed-up): its `default`,
  timed in the same run.
The ratio is `default` over the un-sharded run (`old` where given, else `one shard`).

Usage (repository root, a release build): python3 bench/invariant_cost.py [--old BIN] [--before BIN]
"""
import argparse, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "crates/lockstep-data/data/tinyshakespeare.txt.gz")


def cpu_seconds(cmd):
    """The child's user + system seconds (its own rusage, not the machine's load)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    p.stderr.close()
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed: {err}")
    return ru.ru_utime + ru.ru_stime


def best(cmd, rounds):
    return min(cpu_seconds(cmd) for _ in range(rounds))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/lockstep"))
    ap.add_argument("--old", help="a lockstep binary from before the micro-shard default")
    ap.add_argument("--before", help="another lockstep binary whose default is timed too")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="mlp,cnn,lstm,gpt", help="comma-separated subset")
    a = ap.parse_args()
    common = ["--seeding", "invariant", "--batch-size", "64", "--threads", "1", "--json"]
    runs = {
        "mlp": ["train", "--model", "mlp", "--epochs", "400"],
        "cnn": ["train", "--model", "cnn", "--epochs", "20"],
        "lstm": ["train", "--model", "lstm", "--epochs", "5"],
        "gpt": ["train", "--model", "gpt", "--max-iters", "4", "--eval-interval", "0",
                "--sample-tokens", "0", "--data", DATA],
    }
    before_col = " before (default) |" if a.before else ""
    print("| model | steps |" + before_col + " default (8 micro-shards) | one shard (`--micro-batch 64`) | old, no micro-shards | torch seeding | default / un-sharded |")
    print("|---|---|" + ("---|" if a.before else "") + "---|---|---|---|---|")
    for model, args in runs.items():
        if model not in a.models.split(","):
            continue
        cmd = [a.bin] + args + common
        d = best(cmd, a.rounds)
        before = best([a.before] + args + common, a.rounds) if a.before else None
        one = best(cmd + ["--micro-batch", "64"], a.rounds)
        old = best([a.old] + args + common, a.rounds) if a.old and model != "gpt" else None
        t = [a.bin] + args + [x if x != "invariant" else "torch" for x in common]
        torch = best(t, a.rounds)
        steps = {"mlp": "400 epochs × 23", "cnn": "20 × 23", "lstm": "5 × 23", "gpt": "4"}[model]
        ref = old if old is not None else one
        f = lambda v: "–" if v is None else f"{v:.2f} s"
        bc = f" {f(before)} |" if a.before else ""
        print(f"| {model} | {steps} |{bc} {f(d)} | {f(one)} | {f(old)} | {f(torch)} | **{d / ref:.2f}×** |")


if __name__ == "__main__":
    main()
