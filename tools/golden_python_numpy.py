#!/usr/bin/env python3
"""Golden values for `lockstep sample python|numpy-legacy|numpy` and for the state/library
tests of crates/lockstep-rng/tests/compat_python_numpy.rs, recorded from the REAL libraries
(CPython's `random`, NumPy), never from lockstep.

Run with the reference interpreter:  /opt/pyref/bin/python tools/golden_python_numpy.py
Writes tests/golden/{python,numpy-legacy,numpy}.json and
tests/golden/state/{python_state,numpy_state}.json at the workspace root.

Each CLI case mirrors the CLI contract exactly (see crates/lockstep-cli/src/sample/*.rs):
a fresh generator seeded with --seed, FN called --repeat times, all values flattened.
"""
import json
import os
import platform
import random
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
GOLD = os.path.join(ROOT, "tests", "golden")
ME = "tools/golden_python_numpy.py"


def f64s(xs):
    return [float(x) for x in xs]


def ints(xs):
    return [int(x) for x in xs]


def args_of(lib, fn, seed, opts):
    a = [lib, fn, f"--seed={seed}"]
    for k, v in opts.items():
        a.append(f"--{k}={v}")
    return a


# ------------------------------------------------------------------------------ CPython
def py_call(r, fn, o):
    n = o.get("n", 1)
    if fn == "random":
        return "float64", [r.random() for _ in range(n)]
    if fn == "randint":
        return "int64", [r.randint(o.get("low", 0), o["high"]) for _ in range(n)]
    if fn == "gauss":
        return "float64", [r.gauss(o.get("mu", 0.0), o.get("sigma", 1.0)) for _ in range(n)]
    if fn == "uniform":
        return "float64", [r.uniform(o.get("low", 0.0), o.get("high", 1.0)) for _ in range(n)]
    if fn == "shuffle":
        x = list(range(o["n"]))
        r.shuffle(x)
        return "int64", x
    if fn == "choice":
        return "int64", [r.choice(range(o["k"])) for _ in range(n)]
    if fn == "getrandbits":
        k = o.get("k", 32)
        return ("int64" if k <= 63 else "int"), [r.getrandbits(k) for _ in range(n)]
    raise ValueError(fn)


def py_case(fn, seed, repeat=1, **o):
    r = random.Random(seed)
    vals = []
    dtype = None
    for _ in range(repeat):
        dtype, v = py_call(r, fn, o)
        vals += v
    opts = dict(o)
    if repeat != 1:
        opts["repeat"] = repeat
    return {"args": args_of("python", fn, seed, opts), "dtype": dtype, "values": vals}


PY_SEEDS = [0, 1, 42, 2**32 + 5, 2**64 + 12345, -7, -(2**100 + 3),
            123456789012345678901234567890]


def python_cases():
    c = []
    for s in PY_SEEDS:
        c.append(py_case("random", s, n=5))
        c.append(py_case("randint", s, low=1, high=100, n=20))
        c.append(py_case("gauss", s, n=3, repeat=3))
        c.append(py_case("shuffle", s, n=10))
        c.append(py_case("uniform", s, low=-1.5, high=2.5, n=7))
        c.append(py_case("choice", s, k=6, n=10))
        c.append(py_case("getrandbits", s, k=32, n=4))
    c.append(py_case("random", 0, n=1000, repeat=2))
    c.append(py_case("random", 3, repeat=4))
    for lo, hi in [(0, 1), (-5, 5), (0, 2**40), (-(2**63), 2**63 - 1), (7, 7), (0, 2**32 - 1),
                   (0, 2**32), (-(2**62), 2**62)]:
        c.append(py_case("randint", 11, low=lo, high=hi, n=50))
    c.append(py_case("gauss", 5, mu=3.0, sigma=0.5, n=101))
    for n in [0, 1, 2, 100, 2000]:
        c.append(py_case("shuffle", 9, n=n, repeat=2))
    for k in [1, 2, 64, 100, 2**31, 2**33 + 1]:
        c.append(py_case("choice", 12, k=k, n=30))
    for k in [0, 1, 7, 31, 33, 63, 64, 65, 100, 128, 200, 1000]:
        c.append(py_case("getrandbits", 13, k=k, n=5, repeat=2))
    c.append(py_case("uniform", 2**70, low=10.0, high=-10.0, n=20))
    return c


# ------------------------------------------------------------------------------ NumPy legacy
def shape_opt(shape):
    return {} if shape is None else {"shape": ",".join(map(str, shape))}


