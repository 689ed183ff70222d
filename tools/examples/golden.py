#!/usr/bin/env python3
"""Runs each example's PyTorch twin (tools/examples/NAME.py) with the small settings the tests
use and writes its report to tests/golden/examples/NAME.json, with the arguments and the
versions, for crates/lockstep/tests/examples.rs to compare against (init sha256, first loss,
...). One thread, so that the file does not depend on the machine's core count.

usage (from anywhere): python3 tools/examples/golden.py [NAME ...]
Needs: pip install torch numpy (the committed files: torch 2.15.0, numpy 2.4.6).
"""
import json
import os
import subprocess
import sys

import numpy
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "golden", "examples")

# The tests' settings: a few seconds in a debug build.
CASES = {
    # Crosses the epoch boundary: StepLR's first decay and the test loader's seed draw.
    "mnist": ["--epochs", "2", "--max-steps", "30"],
    # Two epochs (12 steps each, the last a short batch): the samples drawn between them.
    "vae": ["--epochs", "2"],
    "dcgan": ["--niter", "1", "--max-steps", "8"],
    # Two LBFGS steps (20 closure calls each) on 5 short waves, 10 steps of future.
    "time_sequence_prediction": ["--steps", "2", "--L", "60", "--N", "8", "--future", "10"],
}


def main():
    names = sys.argv[1:] or list(CASES)
    os.makedirs(OUT, exist_ok=True)
    for name in names:
        args = CASES[name] + ["--threads", "1"]
        out = subprocess.run([sys.executable, os.path.join(HERE, f"{name}.py")] + args,
                             check=True, capture_output=True, text=True).stdout
        doc = {
            "generated_by": f"tools/examples/golden.py (twin tools/examples/{name}.py)",
            "torch": torch.__version__.split("+")[0],
            "numpy": numpy.__version__,
            "args": CASES[name],
            "report": json.loads(out),
        }
        with open(os.path.join(OUT, f"{name}.json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"wrote tests/golden/examples/{name}.json")


if __name__ == "__main__":
    main()
