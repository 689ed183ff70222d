#!/usr/bin/env python3
"""Golden values for the rest of NumPy's random surface (issue 30), recorded from the REAL
NumPy, never from lockstep:

* `RandomState` on every other bit generator (`RandomState(PCG64(S))`, `RandomState(Philox(S))`,
  ...): mixed sequences of legacy samplers, the polar Gaussian's cached value included;
* `RandomState.randint` and `Generator.integers` for every integer dtype, scalar and array
  (broadcast) bounds, with NumPy's own test-suite cases (seeds, bounds and shapes of
  numpy/random/tests/test_randomstate.py and test_generator_mt19937.py);
* `RandomState.tomaxint` and `random_integers` up to 2^63 - 1, uint64 values beyond int64;
* `Generator.standard_exponential(method='inv')`, float64 and float32.

Run with the reference interpreter (NumPy 2.4.6):
    python3 tools/golden_numpy_surface.py
Writes tests/golden/numpy_surface.json: `cases` in the format of tests/golden/numpy.json (each
case is `lockstep sample LIB FN --seed=S [opts]` and the values the real call drew, a fresh
generator per case, FN called --repeat times, flattened in C order), read by
crates/lockstep-cli/tests/golden.rs; and `api`, the same kind of calls in a structured form for
crates/lockstep-rng/tests/numpy_surface.rs (the library API, no CLI).
"""
import json
import os
import platform
import sys
import warnings

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
GOLD = os.path.join(ROOT, "tests", "golden")
ME = "tools/golden_numpy_surface.py"

BGS = ["PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"]
DTYPES = ["int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8", "bool"]


def num(x):
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    return float(x)


def flat(a):
    return [num(x) for x in np.asarray(a).ravel().tolist()]


def out_dtype(dtype):
    if dtype in ("float32", "float64", "uint64"):
        return dtype
    return "int64"


def legacy_rs(seed, bg):
    if bg is None:
        return np.random.RandomState(seed)
    return np.random.RandomState(getattr(np.random, bg)(seed))


def gen(seed, bg):
    return np.random.Generator(getattr(np.random, bg or "PCG64")(seed))