def seed_obj(seed):
    if isinstance(seed, str):
        return [int(x) for x in seed.strip("[]").split(",")]
    return seed


def leg_call(rs, fn, o, shape):
    size = shape if shape is not None else None
    if fn == "rand":
        v = rs.rand(*shape) if shape is not None else rs.rand()
        return "float64", f64s(np.ravel(v))
    if fn == "randn":
        v = rs.randn(*shape) if shape is not None else rs.randn()
        return "float64", f64s(np.ravel(v))
    if fn == "randint":
        dt = np.int32 if o.get("dtype") == "int32" else np.int64
        v = rs.randint(o.get("low", 0), o["high"], size=size, dtype=dt)
        return "int64", ints(np.ravel(v))
    if fn == "permutation":
        return "int64", ints(rs.permutation(o["n"]))
    if fn == "uniform":
        return "float64", f64s(np.ravel(rs.uniform(o.get("low", 0.0), o.get("high", 1.0), size)))
    if fn == "normal":
        return "float64", f64s(np.ravel(rs.normal(o.get("loc", 0.0), o.get("scale", 1.0), size)))
    raise ValueError(fn)


def leg_case(fn, seed, shape=None, repeat=1, **o):
    rs = np.random.RandomState(seed_obj(seed))
    vals = []
    dtype = None
    for _ in range(repeat):
        dtype, v = leg_call(rs, fn, o, shape)
        vals += v
    opts = dict(o)
    opts.update(shape_opt(shape))
    if repeat != 1:
        opts["repeat"] = repeat
    return {"args": args_of("numpy-legacy", fn, seed, opts), "dtype": dtype, "values": vals}


LEG_SEEDS = [0, 1, 42, 2**32 - 1, "1,2,3", "[5]", "4294967295,0,7,8,9"]


def legacy_cases():
    c = []
    for s in LEG_SEEDS:
        c.append(leg_case("rand", s, shape=(5,)))
        c.append(leg_case("randn", s, shape=(3,), repeat=3))
        c.append(leg_case("randint", s, shape=(10,), low=0, high=10))
        c.append(leg_case("permutation", s, n=10))
        c.append(leg_case("uniform", s, shape=(4,), low=-1.0, high=1.0))
        c.append(leg_case("normal", s, shape=(5,), loc=2.0, scale=3.0))
    c.append(leg_case("rand", 7))
    c.append(leg_case("rand", 7, shape=(2, 3), repeat=2))
    c.append(leg_case("rand", 8, shape=(1000,)))
    c.append(leg_case("randn", 9))
    c.append(leg_case("randn", 9, shape=(7,), repeat=2))
    c.append(leg_case("randn", 9, shape=(2000,)))
    for lo, hi, dt in [(0, 1, None), (-100, 100, None), (0, 2**33, None), (0, 2**32, None),
                       (0, 2**32 + 1, None), (-(2**63), 2**63 - 1, None), (5, 6, None),
                       (0, 10, "int32"), (-(2**31), 2**31 - 1, "int32"), (0, 2**31, "int32"),
                       (-7, 1000, "int32")]:
        o = {"low": lo, "high": hi}
        if dt:
            o["dtype"] = dt
        c.append(leg_case("randint", 10, shape=(40,), repeat=2, **o))
    for n in [0, 1, 2, 100, 1000]:
        c.append(leg_case("permutation", 11, n=n, repeat=2))
    c.append(leg_case("uniform", 12, shape=(50,), low=5.0, high=-3.0))
    c.append(leg_case("normal", 13, shape=(51,), repeat=2))
    return c


# ------------------------------------------------------------------------------ NumPy Generator
def gen_call(g, fn, o, shape):
    size = shape
    if fn in ("random", "standard_normal", "standard_exponential"):
        dt = np.float32 if o.get("dtype") == "float32" else np.float64
        v = getattr(g, fn)(size, dtype=dt)
        return ("float32" if dt == np.float32 else "float64"), f64s(np.ravel(v))
    if fn == "integers":
        dt = np.int32 if o.get("dtype") == "int32" else np.int64
        v = g.integers(o.get("low", 0), o["high"], size=size, dtype=dt,
                       endpoint=o.get("endpoint", "false") == "true")
        return "int64", ints(np.ravel(v))
    if fn == "permutation":
        return "int64", ints(g.permutation(o["n"]))
    if fn == "uniform":
        return "float64", f64s(np.ravel(g.uniform(o.get("low", 0.0), o.get("high", 1.0), size)))
    if fn == "normal":
        return "float64", f64s(np.ravel(g.normal(o.get("loc", 0.0), o.get("scale", 1.0), size)))
    if fn == "exponential":
        return "float64", f64s(np.ravel(g.exponential(o.get("scale", 1.0), size)))
    raise ValueError(fn)


