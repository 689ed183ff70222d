#!/usr/bin/env python3
"""Golden values for the random surface beyond the basics (issue 14): NumPy's distributions on
`Generator` and legacy `RandomState`, recorded from the REAL libraries, never from lockstep.

Run with the reference interpreter (NumPy 2.4.6, CPython 3.11):
    python3 tools/golden_random_surface.py
Writes tests/golden/random_surface_{numpy,python,torch}.json (torch 2.15: log_normal_, cauchy_,
geometric_, random_() per dtype, normal with tensor mean/std, poisson, _standard_gamma,
distributions.Gamma/Chi2, the *_like functions; CPython
`random`: the variates, randbytes, randrange/randint beyond 64 bits, sample with counts,
choices with weights/cum_weights, seed version 1 of str/bytes) in the format of tests/golden/numpy.json: each
case is `lockstep sample LIB FN --seed=S [opts]` and the values the real call drew (a fresh
generator per case, FN called --repeat times, everything flattened in C order).
"""
import json
import math
import os
import platform
import sys

import random

try:
    import numpy as np
except ImportError:  # the CPython 3.12 run (binomialvariate) needs no NumPy
    np = None

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
GOLD = os.path.join(ROOT, "tests", "golden")
ME = "tools/golden_random_surface.py"


def num(x):
    """A JSON value for one drawn number (non-finite floats as lockstep prints them)."""
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def opt_text(v):
    if isinstance(v, (list, tuple)):
        return ",".join(repr(float(e)) if isinstance(e, float) else str(e) for e in v)
    return repr(v) if isinstance(v, float) else str(v)


GAMMA_SIZE = {"gamma", "standard_gamma"}


def case(lib, fn, seed, params, size=None, repeat=1, dtype=None):
    rng = np.random.RandomState(seed) if lib == "numpy-legacy" else np.random.default_rng(seed)
    vals = []
    out_dtype = None
    kw = dict(params)
    if dtype is not None:
        kw["dtype"] = getattr(np, dtype)
    for _ in range(repeat):
        r = getattr(rng, fn)(**kw, size=size)
        r = np.asarray(r)
        if dtype is not None:
            out_dtype = dtype
        elif r.dtype.kind == "f":
            out_dtype = "float32" if r.dtype == np.float32 else "float64"
        else:
            out_dtype = "int64"
        vals += [num(v) for v in r.reshape(-1).tolist()]
    args = [lib, fn, f"--seed={seed}"]
    for k, v in params.items():
        args.append(f"--{k}={opt_text(v)}")
    if dtype is not None:
        args.append(f"--dtype={dtype}")
    if size is not None:
        dims = size if isinstance(size, tuple) else (size,)
        key = "size" if fn in GAMMA_SIZE else "shape"
        args.append(f"--{key}={','.join(str(d) for d in dims)}")
    if repeat != 1:
        args.append(f"--repeat={repeat}")
    return {"args": args, "dtype": out_dtype, "values": vals}