def opt_text(v):
    if isinstance(v, (list, tuple)):
        return ",".join(str(int(e)) for e in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


def args_of(lib, fn, seed, bg, opts, repeat):
    a = [lib, fn, f"--seed={seed}"]
    if bg is not None:
        a.append(f"--bit-generator={bg}")
    for k, v in opts.items():
        a.append(f"--{k.replace('_', '-')}={opt_text(v)}")
    if repeat != 1:
        a.append(f"--repeat={repeat}")
    return a


# ------------------------------------------------------------------------------- integers

def bound_arr(v, shape):
    if shape is None:
        return v
    return np.array(v, dtype=object).reshape(shape)


def int_call(lib, seed, bg, dtype, low, high, low_shape=None, high_shape=None, size=None,
             endpoint=False, repeat=1):
    """`randint`/`integers`: one CLI case and one API case."""
    rng = legacy_rs(seed, bg) if lib == "numpy-legacy" else gen(seed, bg)
    lo = bound_arr(low, low_shape)
    hi = bound_arr(high, high_shape)
    if isinstance(lo, np.ndarray):
        lo = lo.tolist()
    if isinstance(hi, np.ndarray):
        hi = hi.tolist()
    vals = []
    for _ in range(repeat):
        if lib == "numpy-legacy":
            vals += flat(rng.randint(lo, hi, size=size, dtype=getattr(np, dtype)))
        else:
            vals += flat(rng.integers(lo, hi, size=size, dtype=getattr(np, dtype),
                                      endpoint=endpoint))
    fn = "randint" if lib == "numpy-legacy" else "integers"
    opts = {}
    opts["low"] = low
    opts["high"] = high
    if low_shape is not None:
        opts["low_shape"] = list(low_shape)
    if high_shape is not None:
        opts["high_shape"] = list(high_shape)
    if endpoint:
        opts["endpoint"] = True
    opts["dtype"] = dtype
    if size is not None:
        opts["shape"] = list(size) if isinstance(size, tuple) else [size]
    case = {"args": args_of(lib, fn, seed, bg, opts, repeat), "dtype": out_dtype(dtype),
            "values": vals}
    api = {"class": "RandomState" if lib == "numpy-legacy" else "Generator",
           "bit_generator": bg, "seed": seed, "call": fn, "dtype": dtype,
           "low": low if isinstance(low, list) else [low],
           "low_shape": list(low_shape) if low_shape is not None else (
               [len(low)] if isinstance(low, list) else []),
           "high": high if isinstance(high, list) else [high],
           "high_shape": list(high_shape) if high_shape is not None else (
               [len(high)] if isinstance(high, list) else []),
           "size": (list(size) if isinstance(size, tuple) else [size]) if size is not None else None,
           "endpoint": endpoint, "repeat": repeat, "values": [str(v) for v in vals]}
    return case, api


def int_cases():
    cli, api = [], []

    def add(*a, **k):
        c, p = int_call(*a, **k)
        cli.append(c)
        api.append(p)

    for lib in ["numpy-legacy", "numpy"]:
        bgs = [None] if lib == "numpy-legacy" else ["PCG64"]
        bgs = bgs + BGS if lib == "numpy-legacy" else BGS
        for bg in bgs:
            for dt in DTYPES:
                info = None if dt == "bool" else np.iinfo(dt)
                lo, top = (0, 2) if dt == "bool" else (int(info.min), int(info.max) + 1)
                # NumPy's test_repeatability: the dtype's whole range, seed 1234.
                add(lib, 1234, bg, dt, lo, top, size=40)
                # Small ranges of each kind (masked/Lemire rejection, pieces shared).
                add(lib, 7, bg, dt, 0, 2 if dt == "bool" else 5, size=37)
                if dt != "bool":
                    add(lib, 3, bg, dt, lo + 1, top - 3, size=9, repeat=2)
                    add(lib, 11, bg, dt, 0, 100, size=13)
                    mid = 1 << (info.bits - 1) if dt.startswith("u") else 1
                    add(lib, 5, bg, dt, 0, mid + 3, size=17)
                if lib == "numpy":
                    add(lib, 9, bg, dt, 0, 1 if dt == "bool" else 6, size=21, endpoint=True)
                    if dt != "bool":
                        add(lib, 2, bg, dt, lo, top - 1, size=8, endpoint=True)
            # Array bounds, broadcast (NumPy's test_repeatability_broadcasting).
            for dt in ["int64", "uint8", "int16", "uint32", "bool"]:
                if dt == "bool":
                    add(lib, 1234, bg, dt, [0, 0, 1], [1, 2, 2], high_shape=None)
                    continue
                info = np.iinfo(dt)
                lows = [int(info.min), 0, 1]
                highs = [3, 50, int(info.max), 7]
                add(lib, 1234, bg, dt, lows, highs, low_shape=(3, 1), high_shape=(4,))
                add(lib, 8, bg, dt, 0, highs, size=(2, 4), repeat=2)
                if lib == "numpy":
                    add(lib, 4, bg, dt, lows, highs, low_shape=(3, 1), high_shape=(1, 4),
                        endpoint=True)
    # NumPy's test_repeatability_32bit_boundary(_broadcasting) (RandomState(12345) and
    # Generator(MT19937(12345))), and test_repeatability_32bit_boundary (Generator(MT19937(1234))).
    for size in [None, (5, 3, 3)]:
        add("numpy-legacy", 12345, None, "int64", [-1, 0, 1], [2**32 - 1, 2**32, 2**32 + 1],
            low_shape=(3, 1), size=size)
        add("numpy", 12345, "MT19937", "int64", [-1, 0, 1], [2**32 - 1, 2**32, 2**32 + 1],
            low_shape=(3, 1), size=size)
    for bound in [2**32 - 1, 2**32, 2**32 + 1]:
        add("numpy", 1234, "MT19937", "int64", 0, bound, size=7)
    # uint64 values beyond int64, and the full 64-bit ranges.
    add("numpy-legacy", 0, None, "uint64", 0, 2**64, size=12)
    add("numpy-legacy", 1, None, "uint64", 2**63, 2**64, size=6)
    add("numpy", 0, "PCG64", "uint64", 2**63 - 5, 2**64 - 1, size=8, endpoint=True)
    add("numpy", 0, "Philox", "int64", -2**63, 2**63 - 1, size=8, endpoint=True)
    return cli, api


# --------------------------------------------------------------------- the other samplers

def simple_case(lib, fn, seed, bg, opts, call, repeat=1, dtype="float64"):
    rng = legacy_rs(seed, bg) if lib == "numpy-legacy" else gen(seed, bg)
    vals = []
    for _ in range(repeat):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            vals += flat(call(rng))
    return {"args": args_of(lib, fn, seed, bg, opts, repeat), "dtype": dtype, "values": vals}


def other_cases():
    cli, api = [], []
    L = "numpy-legacy"
    imax = 2**63 - 1
    for bg in [None] + BGS:
        for seed in [0, 1234567890, 2**31 + 5]:
            cli.append(simple_case(L, "tomaxint", seed, bg, {"shape": [3, 2]},
                                   lambda r: r.tomaxint(size=(3, 2)), dtype="int64"))
        cli.append(simple_case(L, "random_integers", 42, bg, {"low": -5, "high": 5, "shape": [9]},
                               lambda r: r.random_integers(-5, 5, size=9), dtype="int64"))
        cli.append(simple_case(L, "random_integers", 42, bg, {"low": imax, "high": imax},
                               lambda r: r.random_integers(imax, imax), dtype="int64"))
        cli.append(simple_case(L, "random_integers", 3, bg,
                               {"low": -2**63, "high": imax, "shape": [5]},
                               lambda r: r.random_integers(-2**63, imax, size=5), dtype="int64"))
        cli.append(simple_case(L, "random_integers", 3, bg, {"high": 6, "shape": [12]},
                               lambda r: r.random_integers(6, size=12), dtype="int64"))
        for seed in [0, 1234567890]:
            rs = legacy_rs(seed, bg)
            api.append({"class": "RandomState", "bit_generator": bg, "seed": seed,
                        "call": "tomaxint", "values": [str(v) for v in flat(rs.tomaxint(7))]})
        for lo, hi in [(-5, 5), (imax, imax), (-2**63, imax), (1, 2**40)]:
            rs = legacy_rs(9, bg)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                v = flat(rs.random_integers(lo, hi, size=6))
            api.append({"class": "RandomState", "bit_generator": bg, "seed": 9,
                        "call": "random_integers", "low": str(lo), "high": str(hi),
                        "values": [str(x) for x in v]})
        if bg is None:
            continue
        # RandomState on another bit generator: the legacy samplers on its draws.
        for seed in [0, 12345]:
            cli.append(simple_case(L, "rand", seed, bg, {"shape": [2, 3]},
                                   lambda r: r.rand(2, 3)))
            cli.append(simple_case(L, "randn", seed, bg, {"shape": [5]},
                                   lambda r: r.randn(5), repeat=3))
            cli.append(simple_case(L, "normal", seed, bg, {"loc": 1.0, "scale": 2.0, "shape": [3]},
                                   lambda r: r.normal(1.0, 2.0, size=3), repeat=2))
            cli.append(simple_case(L, "uniform", seed, bg, {"low": -1.0, "high": 1.0, "shape": [4]},
                                   lambda r: r.uniform(-1.0, 1.0, size=4)))
            cli.append(simple_case(L, "standard_exponential", seed, bg, {"shape": [6]},
                                   lambda r: r.standard_exponential(size=6)))
            cli.append(simple_case(L, "permutation", seed, bg, {"n": 12},
                                   lambda r: r.permutation(12), dtype="int64"))
            cli.append(simple_case(L, "randint", seed, bg, {"low": 0, "high": 2**30, "shape": [10]},
                                   lambda r: r.randint(0, 2**30, size=10), dtype="int64"))
            cli.append(simple_case(L, "bytes", seed, bg, {"length": 7, "then": 5},
                                   lambda r: list(r.bytes(7)) + list(r.bytes(5)), dtype="int64"))
            cli.append(simple_case(L, "standard_gamma", seed, bg, {"shape": 2.5, "size": [300]},
                                   lambda r: r.standard_gamma(2.5, size=300)))
            cli.append(simple_case(L, "standard_gamma", seed, bg, {"shape": 0.5, "size": [20]},
                                   lambda r: r.standard_gamma(0.5, size=20)))
            cli.append(simple_case(L, "beta", seed, bg, {"a": 2.0, "b": 3.0, "shape": [200]},
                                   lambda r: r.beta(2.0, 3.0, size=200)))
            cli.append(simple_case(L, "binomial", seed, bg, {"n": 100, "p": 0.4, "shape": [8]},
                                   lambda r: r.binomial(100, 0.4, size=8), dtype="int64"))
            cli.append(simple_case(L, "poisson", seed, bg, {"lam": 40.0, "shape": [8]},
                                   lambda r: r.poisson(40.0, size=8), dtype="int64"))
            cli.append(simple_case(L, "standard_t", seed, bg, {"df": 3.0, "shape": [5]},
                                   lambda r: r.standard_t(3.0, size=5)))
            cli.append(simple_case(L, "chisquare", seed, bg, {"df": 3.0, "shape": [5]},
                                   lambda r: r.chisquare(3.0, size=5)))
        # The polar pair's cached value carries across calls of different samplers.
        def mixed(r):
            return [r.randn(), r.rand(), r.randn(), r.normal(3.0, 0.5), r.rand()]
        rs = legacy_rs(77, bg)
        api.append({"class": "RandomState", "bit_generator": bg, "seed": 77, "call": "mixed",
                    "values": [repr(float(v)) for v in mixed(rs)]})
    # Generator.standard_exponential(method='inv'), and NumPy's test_standard_exponential
    # (Generator(MT19937(1234567890)), size (3, 2)).
    for bg in BGS:
        for seed in [0, 1234567890]:
            for dt in ["float64", "float32"]:
                cli.append(simple_case(
                    "numpy", "standard_exponential", seed, bg,
                    {"shape": [3, 2], "dtype": dt, "method": "inv"},
                    lambda r, dt=dt: r.standard_exponential(size=(3, 2), dtype=getattr(np, dt),
                                                            method="inv"),
                    repeat=2, dtype=dt))
                g = gen(seed, bg)
                v = g.standard_exponential(size=9, dtype=getattr(np, dt), method="inv")
                api.append({"class": "Generator", "bit_generator": bg, "seed": seed,
                            "call": "standard_exponential_inv", "dtype": dt,
                            "values": [repr(float(x)) for x in v]})
    return cli, api


def main():
    c1, a1 = int_cases()
    c2, a2 = other_cases()
    doc = {
        "generator": ME,
        "library": f"numpy {np.__version__}",
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cases": c1 + c2,
        "api": a1 + a2,
    }
    path = os.path.join(GOLD, "numpy_surface.json")
    with open(path, "w") as fh:
        json.dump(doc, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"{path}: {len(doc['cases'])} cases, {len(doc['api'])} api cases")


if __name__ == "__main__":
    main()
