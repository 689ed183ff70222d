#!/usr/bin/env python3
"""How far `lockstep train`'s step losses drift from PyTorch's: for each 1000-step run of
tests/golden/train/runs.json (grid C, recorded from real PyTorch by tools/golden_train.py), run
`lockstep train` with the same flags and print, at steps 10, 100 and 1000, the relative difference
of that step's loss and the largest relative difference up to it, as a Markdown table.

Usage (from the repository root): cargo build --release && python3 tools/train_drift.py
"""
import json, os, subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    runs = json.load(open(os.path.join(ROOT, "tests", "golden", "train", "runs.json")))
    exe = os.path.join(ROOT, "target", "release", "lockstep")
    print("| model | at step 10 (max up to it) | at step 100 (max) | at step 1000 (max) | final test accuracy, lockstep / PyTorch |")
    print("|---|---|---|---|---|")
    for case in runs["runs"]:
        if case.get("grid") != "C":
            continue
        want = case["report"]
        got = json.loads(subprocess.run([exe, "train", "--json"] + case["args"], check=True,
                                        capture_output=True, text=True).stdout)
        rel = [abs(a - b) / abs(b) for a, b in zip(got["step_losses"], want["step_losses"])]
        cells = [f"{rel[k - 1]:.1e} ({max(rel[:k]):.1e})" for k in (10, 100, 1000)]
        acc = f"{got['test_accuracy'][-1]:.4f} / {want['test_accuracy'][-1]:.4f}"
        print(f"| {want['model']} | " + " | ".join(cells) + f" | {acc} |")


if __name__ == "__main__":
    main()