# (fn, [param sets], size); every set runs with every seed of the library.
DISTS = [
    ("standard_gamma", [dict(shape=s) for s in
                        [0.0, 1e-300, 1e-3, 0.3, 0.999, 1.0, 1.0001, 2.5, 1e3, 1e12]], 40),
    ("gamma", [dict(shape=0.5, scale=2.0), dict(shape=3.0, scale=0.25), dict(shape=7.5, scale=1.0)], 40),
    ("beta", [dict(a=0.5, b=0.7), dict(a=2.0, b=3.0), dict(a=1.0, b=1.0), dict(a=0.01, b=0.02),
              dict(a=1e-200, b=1e-200), dict(a=0.5, b=5.0), dict(a=1e-4, b=0.9)], 40),
    ("poisson", [dict(lam=l) for l in [0.0, 1e-3, 0.5, 4.5, 9.999, 10.0, 10.001, 57.3, 1e6, 1e12]], 40),
    ("binomial", [dict(n=n, p=p) for n, p in
                  [(10, 0.3), (100, 0.4), (1000, 1e-4), (1000, 0.9999), (0, 0.5), (50, 0.0),
                   (50, 1.0), (1000, 0.7), (10**6, 0.5), (10**9, 1e-3), (75, 0.5), (31, 0.97)]], 40),
    ("lognormal", [dict(mean=0.0, sigma=1.0), dict(mean=1.5, sigma=0.25)], 30),
    ("laplace", [dict(loc=0.0, scale=1.0), dict(loc=-2.0, scale=3.0)], 30),
    ("exponential", [dict(scale=1.0), dict(scale=0.5)], 30),
    ("gumbel", [dict(loc=0.0, scale=1.0), dict(loc=1.0, scale=2.0)], 30),
    ("logistic", [dict(loc=0.0, scale=1.0), dict(loc=1.0, scale=2.0)], 30),
    ("chisquare", [dict(df=d) for d in [0.5, 1.0, 2.0, 3.0, 50.0]], 30),
    ("standard_t", [dict(df=d) for d in [0.5, 1.0, 4.0, 1e6]], 30),
    ("standard_cauchy", [dict()], 30),
    ("geometric", [dict(p=p) for p in [1.0, 0.5, 0.34, 1 / 3, 0.3, 1e-3, 1e-12]], 30),
    ("weibull", [dict(a=a) for a in [0.0, 0.5, 1.5, 5.0]], 30),
    ("pareto", [dict(a=a) for a in [0.5, 3.0]], 30),
    ("power", [dict(a=a) for a in [0.5, 3.0]], 30),
    ("rayleigh", [dict(scale=s) for s in [1.0, 2.5]], 30),
    ("triangular", [dict(left=-1.0, mode=0.5, right=2.0), dict(left=0.0, mode=0.0, right=1.0),
                    dict(left=0.0, mode=1.0, right=1.0)], 30),
    ("vonmises", [dict(mu=m, kappa=k) for m, k in
                  [(0.0, 0.0), (0.5, 1e-9), (1.0, 1e-6), (0.5, 2.0), (-3.0, 50.0), (3.1, 1e7)]], 30),
    ("wald", [dict(mean=1.0, scale=2.0), dict(mean=3.0, scale=0.5)], 30),
    ("negative_binomial", [dict(n=n, p=p) for n, p in [(5.0, 0.3), (0.5, 0.9), (100.0, 0.01), (3.0, 1.0)]], 30),
    ("hypergeometric", [dict(ngood=g, nbad=b, nsample=s) for g, b, s in
                        [(30, 20, 15), (5, 5, 3), (100, 200, 250), (10, 10, 10), (20, 30, 11),
                         (1000, 2, 500), (10**6, 10**6, 1000), (0, 5, 5), (7, 3, 10)]], 30),
    ("logseries", [dict(p=p) for p in [0.0, 0.3, 0.9, 0.999999]], 30),
    ("zipf", [dict(a=a) for a in [1.1, 1.5, 2.0, 5.0]], 30),
    ("f", [dict(dfnum=3.0, dfden=5.0), dict(dfnum=0.5, dfden=0.7)], 30),
    ("noncentral_chisquare", [dict(df=d, nonc=n) for d, n in
                              [(3.0, 2.0), (0.5, 2.0), (1.0, 0.5), (3.0, 0.0), (2.0, 50.0)]], 30),
    ("noncentral_f", [dict(dfnum=3.0, dfden=5.0, nonc=2.0), dict(dfnum=0.5, dfden=2.0, nonc=1.0)], 30),
    ("multinomial", [dict(n=20, pvals=[0.2, 0.3, 0.5]), dict(n=1000, pvals=[0.1] * 10),
                     dict(n=0, pvals=[0.5, 0.5]), dict(n=100, pvals=[0.0, 1.0, 0.0]),
                     dict(n=10**6, pvals=[0.25, 0.25, 0.5])], 6),
    ("dirichlet", [dict(alpha=[0.5, 1.0, 2.0]), dict(alpha=[0.01, 0.05, 0.02]),
                   dict(alpha=[0.0, 0.05]), dict(alpha=[40.0, 0.3])], 8),
]

# What only one class has, or where one class needs other parameters.
GEN_ONLY = [
    ("zipf", [dict(a=1100.0)], 10),
    ("standard_gamma", [dict(shape=s) for s in [0.3, 1.0, 2.5, 1e3]], 40, "float32"),
]
LEGACY_ONLY = [
    ("standard_exponential", [dict()], 30),
]
GEN_SKIP = set()
# RandomState rejects these (nsample < 1, alpha == 0).
LEGACY_SKIP = {("hypergeometric", "ngood=0"), ("dirichlet", "alpha=[0.0, 0.05]")}

SEEDS = {"numpy": [0, 5, 2**32 + 7, 2**100 + 3], "numpy-legacy": [0, 5, 2**32 - 1]}


def skipped(lib, fn, params):
    text = ", ".join(f"{k}={v}" for k, v in params.items())
    skips = LEGACY_SKIP if lib == "numpy-legacy" else GEN_SKIP
    return any(fn == f and t in text for f, t in skips)