def gen_case(fn, seed, shape=None, repeat=1, **o):
    g = np.random.default_rng(seed_obj(seed))
    vals = []
    dtype = None
    for _ in range(repeat):
        dtype, v = gen_call(g, fn, o, shape)
        vals += v
    opts = dict(o)
    opts.update(shape_opt(shape))
    if repeat != 1:
        opts["repeat"] = repeat
    return {"args": args_of("numpy", fn, seed, opts), "dtype": dtype, "values": vals}


GEN_SEEDS = [0, 1, 42, 2**32 + 1, 2**64 + 7, 2**128 - 1, "1,2,3", "0,0"]


def generator_cases():
    c = []
    for s in GEN_SEEDS:
        c.append(gen_case("random", s, shape=(5,)))
        c.append(gen_case("random", s, shape=(3,), repeat=3, dtype="float32"))
        c.append(gen_case("standard_normal", s, shape=(5,)))
        c.append(gen_case("standard_normal", s, shape=(5,), dtype="float32"))
        c.append(gen_case("integers", s, shape=(10,), low=0, high=10))
        c.append(gen_case("permutation", s, n=10))
        c.append(gen_case("uniform", s, shape=(4,), low=-1.0, high=1.0))
        c.append(gen_case("normal", s, shape=(5,), loc=2.0, scale=3.0))
        c.append(gen_case("exponential", s, shape=(5,), scale=2.0))
        c.append(gen_case("standard_exponential", s, shape=(5,), dtype="float32"))
    c.append(gen_case("random", 7))
    c.append(gen_case("random", 7, dtype="float32", repeat=5))
    c.append(gen_case("random", 7, shape=(2, 3), repeat=2))
    # Large draws reach the ziggurat tail and wedge paths.
    c.append(gen_case("standard_normal", 8, shape=(20000,)))
    c.append(gen_case("standard_normal", 8, shape=(20001,), dtype="float32"))
    c.append(gen_case("standard_exponential", 8, shape=(20000,)))
    c.append(gen_case("standard_exponential", 8, shape=(20001,), dtype="float32"))
    c.append(gen_case("exponential", 8, shape=(3000,)))
    for lo, hi, dt, ep in [(0, 1, None, None), (-5, 5, None, "true"), (0, 2**40, None, None),
                           (0, 2**32, None, None), (0, 2**32, None, "true"),
                           (-(2**63), 2**63 - 1, None, "true"), (-(2**63), 2**63 - 1, None, None),
                           (3, 3, None, "true"), (0, 10, "int32", None),
                           (-(2**31), 2**31 - 1, "int32", "true"), (0, 2**31, "int32", None),
                           (-7, 1000, "int32", "true"), (0, 100, None, None)]:
        o = {"low": lo, "high": hi}
        if dt:
            o["dtype"] = dt
        if ep:
            o["endpoint"] = ep
        c.append(gen_case("integers", 10, shape=(41,), repeat=2, **o))
    for n in [0, 1, 2, 100, 1000]:
        c.append(gen_case("permutation", 11, n=n, repeat=2))
    c.append(gen_case("uniform", 12, shape=(50,), low=-3.0, high=5.0))
    c.append(gen_case("normal", 13, shape=(51,), repeat=2, loc=-1.0, scale=0.25))
    return c


