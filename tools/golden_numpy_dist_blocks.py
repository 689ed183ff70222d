#!/usr/bin/env python3
"""Golden values for NumPy's gamma/beta/poisson/binomial at the sizes where lockstep switches
between drawing one word at a time and drawing from blocks of words (issue 14): sizes around
16 (lockstep's switch), 624-word MT19937 blocks and 256-output PCG64 blocks crossed many times,
repeated calls on one generator. Recorded from the REAL NumPy 2.4.6, never from lockstep.

    python3 tools/golden_numpy_dist_blocks.py
Writes tests/golden/numpy_dist_blocks.json in the format of tools/golden_random_surface.py
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
PATH = os.path.join(ROOT, "tests", "golden", "numpy_dist_blocks.json")

PARAMS = [
    ("gamma", dict(shape=2.5, scale=1.0)),
    ("gamma", dict(shape=0.5, scale=2.0)),
    ("standard_gamma", dict(shape=0.05)),
    ("beta", dict(a=2.0, b=3.0)),
    ("beta", dict(a=0.5, b=0.7)),
    ("poisson", dict(lam=4.5)),
    ("poisson", dict(lam=57.3)),
    ("binomial", dict(n=10, p=0.3)),
    ("binomial", dict(n=1000, p=0.4)),
    ("binomial", dict(n=60, p=0.9)),
]


def main():
    assert np.__version__ == "2.4.6", np.__version__
    cases = []
    for lib in ["numpy", "numpy-legacy"]:
        for fn, p in PARAMS:
            for size in [1, 7, 8, 9, 15, 16, 17, 1000]:
                cases.append(case(lib, fn, 21, p, size))
            cases.append(case(lib, fn, 22, p, 17, repeat=3))
            cases.append(case(lib, fn, 23, p, 200, repeat=4))
            cases.append(case(lib, fn, 24, p, (12, 50)))
    doc = {
        "generator": "tools/golden_numpy_dist_blocks.py",
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