# ------------------------------------------------------------------------------ CPython
def py_seeded(seed):
    """`seed` is an int, ("str", text, version) or ("bytes", hex, version)."""
    r = random.Random()
    if isinstance(seed, tuple):
        kind, v, version = seed
        r.seed(v if kind == "str" else bytes.fromhex(v), version=version)
        return r, [f"--seed-{kind}={v}", f"--version={version}"]
    r.seed(seed)
    return r, [f"--seed={seed}"]


def py_call(r, fn, o):
    n = o.get("n", 1)
    each = {
        "triangular": lambda: r.triangular(o.get("low", 0.0), o.get("high", 1.0), o.get("mode")),
        "normalvariate": lambda: r.normalvariate(o.get("mu", 0.0), o.get("sigma", 1.0)),
        "lognormvariate": lambda: r.lognormvariate(o["mu"], o["sigma"]),
        "expovariate": lambda: r.expovariate(o["lambd"]),
        "vonmisesvariate": lambda: r.vonmisesvariate(o["mu"], o["kappa"]),
        "gammavariate": lambda: r.gammavariate(o["alpha"], o["beta"]),
        "betavariate": lambda: r.betavariate(o["alpha"], o["beta"]),
        "paretovariate": lambda: r.paretovariate(o["alpha"]),
        "weibullvariate": lambda: r.weibullvariate(o["alpha"], o["beta"]),
        "random": lambda: r.random(),
    }
    if fn in each:
        return "float64", [num(each[fn]()) for _ in range(n)]
    if fn == "randbytes":
        return "int64", list(r.randbytes(o["n"]))
    if fn == "randrange":
        return "int", [r.randrange(o.get("start", 0), o["stop"], o.get("step", 1)) for _ in range(n)]
    if fn == "randint":
        return "int", [r.randint(o.get("low", 0), o["high"]) for _ in range(n)]
    if fn == "sample":
        if "counts" in o:
            return "int64", r.sample(range(len(o["counts"])), o["k"], counts=o["counts"])
        return "int64", r.sample(range(o["population"]), o["k"])
    if fn == "choices":
        return "int64", r.choices(range(o["population"]), o.get("weights"),
                                  cum_weights=o.get("cum-weights"), k=o.get("k", 1))
    raise ValueError(fn)


def py_case(fn, seed, repeat=1, **o):
    r, seed_args = py_seeded(seed)
    vals, dtype = [], None
    for _ in range(repeat):
        dtype, v = py_call(r, fn, o)
        vals += v
    args = ["python", fn] + seed_args
    for k, v in o.items():
        args.append(f"--{k}={opt_text(v)}")
    if repeat != 1:
        args.append(f"--repeat={repeat}")
    return {"args": args, "dtype": dtype, "values": vals}


PY_SEEDS = [0, 5, 2**32 + 7, -(2**70 + 1)]
PY_FNS = [
    ("triangular", [dict(n=20), dict(low=-1.0, high=2.0, mode=0.5, n=20),
                    dict(low=1.0, high=1.0, mode=1.0, n=3), dict(low=0.0, high=1.0, mode=1.0, n=20)]),
    ("normalvariate", [dict(n=20), dict(mu=1.0, sigma=2.0, n=20)]),
    ("lognormvariate", [dict(mu=0.5, sigma=0.25, n=20)]),
    ("expovariate", [dict(lambd=2.0, n=20), dict(lambd=-0.5, n=5)]),
    ("vonmisesvariate", [dict(mu=m, kappa=k, n=20) for m, k in
                         [(1.0, 4.0), (0.0, 1e-7), (-2.0, 0.3), (10.0, 500.0)]]),
    ("gammavariate", [dict(alpha=a, beta=b, n=30) for a, b in
                      [(0.3, 1.0), (1.0, 2.0), (1.0001, 1.0), (2.5, 2.0), (1e4, 0.5), (1e-3, 1.0)]]),
    ("betavariate", [dict(alpha=a, beta=b, n=30) for a, b in [(0.5, 2.0), (2.0, 3.0), (1.0, 1.0)]]),
    ("paretovariate", [dict(alpha=a, n=20) for a in [3.0, 0.5]]),
    ("weibullvariate", [dict(alpha=2.0, beta=1.5, n=20), dict(alpha=1.0, beta=0.3, n=20)]),
    ("randbytes", [dict(n=n) for n in [0, 1, 3, 4, 10, 33]]),
    ("randrange", [dict(stop=10**20, n=10), dict(start=5, stop=10**30, step=3, n=10),
                   dict(start=-(2**100), stop=2**100, n=10), dict(start=2**64, stop=2**64 + 5, n=10),
                   dict(start=10, stop=-(10**25), step=-7, n=10), dict(stop=2**64, n=10),
                   dict(stop=2**64 + 1, n=10)]),
    ("randint", [dict(low=0, high=2**64, n=10), dict(low=-(2**90), high=2**90, n=10)]),
    ("sample", [dict(population=3, counts=[2, 0, 5], k=4), dict(population=4, counts=[100, 1, 50, 3], k=40),
                dict(population=30, k=10), dict(population=1000, k=7)]),
    ("choices", [dict(population=3, weights=[1.0, 2.0, 3.0], k=10),
                 dict(population=4, **{"cum-weights": [0.5, 0.5, 2.0, 10.0]}, k=10),
                 dict(population=5, k=10)]),
]
PY_STR_SEEDS = [("str", "hello", 1), ("str", "", 1), ("str", "h\u00e9llo \u2603", 1),
                ("bytes", "00ff10", 1), ("str", "hello", 2), ("bytes", "00ff10", 2)]