# ------------------------------------------------------------------------------ state files
def py_state_doc():
    cases = []
    for s in [0, 42, 2**64 + 1, -99]:
        for n_random, n_gauss in [(0, 0), (1, 0), (3, 1), (700, 2), (10, 5)]:
            r = random.Random(s)
            for _ in range(n_random):
                r.random()
            for _ in range(n_gauss):
                r.gauss(0.0, 1.0)
            version, internal, gnext = r.getstate()
            nxt_r = [r.random() for _ in range(5)]
            nxt_g = [r.gauss(0.0, 1.0) for _ in range(3)]
            cases.append({"seed": str(s), "n_random": n_random, "n_gauss": n_gauss,
                          "version": version, "internal": list(internal), "gauss_next": gnext,
                          "next_random": nxt_r, "next_gauss": nxt_g})
    funcs = []

    def add(seed, call, params, values):
        funcs.append({"seed": seed, "call": call, "params": params, "values": values})
    for s in [0, 7, 2**40]:
        for n, k in [(10, 3), (100, 5), (30, 20), (1000, 10), (100000, 50), (5, 5), (4, 0)]:
            add({"int": str(s)}, "sample", [n, k], random.Random(s).sample(range(n), k))
        add({"int": str(s)}, "choices", [10, 20], random.Random(s).choices(range(10), k=20))
        w = [0.5, 0.0, 2.0, 1.25, 3.0]
        add({"int": str(s)}, "choices_weighted", [5, 20, w],
            random.Random(s).choices(range(5), weights=w, k=20))
        r = random.Random(s)
        add({"int": str(s)}, "normalvariate", [1.5, 2.0, 20], [r.normalvariate(1.5, 2.0) for _ in range(20)])
        r = random.Random(s)
        add({"int": str(s)}, "expovariate", [0.5, 20], [r.expovariate(0.5) for _ in range(20)])
        for a, b, st in [(0, 100, 7), (100, 0, -3), (-50, 50, 1), (10, 11, 5), (5, -1000, -17)]:
            r = random.Random(s)
            add({"int": str(s)}, "randrange", [a, b, st, 10], [r.randrange(a, b, st) for _ in range(10)])
    for text in ["hello", "", "ünïcödé ✓", "a" * 300]:
        r = random.Random(text)
        add({"str": text}, "random", [5], [r.random() for _ in range(5)])
    for b in [b"", b"\x00\xff", bytes(range(200))]:
        r = random.Random(b)
        add({"bytes_hex": b.hex()}, "random", [5], [r.random() for _ in range(5)])
    for x in [0.0, 1.5, -3.5, 1e300, -1e-300, 5e-324, float("inf"), float("-inf"), 2.0**70]:
        r = random.Random(x)
        add({"float": repr(x)}, "random", [5], [r.random() for _ in range(5)])
    return {"generator": ME, "library": f"CPython {platform.python_version()}",
            "states": cases, "functions": funcs}


