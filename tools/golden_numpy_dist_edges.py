#!/usr/bin/env python3
"""Golden values for the edge cases of lockstep's batched NumPy samplers (issue 14), recorded
from the REAL NumPy 2.4.6, never from lockstep: RandomState gamma and beta with shapes just
above 1 (polar Gaussians whose log is needed before an attempt's words are known, attempts
with v <= 0 that draw no uniform, beta attempts whose shape decides that), gamma below 1 on
both classes, and Generator Poisson (multiplication method) over its range, each over
thousands of values (many 624-word MT19937 and 256-output PCG64 blocks).

    python3 tools/golden_numpy_dist_edges.py
Writes tests/golden/numpy_dist_edges.json in the format of tools/golden_random_surface.py
(each case is `lockstep sample LIB FN --seed=S [opts]` and the values NumPy drew).
"""
import json
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_random_surface import case  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PATH = os.path.join(ROOT, "tests", "golden", "numpy_dist_edges.json")

# (library, function, parameters, size)
CASES = [
    ("numpy-legacy", "standard_gamma", dict(shape=1.0001), 2000),
    ("numpy-legacy", "gamma", dict(shape=1.05, scale=0.5), 2000),
    ("numpy-legacy", "beta", dict(a=1.0001, b=30.0), 2000),
    ("numpy-legacy", "beta", dict(a=30.0, b=1.001), 2000),
    ("numpy-legacy", "beta", dict(a=1.2, b=1.1), 1000),
    ("numpy-legacy", "gamma", dict(shape=0.05, scale=1.0), 1000),
    ("numpy", "gamma", dict(shape=0.05, scale=1.0), 1000),
    ("numpy", "poisson", dict(lam=0.3), 2000),
    ("numpy", "poisson", dict(lam=9.9), 2000),
]


def main():
    assert np.__version__ == "2.4.6", np.__version__
    cases = [case(lib, fn, 41, p, size) for lib, fn, p, size in CASES]
    doc = {
        "generator": "tools/golden_numpy_dist_edges.py",
        "library": f"numpy {np.__version__}",
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cases": cases,
    }
    with open(PATH, "w") as fh:
        json.dump(doc, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"{PATH}: {len(cases)} cases")


if __name__ == "__main__":
    main()