def python_cases():
    cases = []
    for fn, sets in PY_FNS:
        for o in sets:
            for seed in PY_SEEDS:
                cases.append(py_case(fn, seed, **o))
        cases.append(py_case(fn, 3, repeat=3, **sets[0]))
    for seed in PY_STR_SEEDS:
        cases.append(py_case("random", seed, n=5))
        cases.append(py_case("gammavariate", seed, alpha=2.5, beta=1.0, n=5))
    return cases


# ------------------------------------------------------------------------------ torch
def torch_cases():
    import torch
    from torch.distributions import Beta, Chi2, Dirichlet, Gamma, StudentT

    dt = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
          "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
          "bool": torch.bool}

    def call(fn, o):
        d = dt[o.get("dtype", "float32")]
        shape = tuple(o.get("shape", (1,)))
        if fn == "rand_like":
            return torch.rand_like(torch.empty(shape, dtype=d))
        if fn == "randn_like":
            return torch.randn_like(torch.empty(shape, dtype=d))
        if fn == "randint_like":
            return torch.randint_like(torch.empty(shape, dtype=d), o.get("low", 0), o["high"])
        if fn == "log_normal":
            return torch.empty(shape, dtype=d).log_normal_(o.get("mean", 1.0), o.get("std", 2.0))
        if fn == "cauchy":
            return torch.empty(shape, dtype=d).cauchy_(o.get("median", 0.0), o.get("sigma", 1.0))
        if fn == "geometric":
            return torch.empty(shape, dtype=d).geometric_(o["p"])
        if fn == "random":
            return torch.empty(shape, dtype=d).random_()
        if fn == "normal_tensor":
            m = torch.tensor(o["means"], dtype=d) if "means" in o else o.get("mean", 0.0)
            s = torch.tensor(o["stds"], dtype=d) if "stds" in o else o.get("std", 1.0)
            return torch.normal(m, s)
        if fn == "poisson":
            return torch.poisson(torch.tensor(o["rates"], dtype=d))
        if fn == "standard_gamma":
            return torch._standard_gamma(torch.tensor(o["alpha"], dtype=d))
        if fn == "gamma":
            return Gamma(torch.tensor(o["concentration"], dtype=d),
                         torch.tensor(o.get("rate", 1.0), dtype=d)).sample()
        if fn == "chi2":
            return Chi2(torch.tensor(o["df"], dtype=d)).sample()
        if fn == "dirichlet":
            return Dirichlet(torch.tensor(o["concentration"], dtype=d)).sample((o.get("n", 1),))
        if fn == "beta":
            return Beta(torch.tensor(o["concentration1"], dtype=d),
                        torch.tensor(o["concentration0"], dtype=d)).sample()
        if fn == "student_t":
            return StudentT(torch.tensor(o["df"], dtype=d), o.get("loc", 0.0), o.get("scale", 1.0)).sample()
        raise ValueError(fn)

    def case(fn, seed, repeat=1, **o):
        torch.manual_seed(seed)
        vals, dtype = [], None
        for _ in range(repeat):
            r = call(fn, o)
            if r.dtype in (torch.float32, torch.float64):
                dtype = "float32" if r.dtype == torch.float32 else "float64"
                vals += [num(float(x)) for x in r.reshape(-1).tolist()]
            else:
                dtype = "int64"
                vals += [int(x) for x in r.reshape(-1).tolist()]
        args = ["torch", fn, f"--seed={seed}"]
        for k, v in o.items():
            args.append(f"--{k}={opt_text(v)}")
        if repeat != 1:
            args.append(f"--repeat={repeat}")
        return {"args": args, "dtype": dtype, "values": vals}

    F = ["float32", "float64"]
    specs = []
    for d in F:
        specs += [("rand_like", dict(shape=(5,), dtype=d)), ("randn_like", dict(shape=(20,), dtype=d)),
                  ("randn_like", dict(shape=(3,), dtype=d)),
                  ("log_normal", dict(shape=(7,), dtype=d)), ("log_normal", dict(mean=0.5, std=0.25, shape=(40,), dtype=d)),
                  ("cauchy", dict(shape=(20,), dtype=d)), ("cauchy", dict(median=1.0, sigma=2.5, shape=(20,), dtype=d)),
                  ("geometric", dict(p=0.2, shape=(20,), dtype=d)), ("geometric", dict(p=0.9, shape=(20,), dtype=d)),
                  ("geometric", dict(p=1e-6, shape=(20,), dtype=d)),
                  ("normal_tensor", dict(means=[0.0, 1.0, 2.0], stds=[1.0, 2.0, 3.0], dtype=d)),
                  ("normal_tensor", dict(means=[float(i) for i in range(20)], stds=[0.5], dtype=d)),
                  ("normal_tensor", dict(means=[0.0, 1.0, 2.0, 3.0, 4.0], std=2.0, dtype=d)),
                  ("normal_tensor", dict(mean=3.0, stds=[float(i) / 4 for i in range(17)], dtype=d)),
                  ("poisson", dict(rates=[0.0, 0.5, 4.0, 9.99, 10.0, 12.0, 100.0, 1e5] * 4, dtype=d)),
                  ("standard_gamma", dict(alpha=[0.0, 1e-3, 0.3, 0.999, 1.0, 2.5, 100.0] * 4, dtype=d)),
                  ("gamma", dict(concentration=[0.5, 3.0, 1e-2], rate=2.0, dtype=d)),
                  ("chi2", dict(df=[1.0, 3.5, 0.2, 50.0], dtype=d)),
                  ("dirichlet", dict(concentration=[0.5, 1.0, 2.0], n=4, dtype=d)),
                  ("dirichlet", dict(concentration=[0.01, 0.05, 0.3, 5.0, 1.0], n=3, dtype=d)),
                  ("dirichlet", dict(concentration=[0.2] * 12, n=2, dtype=d)),
                  ("beta", dict(concentration1=[0.4, 2.0, 1e-3], concentration0=[0.4, 3.0, 1e-3], dtype=d)),
                  ("beta", dict(concentration1=[0.2] * 20, concentration0=[0.2] * 20, dtype=d)),
                  ("student_t", dict(df=[1.0, 3.5, 30.0], loc=1.0, scale=2.0, dtype=d)),
                  ("student_t", dict(df=[2.0] * 20, dtype=d))]
    specs += [("randint_like", dict(low=-5, high=5, shape=(6,), dtype="int64")),
              ("randint_like", dict(high=1 << 30, shape=(6,), dtype="float64")),
              ("geometric", dict(p=0.3, shape=(10,), dtype="int64"))]
    specs += [("random", dict(shape=(8,), dtype=d)) for d in
              ["int64", "int32", "int16", "int8", "uint8", "bool", "float32", "float64"]]
    cases = []
    for fn, o in specs:
        for seed in [0, 5, 2**32 + 7, 2**64 - 1]:
            cases.append(case(fn, seed, **o))
        cases.append(case(fn, 3, repeat=3, **o))
    return cases, torch.__version__


