#!/usr/bin/env python3
"""Times NumPy's samplers that crates/lockstep-rng/benches/compat_numpy_python.rs times in
lockstep, for the speed ratio. Best of 5 runs (time.perf_counter), one JSON line per row:
{"name": ..., "seconds": ...}. Run with /opt/pyref/bin/python bench/numpy_python.py
"""
import json
import time

import numpy as np

N = 10_000_000


def best(fn, reps=5):
    fn()  # warm up (page faults, lazy init)
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def main():
    g = np.random.default_rng(0)
    rs = np.random.RandomState(0)
    out = np.empty(N)
    rows = [
        ("numpy.Generator.random_1e7_f64", lambda: g.random(out=out)),
        ("numpy.Generator.standard_normal_1e7_f64", lambda: g.standard_normal(out=out)),
        ("numpy.RandomState.rand_1e7_f64", lambda: rs.random_sample(N)),
    ]
    for name, fn in rows:
        print(json.dumps({"name": name, "seconds": best(fn), "numpy": np.__version__}))


if __name__ == "__main__":
    main()
