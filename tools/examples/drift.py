#!/usr/bin/env python3
"""How far each example's step losses drift from its PyTorch twin's over a whole run with the
examples' default settings: runs tools/examples/NAME.py and `cargo run --example NAME` (both
at one thread), and prints, at steps 10, 100 and the last, the relative difference of that
step's loss and the largest relative difference up to it, plus the final metric of each, as a
Markdown table (the README's "Examples" section).

usage (from the repository root): python3 tools/examples/drift.py [NAME ...]
  PROFILE=dev python3 tools/examples/drift.py   # the debug build (same bits, builds faster)
Needs: pip install torch numpy.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# The metric each report ends with: (key, how to print it).
METRIC = {"mnist": "test_accuracy", "vae": "test_loss", "dcgan": "loss_g"}


def run(cmd):
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True,
                                     cwd=ROOT).stdout)


def main():
    names = sys.argv[1:] or ["mnist", "vae"]
    profile = os.environ.get("PROFILE", "release")
    cargo = ["cargo", "run", "-q", "-p", "lockstep", "--profile", profile, "--example"]
    print("| example | steps | at step 10 (max up to it) | at step 100 (max) | at the last step (max) "
          "| final metric, lockstep / PyTorch |")
    print("|---|---|---|---|---|---|")
    for name in names:
        torch = run([sys.executable, os.path.join(HERE, f"{name}.py"), "--threads", "1"])
        ours = run(cargo + [name, "--", "--threads", "1", "--quiet"])
        assert ours["init_sha256"] == torch["init_sha256"], name
        a, b = ours["losses"], torch["losses"]
        rel = [abs(x - y) / abs(y) for x, y in zip(a, b)]
        cells = [f"{rel[k - 1]:.1e} ({max(rel[:k]):.1e})" if k <= len(rel) else "–"
                 for k in (10, 100, len(rel))]
        key = METRIC.get(name, "losses")
        metric = f"{key} {ours[key][-1]:.4f} / {torch[key][-1]:.4f}"
        print(f"| {name} | {len(rel)} | " + " | ".join(cells) + f" | {metric} |")


if __name__ == "__main__":
    main()