# ------------------------------------------------------------------------------ bit generators
BGS = ["PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"]


def bg_state_ints(bg):
    s = bg.state
    name = s["bit_generator"]
    if name in ("PCG64", "PCG64DXSM"):
        v = [s["state"]["state"], s["state"]["inc"]]
    elif name == "Philox":
        v = list(s["state"]["counter"]) + list(s["state"]["key"]) + list(s["buffer"]) + [s["buffer_pos"]]
    elif name == "SFC64":
        v = list(s["state"]["state"])
    else:
        return [int(x) for x in s["state"]["key"]] + [int(s["state"]["pos"])]
    return [int(x) for x in v] + [int(s["has_uint32"]), int(s["uinteger"])]


def bg_case(bgname, fn, seed, opts, repeat=1):
    g = np.random.Generator(getattr(np.random, bgname)(seed))
    bgen = g.bit_generator
    if "advance" in opts:
        bgen.advance(opts["advance"])
    if "jumped" in opts:
        bgen = bgen.jumped(opts["jumped"])
        g = np.random.Generator(bgen)
    vals, dtype = [], None
    size = opts.get("shape")
    for _ in range(repeat):
        if fn == "random_raw":
            dtype, v = "uint64", [int(x) for x in bgen.random_raw(size)]
        elif fn == "state":
            bgen.random_raw(opts.get("draws", 0))
            dtype, v = "int", bg_state_ints(bgen)
        elif fn == "spawn":
            dtype, v = "float64", [float(x) for c in g.spawn(opts["n"]) for x in c.random(size)]
        else:
            kw = {k: v for k, v in opts.items() if k not in ("shape", "dtype")}
            if "dtype" in opts:
                kw["dtype"] = getattr(np, opts["dtype"])
            r = np.asarray(getattr(g, fn)(**kw, size=size))
            dtype = opts.get("dtype") if r.dtype.kind == "f" else "int64"
            if dtype is None or dtype.startswith("int"):
                dtype = "float64" if r.dtype.kind == "f" else "int64"
            v = [num(x) for x in r.reshape(-1).tolist()]
        vals += v
    args = ["numpy", fn, f"--seed={seed}", f"--bit-generator={bgname}"]
    for k, v in opts.items():
        key = "size" if (k == "shape" and fn in GAMMA_SIZE) else k
        if k == "shape" and fn in ("integers",) and False:
            key = k
        args.append(f"--{key}={opt_text(v)}")
    if repeat != 1:
        args.append(f"--repeat={repeat}")
    return {"args": args, "dtype": dtype, "values": vals}