def np_state_doc():
    legacy = []
    for s in [0, 42, "1,2,3"]:
        for n_rand, n_randn in [(0, 0), (1, 0), (5, 1), (400, 3), (2, 2)]:
            rs = np.random.RandomState(seed_obj(s))
            rs.rand(n_rand)
            rs.randn(n_randn)
            name, key, pos, has_gauss, cached = rs.get_state()
            legacy.append({"seed": str(s), "n_rand": n_rand, "n_randn": n_randn,
                           "key": ints(key), "pos": int(pos), "has_gauss": int(has_gauss),
                           "cached_gaussian": float(cached),
                           "next_rand": f64s(rs.rand(3)), "next_randn": f64s(rs.randn(3))})
    lfuncs = []
    for s in [0, 42]:
        for n in [1, 10, 257]:
            rs = np.random.RandomState(s)
            x = np.arange(n)
            rs.shuffle(x)
            lfuncs.append({"seed": s, "call": "shuffle", "params": [n], "values": ints(x)})
        for pop, size, replace, p in [(10, 5, True, None), (10, 5, False, None),
                                      (5, 8, True, [0.1, 0.2, 0.3, 0.0, 0.4]),
                                      (5, 3, False, [0.1, 0.2, 0.3, 0.0, 0.4]),
                                      (1000, 20, False, None), (6, 6, False, [1 / 6] * 6)]:
            rs = np.random.RandomState(s)
            v = rs.choice(pop, size, replace=replace, p=p)
            lfuncs.append({"seed": s, "call": "choice", "params": [pop, size, replace, p],
                           "values": ints(v)})
        rs = np.random.RandomState(s)
        lfuncs.append({"seed": s, "call": "standard_exponential", "params": [10],
                       "values": f64s(rs.standard_exponential(10))})
    seedseqs = []
    for ent in [0, 42, 2**32, 2**128 - 1, 12345678901234567890123456789, [1, 2, 3],
                [2**40, 0, 5], [0]]:
        ss = np.random.SeedSequence(ent)
        kids = ss.spawn(3)
        more = ss.spawn(2)
        grand = kids[1].spawn(2)
        seedseqs.append({
            "entropy": [str(e) for e in ent] if isinstance(ent, list) else str(ent),
            "pool": ints(ss.pool),
            "state_u32": ints(ss.generate_state(8)),
            "state_u64": [str(int(x)) for x in ss.generate_state(4, np.uint64)],
            "children": [{"spawn_key": [str(k) for k in c.spawn_key],
                          "state_u32": ints(c.generate_state(4))} for c in kids + more + grand],
        })
    pcg = []
    for s in [0, 42, 2**100 + 5]:
        bg = np.random.PCG64(s)
        st = bg.state["state"]
        row = {"seed": str(s), "state": str(st["state"]), "inc": str(st["inc"]), "advance": [],
               "jumped": []}
        for d in [1, 2, 1000, 2**64 + 3, 2**127 + 11]:
            b = np.random.PCG64(s)
            b.advance(d)
            row["advance"].append({"delta": str(d), "state": str(b.state["state"]["state"]),
                                   "raw": [str(int(x)) for x in b.random_raw(3)]})
        for j in [1, 2, 7]:
            b = np.random.PCG64(s).jumped(j)
            row["jumped"].append({"jumps": j, "state": str(b.state["state"]["state"]),
                                  "raw": [str(int(x)) for x in b.random_raw(3)]})
        # The buffered 32-bit half: after an odd number of float32 draws.
        g = np.random.Generator(np.random.PCG64(s))
        g.random(3, dtype=np.float32)
        d = g.bit_generator.state
        row["after_3_f32"] = {"state": str(d["state"]["state"]), "has_uint32": int(d["has_uint32"]),
                              "uinteger": int(d["uinteger"])}
        pcg.append(row)
    gfuncs = []
    for s in [0, 42]:
        for pop, size, replace, p, shuffle in [
                (10, 5, True, None, True), (10, 3, False, None, True),
                (10, 10, False, None, True), (100, 30, False, None, False),
                (20000, 500, False, None, True), (20000, 100, False, None, True),
                (20000, 1001, False, None, False), (5, 8, True, [0.1, 0.2, 0.3, 0.0, 0.4], True),
                (5, 3, False, [0.1, 0.2, 0.3, 0.0, 0.4], True), (2**33, 4, True, None, True),
                (2**33, 4, False, None, True)]:
            g = np.random.default_rng(s)
            v = g.choice(pop, size, replace=replace, p=p, shuffle=shuffle)
            gfuncs.append({"seed": s, "call": "choice", "params": [pop, size, replace, p, shuffle],
                           "values": ints(v)})
        for n in [1, 10, 257]:
            g = np.random.default_rng(s)
            x = np.arange(n)
            g.shuffle(x)
            gfuncs.append({"seed": s, "call": "shuffle", "params": [n], "values": ints(x)})
        g = np.random.default_rng(s)
        kids = g.spawn(2)
        gfuncs.append({"seed": s, "call": "spawn_random", "params": [2, 3],
                       "values": [x for k in kids for x in f64s(k.random(3))]})
        # Mixed 32/64-bit draws: the buffered half persists across calls.
        g = np.random.default_rng(s)
        vals = f64s(g.random(1, dtype=np.float32)) + f64s(g.random(2)) + \
            f64s(g.random(1, dtype=np.float32)) + f64s(g.integers(0, 7, 3)) + \
            f64s(g.standard_normal(1, dtype=np.float32))
        gfuncs.append({"seed": s, "call": "mixed", "params": [], "values": vals})
    return {"generator": ME, "library": f"numpy {np.__version__}", "legacy": legacy,
            "legacy_functions": lfuncs, "seed_sequences": seedseqs, "pcg64": pcg,
            "generator_functions": gfuncs}


def write(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {os.path.getsize(path)} bytes", file=sys.stderr)


def main():
    py = f"CPython {platform.python_version()}"
    npv = f"numpy {np.__version__}"
    write(os.path.join(GOLD, "python.json"),
          {"generator": ME, "library": py, "cases": python_cases()})
    write(os.path.join(GOLD, "numpy-legacy.json"),
          {"generator": ME, "library": npv, "cases": legacy_cases()})
    write(os.path.join(GOLD, "numpy.json"),
          {"generator": ME, "library": npv, "cases": generator_cases()})
    write(os.path.join(GOLD, "state", "python_state.json"), py_state_doc())
    write(os.path.join(GOLD, "state", "numpy_state.json"), np_state_doc())


if __name__ == "__main__":
    main()