def bitgen_cases():
    cases = []
    per = [
        ("random_raw", dict(shape=10)), ("random", dict(shape=5)),
        ("random", dict(shape=5, dtype="float32")), ("integers", dict(low=0, high=10, shape=10)),
        ("integers", dict(low=-3, high=2**40, shape=6)),
        ("integers", dict(low=0, high=1000, dtype="int32", shape=6)),
        ("standard_normal", dict(shape=20)), ("standard_normal", dict(shape=9, dtype="float32")),
        ("normal", dict(loc=1.0, scale=2.0, shape=5)), ("exponential", dict(scale=2.0, shape=5)),
        ("standard_exponential", dict(shape=7, dtype="float32")), ("permutation", dict(n=10)),
        ("chisquare", dict(df=3.0, shape=6)), ("binomial", dict(n=100, p=0.4, shape=8)),
        ("poisson", dict(lam=4.5, shape=8)), ("hypergeometric", dict(ngood=30, nbad=20, nsample=15, shape=5)),
        ("beta", dict(a=0.5, b=0.7, shape=5)), ("state", dict(draws=3)), ("spawn", dict(n=3, shape=2)),
    ]
    for bgname in BGS:
        for fn, o in per:
            for seed in [0, 5, 2**32 + 7, 2**100 + 3]:
                o2 = dict(o)
                if fn == "permutation":
                    cases.append(perm_case(bgname, seed, o2["n"]))
                    continue
                cases.append(bg_case(bgname, fn, seed, o2))
        cases.append(bg_case(bgname, "random_raw", 3, dict(shape=4), repeat=3))
        moves = {"SFC64": [], "MT19937": [(None, 1), (None, 3)]}.get(
            bgname, [(5, None), (None, 1), (2**70 + 3, 3), (2**127 + 11, None)])
        if moves:
            for adv, jmp in moves:
                o = {}
                if adv is not None:
                    o["advance"] = adv
                if jmp is not None:
                    o["jumped"] = jmp
                cases.append(bg_case(bgname, "random_raw", 9, dict(o, shape=6)))
                cases.append(bg_case(bgname, "state", 9, dict(o, draws=5)))
    return cases


def perm_case(bgname, seed, n):
    g = np.random.Generator(getattr(np.random, bgname)(seed))
    return {"args": ["numpy", "permutation", f"--seed={seed}", f"--bit-generator={bgname}", f"--n={n}"],
            "dtype": "int64", "values": [int(x) for x in g.permutation(n)]}


def python312_cases():
    """`binomialvariate` is new in CPython 3.12: run `python3.12 tools/golden_random_surface.py
    python312` for these."""
    assert sys.version_info >= (3, 12), "run the python312 cases with CPython 3.12"
    cases = []
    params = [(1, 0.3), (0, 0.5), (5, 0.0), (5, 1.0), (20, 0.3), (30, 0.8), (100, 0.05),
              (100, 0.5), (1000, 0.3), (10**6, 0.4), (10**9, 1e-6), (10**12, 0.25), (50, 0.97)]
    for n, p in params:
        for seed in [0, 5, 2**32 + 7]:
            r = random.Random(seed)
            vals = [r.binomialvariate(n, p) for _ in range(40)]
            cases.append({"args": ["python", "binomialvariate", f"--seed={seed}", f"--n={n}",
                                   f"--p={p!r}", "--repeat=40"], "dtype": "int64", "values": vals})
    return cases


def write(name, library, cases):
    doc = {
        "generator": ME,
        "library": library,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cases": cases,
    }
    path = os.path.join(GOLD, name)
    with open(path, "w") as fh:
        json.dump(doc, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"{path}: {len(cases)} cases")


def numpy_cases():
    cases = []
    for lib in ["numpy", "numpy-legacy"]:
        extra = GEN_ONLY if lib == "numpy" else LEGACY_ONLY
        for entry in DISTS + extra:
            fn, sets, size = entry[:3]
            dtype = entry[3] if len(entry) > 3 else None
            for params in sets:
                if skipped(lib, fn, params):
                    continue
                for seed in SEEDS[lib]:
                    cases.append(case(lib, fn, seed, params, size, dtype=dtype))
            # Repeated calls on one generator (the legacy Gaussian cache carries over), a
            # scalar call (no size) and a 2-D size.
            p = sets[min(1, len(sets) - 1)]
            if not skipped(lib, fn, p):
                cases.append(case(lib, fn, 3, p, 7, repeat=3, dtype=dtype))
                cases.append(case(lib, fn, 11, p, None, repeat=2, dtype=dtype))
                cases.append(case(lib, fn, 12, p, (2, 3), dtype=dtype))
    return cases


# ------------------------------------------------------------------------------ the rest (issue 14)
def extra_cases():
    """Generator.permuted/bytes/multivariate_hypergeometric/multivariate_normal('cholesky'),
    RandomState.bytes, and torch's random_(from, None)."""
    import torch

    cases = []

    def gen(seed, bg):
        return np.random.Generator(getattr(np.random, bg)(seed)) if bg else np.random.default_rng(seed)

    def args_of(lib, fn, seed, bg, opts):
        a = [lib, fn, f"--seed={seed}"]
        if bg:
            a.append(f"--bit-generator={bg}")
        for k, v in opts.items():
            a.append(f"--{k}={opt_text(v)}")
        return a

    # bytes, both classes; lengths around the 4-byte word.
    for length in [0, 1, 3, 4, 5, 8, 13, 100]:
        for seed in [0, 5, 2**32 - 1]:
            rs = np.random.RandomState(seed)
            vals = list(rs.bytes(length)) + list(rs.bytes(3))
            cases.append({"args": ["numpy-legacy", "bytes", f"--seed={seed}", f"--length={length}",
                                   "--then=3"], "dtype": "int64", "values": vals})
        for seed, bg in [(0, None), (2**100 + 3, None), (7, "MT19937"), (7, "Philox"), (7, "SFC64"),
                         (7, "PCG64DXSM")]:
            g = gen(seed, bg)
            vals = list(g.bytes(length)) + list(g.bytes(3))
            cases.append({"args": args_of("numpy", "bytes", seed, bg, dict(length=length, then=3)),
                          "dtype": "int64", "values": vals})

    # permuted: x = arange(prod(shape)).reshape(shape); --out=C|F gives out=np.empty(.., order).
    for shape in [(10,), (3, 4), (2, 3, 4), (5, 1), (1, 6), (0, 3), (4, 0, 2)]:
        n = int(np.prod(shape))
        axes = [None] + list(range(-len(shape), len(shape)))
        for axis in axes:
            for out in [None, "C", "F"]:
                if out == "F" and axis is not None and shape != (3, 4):
                    continue
                for seed, bg in [(0, None), (5, None), (2**64 + 1, None), (3, "MT19937"), (3, "SFC64")]:
                    g = gen(seed, bg)
                    x = np.arange(n, dtype=np.int64).reshape(shape)
                    o = None if out is None else np.empty(shape, dtype=np.int64, order=out)
                    r = g.permuted(x, axis=axis, out=o)
                    r2 = g.permuted(x, axis=axis)
                    opts = {"shape": ",".join(str(d) for d in shape)}
                    if axis is not None:
                        opts["axis"] = axis
                    if out is not None:
                        opts["out"] = out
                    a = args_of("numpy", "permuted", seed, bg, opts) + ["--repeat=2"]
                    if out is not None:
                        # the second call has no `out` in the golden run: run the same with
                        # repeat=1 so the CLI's repeat semantics stay simple.
                        a = a[:-1]
                        vals = r.reshape(-1).tolist()
                    else:
                        vals = r.reshape(-1).tolist() + r2.reshape(-1).tolist()
                    cases.append({"args": a, "dtype": "int64", "values": [int(v) for v in vals]})

    # multivariate_hypergeometric, both methods, complements (nsample > total/2), zeros.
    mv = [([16, 8, 4], 6), ([16, 8, 4], 20), ([5, 0, 3], 8), ([10, 10], 0), ([0, 0], 0),
          ([3], 2), ([100, 200, 300, 50, 7], 321), ([2, 3, 4, 1000], 17), ([1] * 30, 15),
          ([25, 25, 25], 60), ([10**6, 10**6, 5], 10**5)]
    for colors, nsample in mv:
        for method in ["marginals", "count"]:
            for seed, bg in [(0, None), (5, None), (2**33, None), (4861946401452, None), (9, "Philox")]:
                for size in [None, 4, (2, 3)]:
                    if sum(colors) > 10**5 and (method == "count" or size == (2, 3)):
                        continue
                    g = gen(seed, bg)
                    r = g.multivariate_hypergeometric(colors, nsample, size=size, method=method)
                    opts = dict(colors=colors, nsample=nsample, method=method)
                    if size is not None:
                        opts["shape"] = size if isinstance(size, int) else ",".join(map(str, size))
                    cases.append({"args": args_of("numpy", "multivariate_hypergeometric", seed, bg, opts),
                                  "dtype": "int64", "values": [int(v) for v in r.reshape(-1)]})

    # multivariate_normal, method='cholesky' (LAPACK dpotrf + BLAS: compared within 1e-12 of the
    # largest magnitude of the case).
    rng = np.random.RandomState(12345)
    covs = [("diag", [0.0, 1.0, -2.0], np.diag([1.0, 4.0, 0.25]))]
    for d in range(2, 7):
        a = rng.standard_normal((d, d))
        covs.append((f"spd{d}", list(rng.standard_normal(d).round(3)), a @ a.T + d * np.eye(d) * 0.1))
    covs.append(("ill", [1e3, -1e3], np.array([[1.0, 0.999999], [0.999999, 1.0]])))
    covs.append(("scale", [0.0, 0.0, 0.0], np.array([[1e6, 2e3, 0.0], [2e3, 5.0, 0.1], [0.0, 0.1, 0.0125]])))
    for name, mean, cov in covs:
        for seed, bg in [(0, None), (5, None), (2**70, None), (1, "MT19937")]:
            for size in [None, 7, (2, 3)]:
                g = gen(seed, bg)
                r = g.multivariate_normal(mean, cov, size=size, method="cholesky")
                opts = dict(mean=[float(m) for m in mean], cov=[float(c) for c in cov.reshape(-1)],
                            method="cholesky")
                if size is not None:
                    opts["shape"] = size if isinstance(size, int) else ",".join(map(str, size))
                cases.append({"args": args_of("numpy", "multivariate_normal", seed, bg, opts),
                              "dtype": "float64", "rtol": 1e-12,
                              "values": [num(v) for v in r.reshape(-1)]})

    # torch: Tensor.random_(from, None) for every dtype lockstep prints.
    dt = {"int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8,
          "uint8": torch.uint8, "bool": torch.bool, "float32": torch.float32, "float64": torch.float64}
    froms = [0, 1, 5, -3, 100, 127, 255, 2**15 - 1, 2**31 - 5, -2**31, 2**24 - 1, -2**40, 2**53 - 1,
             2**62, 2**63 - 2**31, 2**63 - 10, -2**63, -2**63 + 1, 16777217, 2**53 + 7]
    for name, d in dt.items():
        for f in froms:
            for seed in [0, 2**32 + 7]:
                torch.manual_seed(seed)
                try:
                    r = torch.empty(9, dtype=d).random_(f, None)
                    r2 = torch.empty(2, dtype=d).random_(f, to=None)
                except RuntimeError:
                    continue
                vals = r.tolist() + r2.tolist()
                if name.startswith("float"):
                    vals = [num(v) for v in vals]
                else:
                    vals = [int(v) for v in vals]
                cases.append({"args": ["torch", "random", f"--seed={seed}", f"--from={f}",
                                       "--shape=9", f"--dtype={name}", "--then=2"],
                              "dtype": name if name.startswith("float") else "int64", "values": vals})
    return cases, torch.__version__


def main():
    which = sys.argv[1:] or ["numpy", "bitgen", "python", "torch", "extra"]
    if "numpy" in which:
        write("random_surface_numpy.json", f"numpy {np.__version__}", numpy_cases())
    if "bitgen" in which:
        write("random_surface_numpy_bitgen.json", f"numpy {np.__version__}", bitgen_cases())
    if "python312" in which:
        write("random_surface_python312.json", f"CPython {sys.version.split()[0]} random",
              python312_cases())
        return
    if "python" in which:
        write("random_surface_python.json", f"CPython {sys.version.split()[0]} random",
              python_cases())
    if "extra" in which:
        cases, version = extra_cases()
        write("random_surface_extra.json", f"numpy {np.__version__}, torch {version}", cases)
    if "torch" in which:
        cases, version = torch_cases()
        write("random_surface_torch.json", f"torch {version}", cases)


if __name__ == "__main__":
    main()
