#!/usr/bin/env python3
"""Golden values from real PyTorch for `lockstep sample torch FN ...`.

Writes
  tests/golden/torch.json              every case: args, dtype, values
  tests/golden/state/torch_state.json  a selection: generator state after the calls,
                                       and what one more call draws

Run from the repository root with the reference interpreter:

    /opt/pyref/bin/python tools/golden_torch.py

Each case is written as the exact argument list of the lockstep CLI
(`lockstep sample torch FN --seed=S ...`); this script parses those same arguments
and calls torch the way the CLI contract says, so the file can be read back by
`crates/lockstep-cli/tests/golden.rs`.
"""

import functools
import json
import math
import multiprocessing
import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, get_worker_info

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "torch.json")
STATE_OUT = os.path.join(ROOT, "tests", "golden", "state", "torch_state.json")

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}
SQRT5 = "2.23606797749979"  # repr(math.sqrt(5)): the `a` of nn.Linear's kaiming init


# ---------------------------------------------------------------------------------------------
# Argument parsing (the subset of the CLI's option syntax that the cases use: --name=value)


def parse(args):
    assert args[0] == "torch", args
    fn = args[1]
    opts = {}
    for a in args[2:]:
        assert a.startswith("--") and "=" in a, a
        k, v = a[2:].split("=", 1)
        k = k.replace("_", "-")
        assert k not in opts, a
        opts[k] = v
    return fn, opts


def shape_of(opts, default=(1,)):
    s = opts.get("shape")
    if s is None:
        return tuple(default)
    return tuple(int(d) for d in s.split(","))


def flag(opts, name, default):
    v = opts.get(name)
    if v is None:
        return default
    return {"true": True, "false": False}[v.lower()]


def dtype_of(opts, default):
    name = opts.get("dtype", default)
    return name, DTYPES[name]


def fnum(opts, name, default):
    v = opts.get(name)
    return default if v is None else float(v)


# ---------------------------------------------------------------------------------------------
# One call of FN on the default generator (no seeding here): returns (dtype name, list)


def flat(t):
    return t.detach().reshape(-1).tolist()


def call_once(fn, o):
    if fn == "rand":
        dn, dt = dtype_of(o, "float32")
        return dn, flat(torch.rand(shape_of(o), dtype=dt))
    if fn == "randn":
        dn, dt = dtype_of(o, "float32")
        return dn, flat(torch.randn(shape_of(o), dtype=dt))
    if fn == "normal":
        dn, dt = dtype_of(o, "float32")
        t = torch.empty(shape_of(o), dtype=dt).normal_(fnum(o, "mean", 0.0), fnum(o, "std", 1.0))
        return dn, flat(t)
    if fn == "uniform":
        dn, dt = dtype_of(o, "float32")
        t = torch.empty(shape_of(o), dtype=dt).uniform_(fnum(o, "low", 0.0), fnum(o, "high", 1.0))
        return dn, flat(t)
    if fn == "exponential":
        dn, dt = dtype_of(o, "float32")
        return dn, flat(torch.empty(shape_of(o), dtype=dt).exponential_(fnum(o, "lambd", 1.0)))
    if fn == "bernoulli":
        dn, dt = dtype_of(o, "float32")
        p = o.get("p", "0.5")
        if "," in p:
            probs = torch.tensor([float(x) for x in p.split(",")], dtype=dt)
            return dn, flat(torch.bernoulli(probs))
        return dn, flat(torch.empty(shape_of(o), dtype=dt).bernoulli_(float(p)))
    if fn == "dropout":
        dn, dt = dtype_of(o, "float32")
        x = torch.ones(shape_of(o), dtype=dt)
        return dn, flat(F.dropout(x, fnum(o, "p", 0.5), training=True))
    if fn == "randint":
        dn, dt = dtype_of(o, "int64")
        low = int(o.get("low", "0"))
        high = int(o["high"])
        return dn, flat(torch.randint(low, high, shape_of(o), dtype=dt))
    if fn == "randperm":
        dn, dt = dtype_of(o, "int64")
        return dn, flat(torch.randperm(int(o["n"]), dtype=dt))
    if fn == "multinomial":
        _, dt = dtype_of(o, "float32")
        w = torch.tensor([float(x) for x in o["weights"].split(",")], dtype=dt)
        if "shape" in o:
            w = w.reshape(shape_of(o))
        k = int(o["num-samples"])
        return "int64", flat(torch.multinomial(w, k, flag(o, "replacement", False)))
    if fn in ("kaiming_uniform", "kaiming_normal"):
        dn, dt = dtype_of(o, "float32")
        init = getattr(torch.nn.init, fn + "_")
        t = torch.empty(shape_of(o), dtype=dt)
        init(
            t,
            a=fnum(o, "a", 0.0),
            mode=o.get("mode", "fan_in"),
            nonlinearity=o.get("nonlinearity", "leaky_relu"),
        )
        return dn, flat(t)
    if fn in ("xavier_uniform", "xavier_normal"):
        dn, dt = dtype_of(o, "float32")
        init = getattr(torch.nn.init, fn + "_")
        t = torch.empty(shape_of(o), dtype=dt)
        init(t, gain=fnum(o, "gain", 1.0))
        return dn, flat(t)
    if fn == "trunc_normal":
        dn, dt = dtype_of(o, "float32")
        t = torch.empty(shape_of(o), dtype=dt)
        torch.nn.init.trunc_normal_(
            t, fnum(o, "mean", 0.0), fnum(o, "std", 1.0), fnum(o, "a", -2.0), fnum(o, "b", 2.0)
        )
        return dn, flat(t)
    if fn == "linear":
        dn, dt = dtype_of(o, "float32")
        bias = flag(o, "bias", True)
        m = torch.nn.Linear(int(o["in-features"]), int(o["out-features"]), bias, dtype=dt)
        vals = flat(m.weight)
        if bias:
            vals += flat(m.bias)
        return dn, vals
    if fn == "dataloader":
        n = int(o["n"])
        dl = DataLoader(
            range(n), batch_size=int(o.get("batch-size", "1")), shuffle=flag(o, "shuffle", True)
        )
        vals = []
        for _ in range(int(o.get("epochs", "1"))):
            for batch in dl:
                vals += batch.tolist()
        return "int64", vals
    if fn == "worker-seeds":
        return "uint64", worker_seeds(o)
    raise ValueError(f"unknown function {fn}")


def _record_seed(store, worker_id):
    store[worker_id] = get_worker_info().seed


_MANAGER = None


def worker_seeds(o):
    global _MANAGER
    if _MANAGER is None:
        _MANAGER = multiprocessing.Manager()
    w = int(o["workers"])
    dl = DataLoader(
        range(int(o.get("n", "16"))),
        batch_size=int(o.get("batch-size", "1")),
        shuffle=True,
        num_workers=w,
        worker_init_fn=None,
    )
    vals = []
    for _ in range(int(o.get("epochs", "1"))):
        store = _MANAGER.dict()
        dl.worker_init_fn = functools.partial(_record_seed, store)
        for _batch in dl:
            pass
        seeds = dict(store)
        assert sorted(seeds) == list(range(w)), seeds
        vals += [seeds[i] for i in range(w)]
    return vals


def seed_of(o):
    return int(o.get("seed", "0"))


def run_case(args):
    """`torch.manual_seed(S)` then FN `--repeat` times; returns (dtype, values)."""
    fn, o = parse(args)
    repeat = int(o.pop("repeat", "1"))
    torch.manual_seed(seed_of(o))
    dtype, values = None, []
    for _ in range(repeat):
        d, v = call_once(fn, o)
        assert dtype in (None, d)
        dtype = d
        values += v
    return dtype, values


# ---------------------------------------------------------------------------------------------
# The cases

SEEDS_ALL = [0, 1, 42, 1234, 2**32 + 7, 123456789012, 2**63 + 5, 2**64 - 1, -1, -(2**63)]


def A(fn, seed, *opts):
    return ["torch", fn, f"--seed={seed}", *opts]


def cases():
    c = []
    # rand / randn over all seed kinds
    for s in SEEDS_ALL:
        c.append(A("rand", s, "--shape=3"))
        c.append(A("randn", s, "--shape=3"))
    c.append(A("rand", 0))
    c.append(A("randn", 0))
    c.append(A("rand", 0, "--shape=0"))
    c.append(A("randn", 0, "--shape=0"))
    for s in (0, 42):
        c.append(A("rand", s, "--shape=2", "--dtype=float64"))
        c.append(A("rand", s, "--shape=1000"))
        c.append(A("rand", s, "--shape=700", "--dtype=float64"))
        c.append(A("rand", s, "--shape=4,5"))
        c.append(A("rand", s, "--shape=2,3,4", "--dtype=float64"))
        c.append(A("rand", s, "--shape=5", "--repeat=3"))
    # randn / normal sizes around the 16-element block boundary
    sizes = [1, 2, 3, 15, 16, 17, 31, 32, 33, 100, 1000]
    for dt in ("float32", "float64"):
        for n in sizes:
            for s in (0, 42):
                c.append(A("randn", s, f"--shape={n}", f"--dtype={dt}"))
            c.append(A("normal", 1234, f"--shape={n}", f"--dtype={dt}", "--mean=0.3", "--std=1.7"))
        c.append(A("randn", 2**32 + 7, "--shape=33", f"--dtype={dt}"))
        c.append(A("randn", -1, "--shape=100", f"--dtype={dt}"))
        c.append(A("randn", 0, "--shape=4,5", f"--dtype={dt}"))
        c.append(A("randn", 42, "--shape=2,3,4", f"--dtype={dt}"))
        c.append(A("randn", 7, "--shape=3,5", f"--dtype={dt}"))
        c.append(A("normal", 0, "--shape=4,5", f"--dtype={dt}", "--mean=-2", "--std=0.5"))
        # repeated calls: odd scalar-path sizes leave a cached normal for the next call
        for shp, rep in (("1", 2), ("1", 3), ("3", 2), ("3", 3), ("5", 3), ("15", 2),
                         ("17", 2), ("16", 3), ("2", 3)):
            c.append(A("randn", 0, f"--shape={shp}", f"--dtype={dt}", f"--repeat={rep}"))
        c.append(A("normal", 42, "--shape=3", f"--dtype={dt}", "--mean=1", "--std=2", "--repeat=3"))
        c.append(A("normal", 42, "--shape=1", f"--dtype={dt}", "--mean=0.3", "--std=1.7",
                   "--repeat=5"))
        c.append(A("normal", 42, "--shape=7", f"--dtype={dt}"))
        c.append(A("normal", 5, "--shape=16", f"--dtype={dt}", "--mean=10", "--std=0.1"))
        c.append(A("normal", 5, "--shape=20", f"--dtype={dt}", "--mean=-1", "--std=3",
                   "--repeat=2"))
    # uniform
    for dt in ("float32", "float64"):
        for s in (0, 42, 2**64 - 1):
            c.append(A("uniform", s, "--shape=4", f"--dtype={dt}", "--low=-0.3333333333333333",
                       "--high=0.3333333333333333"))
            c.append(A("uniform", s, "--shape=10", f"--dtype={dt}", "--low=-5", "--high=3"))
        c.append(A("uniform", 1, "--shape=100", f"--dtype={dt}", "--low=2", "--high=2.5"))
        c.append(A("uniform", 1, "--shape=3", f"--dtype={dt}"))
        c.append(A("uniform", 1, "--shape=2,3", f"--dtype={dt}", "--low=-1e-3", "--high=1e3",
                   "--repeat=2"))
    # exponential
    for dt in ("float32", "float64"):
        for s in (0, 42):
            c.append(A("exponential", s, "--shape=3", f"--dtype={dt}"))
            c.append(A("exponential", s, "--shape=50", f"--dtype={dt}", "--lambd=2.5"))
        c.append(A("exponential", 1234, "--shape=4,5", f"--dtype={dt}", "--lambd=0.1",
                   "--repeat=2"))
    # bernoulli
    for dt in ("float32", "float64"):
        for p in ("0", "0.3", "1", "0.5"):
            c.append(A("bernoulli", 0, "--shape=20", f"--dtype={dt}", f"--p={p}"))
        c.append(A("bernoulli", 42, "--shape=10", f"--dtype={dt}"))
        c.append(A("bernoulli", 42, "--shape=4,5", f"--dtype={dt}", "--p=0.7", "--repeat=2"))
        for s in (0, 42, 2**63 + 5):
            c.append(A("bernoulli", s, f"--dtype={dt}",
                       "--p=0.1,0.5,0.9,0,1,0.25,0.75,0.5,0.3,0.6"))
        c.append(A("bernoulli", 7, f"--dtype={dt}", "--p=0.5,0.5,0.5", "--repeat=3"))
    # dropout
    for dt in ("float32", "float64"):
        for p in ("0", "0.2", "0.5", "1"):
            c.append(A("dropout", 0, "--shape=20", f"--dtype={dt}", f"--p={p}"))
        c.append(A("dropout", 42, "--shape=4,5", f"--dtype={dt}", "--p=0.3"))
        c.append(A("dropout", 42, "--shape=10", f"--dtype={dt}", "--repeat=2"))
        c.append(A("dropout", 1234, "--shape=7", f"--dtype={dt}", "--p=0.1"))
    # randint: ranges below, at and above 2^28, up to 2^62, negative lows, float dtypes
    for s in (0, 42):
        c.append(A("randint", s, "--high=10", "--shape=10"))
        c.append(A("randint", s, "--high=1099511627776", "--shape=2"))
    ranges = [
        (0, 2), (0, 10), (-5, 5), (-100, -3), (0, 2**28 - 1), (0, 2**28), (0, 2**28 + 1),
        (-(2**27), 2**27), (0, 2**32), (0, 2**32 + 1), (0, 2**40), (-(2**40), 2**41),
        (0, 2**62), (-(2**62), 2**62), (-(2**62), 1), (123456789, 123456790),
    ]
    for lo, hi in ranges:
        c.append(A("randint", 1234, f"--low={lo}", f"--high={hi}", "--shape=20"))
    for s in SEEDS_ALL[4:]:
        c.append(A("randint", s, "--low=-7", "--high=1000", "--shape=8"))
    c.append(A("randint", 0, "--high=6", "--shape=3,4", "--repeat=2"))
    c.append(A("randint", 0, "--high=3", "--shape=1000"))
    for dt in ("float32", "float64"):
        c.append(A("randint", 0, "--low=-3", "--high=100", "--shape=20", f"--dtype={dt}"))
        c.append(A("randint", 0, "--high=16777216", "--shape=10", f"--dtype={dt}"))
    c.append(A("randint", 0, f"--high={2**28 + 1}", "--shape=10", "--dtype=float64"))
    c.append(A("randint", 0, f"--high={2**40}", "--shape=10", "--dtype=float64"))
    c.append(A("randint", 42, "--high=10", "--dtype=int64", "--repeat=3"))
    # randperm
    for n in (1, 2, 10, 100, 1000, 5000):
        c.append(A("randperm", 0, f"--n={n}"))
    c.append(A("randperm", 0, "--n=0"))
    for s in (42, 2**64 - 1, -(2**63)):
        c.append(A("randperm", s, "--n=10"))
        c.append(A("randperm", s, "--n=100"))
    c.append(A("randperm", 1, "--n=10", "--repeat=3"))
    c.append(A("randperm", 1, "--n=700", "--repeat=2"))
    for dt in ("float32", "float64"):
        c.append(A("randperm", 1, "--n=50", f"--dtype={dt}"))
    # multinomial
    w4 = "--weights=0.1,0.2,0.3,0.4"
    for s in (0, 42):
        c.append(A("multinomial", s, w4, "--num-samples=6", "--replacement=true"))
        c.append(A("multinomial", s, w4, "--num-samples=3"))
    for dt in ("float32", "float64"):
        for k in (1, 2, 4):
            c.append(A("multinomial", 1234, w4, f"--num-samples={k}", f"--dtype={dt}"))
        for k in (1, 2, 50):
            c.append(A("multinomial", 1234, w4, f"--num-samples={k}", "--replacement=true",
                       f"--dtype={dt}"))
        # 2-D weights (rows of categories)
        c.append(A("multinomial", 7, "--weights=1,2,3,4,5,6,6,5,4,3,2,1", "--shape=2,6",
                   "--num-samples=3", f"--dtype={dt}"))
        c.append(A("multinomial", 7, "--weights=1,2,3,4,5,6,6,5,4,3,2,1", "--shape=3,4",
                   "--num-samples=5", "--replacement=true", f"--dtype={dt}"))
        c.append(A("multinomial", 7, "--weights=1,2,3,4,5,6,6,5,4,3,2,1", "--shape=2,6",
                   "--num-samples=1", "--replacement=true", f"--dtype={dt}"))
        # zero weights (never drawn; no-replacement draws stay within the non-zero ones)
        c.append(A("multinomial", 3, "--weights=0,1,0,2,0,3", "--num-samples=3",
                   f"--dtype={dt}"))
        c.append(A("multinomial", 3, "--weights=0,1,0,2,0,3", "--num-samples=20",
                   "--replacement=true", f"--dtype={dt}"))
        c.append(A("multinomial", 3, "--weights=0,0,5,0", "--num-samples=1", f"--dtype={dt}"))
        c.append(A("multinomial", 3, "--weights=0,1,0,2,0,3", "--num-samples=2",
                   f"--dtype={dt}", "--repeat=3"))
    c.append(A("multinomial", 11, "--weights=" + ",".join(str(i % 7 + 1) for i in range(100)),
               "--num-samples=100"))
    c.append(A("multinomial", 11, "--weights=" + ",".join(str(i % 7 + 1) for i in range(100)),
               "--num-samples=30", "--replacement=true"))
    # kaiming / xavier
    for dt in ("float32", "float64"):
        for fn in ("kaiming_uniform", "kaiming_normal"):
            for shp in ("5,3", "8,3,3,3", "4,20"):
                c.append(A(fn, 0, f"--shape={shp}", f"--dtype={dt}"))
            c.append(A(fn, 42, "--shape=8,3,3,3", f"--dtype={dt}", "--mode=fan_out",
                       "--nonlinearity=relu"))
            c.append(A(fn, 42, "--shape=7,20", f"--dtype={dt}", f"--a={SQRT5}"))
            c.append(A(fn, 42, "--shape=6,4", f"--dtype={dt}", "--nonlinearity=tanh"))
            c.append(A(fn, 42, "--shape=6,4", f"--dtype={dt}", "--nonlinearity=linear",
                       "--mode=fan_out"))
            c.append(A(fn, 1234, "--shape=4,4", f"--dtype={dt}", "--nonlinearity=leaky_relu",
                       "--a=0.2", "--repeat=2"))
            c.append(A(fn, 1234, "--shape=3,2", f"--dtype={dt}", "--nonlinearity=relu",
                       "--repeat=3"))
        for fn in ("xavier_uniform", "xavier_normal"):
            for shp in ("5,3", "8,3,3,3", "10,10"):
                c.append(A(fn, 0, f"--shape={shp}", f"--dtype={dt}"))
            c.append(A(fn, 42, "--shape=6,4", f"--dtype={dt}", "--gain=1.6666666666666667"))
            c.append(A(fn, 42, "--shape=3,3", f"--dtype={dt}", "--gain=0.5", "--repeat=3"))
    # trunc_normal
    for dt in ("float32", "float64"):
        for s in (0, 42):
            c.append(A("trunc_normal", s, "--shape=10", f"--dtype={dt}"))
            c.append(A("trunc_normal", s, "--shape=100", f"--dtype={dt}"))
            c.append(A("trunc_normal", s, "--shape=20", f"--dtype={dt}", "--mean=0", "--std=1",
                       "--a=2", "--b=3"))
        c.append(A("trunc_normal", 1234, "--shape=4,5", f"--dtype={dt}", "--std=0.02"))
        c.append(A("trunc_normal", 1234, "--shape=5", f"--dtype={dt}", "--mean=0.5", "--std=2",
                   "--a=-1", "--b=1", "--repeat=3"))
        c.append(A("trunc_normal", 1234, "--shape=3", f"--dtype={dt}", "--mean=0", "--std=1",
                   "--a=2", "--b=3", "--repeat=2"))
    # linear
    for s in (0, 42):
        c.append(A("linear", s, "--in-features=3", "--out-features=2"))
        c.append(A("linear", s, "--in-features=20", "--out-features=7"))
    for dt in ("float32", "float64"):
        c.append(A("linear", 1234, "--in-features=3", "--out-features=2", "--bias=false",
                   f"--dtype={dt}"))
        c.append(A("linear", 1234, "--in-features=20", "--out-features=7", "--bias=false",
                   f"--dtype={dt}"))
        c.append(A("linear", 1234, "--in-features=20", "--out-features=7", f"--dtype={dt}"))
        c.append(A("linear", 1234, "--in-features=3", "--out-features=2", f"--dtype={dt}",
                   "--repeat=2"))
    # dataloader (single process)
    for s in (0, 42, 2**64 - 1):
        c.append(A("dataloader", s, "--n=8", "--batch-size=4"))
        c.append(A("dataloader", s, "--n=10", "--batch-size=3", "--epochs=3"))
    c.append(A("dataloader", 0, "--n=8", "--batch-size=4", "--epochs=3"))
    c.append(A("dataloader", 0, "--n=10", "--batch-size=3"))
    c.append(A("dataloader", 1234, "--n=100", "--epochs=2"))
    # worker seeds (real worker processes: a handful only)
    for w, e in ((2, 1), (2, 2), (4, 1), (4, 2)):
        c.append(A("worker-seeds", 0, f"--workers={w}", f"--epochs={e}"))
    c.append(A("worker-seeds", 42, "--workers=2", "--epochs=2", "--n=10", "--batch-size=3"))
    return c


# Cases whose state after the calls is recorded (with what one more call draws).
STATE_CASES = [
    A("randn", 0, "--shape=3", "--dtype=float64"),
    A("randn", 0, "--shape=3"),
    A("randn", 42, "--shape=1", "--dtype=float64"),
    A("randn", 0, "--shape=3", "--dtype=float64", "--repeat=3"),
    A("randn", 0, "--shape=5", "--repeat=3"),
    A("randn", 0, "--shape=17"),
    A("randn", 0, "--shape=17", "--dtype=float64"),
    A("randn", 42, "--shape=1000"),
    A("randn", 42, "--shape=1000", "--dtype=float64"),
    A("normal", 42, "--shape=3", "--dtype=float64", "--mean=1", "--std=2", "--repeat=3"),
    A("normal", 1234, "--shape=7", "--mean=0.3", "--std=1.7"),
    A("rand", 0, "--shape=3"),
    A("rand", 2**64 - 1, "--shape=1000"),
    A("rand", -(2**63), "--shape=700", "--dtype=float64"),
    A("uniform", 1, "--shape=100", "--dtype=float64", "--low=2", "--high=2.5"),
    A("exponential", 0, "--shape=400"),
    A("bernoulli", 0, "--shape=20", "--p=0.3"),
    A("bernoulli", 0, "--dtype=float64", "--p=0.1,0.5,0.9,0,1,0.25,0.75,0.5,0.3,0.6"),
    A("dropout", 42, "--shape=4,5", "--dtype=float64", "--p=0.3"),
    A("randint", 1234, "--low=0", "--high=1099511627776", "--shape=20"),
    A("randint", 0, "--high=3", "--shape=1000"),
    A("randperm", 0, "--n=1000"),
    A("randperm", 0, "--n=100"),
    A("multinomial", 7, "--weights=1,2,3,4,5,6,6,5,4,3,2,1", "--shape=3,4", "--num-samples=5",
      "--replacement=true"),
    A("multinomial", 0, "--weights=0.1,0.2,0.3,0.4", "--num-samples=3"),
    A("kaiming_normal", 0, "--shape=8,3,3,3"),
    A("kaiming_uniform", 42, "--shape=7,20", f"--a={SQRT5}"),
    A("xavier_normal", 42, "--shape=3,3", "--dtype=float64", "--gain=0.5", "--repeat=3"),
    A("trunc_normal", 0, "--shape=20", "--mean=0", "--std=1", "--a=2", "--b=3"),
    A("linear", 0, "--in-features=20", "--out-features=7"),
    A("dataloader", 0, "--n=10", "--batch-size=3"),
]


def state_case(args):
    dtype, values = run_case(args)
    state = torch.get_rng_state().numpy().tobytes()
    assert len(state) == 5056
    fn, o = parse(args)
    o.pop("repeat", None)
    next_dtype, next_values = call_once(fn, o)
    return {
        "args": args,
        "state_hex": state.hex(),
        "next_dtype": next_dtype,
        "next_values": next_values,
    }


def dump(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        # json.dumps writes floats with repr: the shortest text that parses back exactly.
        text = json.dumps(obj, allow_nan=False, separators=(",", ":"))
        # one case per line keeps diffs readable
        text = text.replace('},{"args"', '},\n{"args"')
        f.write(text + "\n")


def main():
    # "suggested max number of worker" on small machines: harmless here
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    torch.set_num_threads(1)
    all_cases = cases()
    seen = set()
    out = []
    for args in all_cases:
        key = tuple(args)
        assert key not in seen, args
        seen.add(key)
        dtype, values = run_case(args)
        out.append({"args": args, "dtype": dtype, "values": values})
    header = {
        "generator": "tools/golden_torch.py",
        "library": "torch " + torch.__version__.split("+")[0],
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    dump(OUT, {**header, "cases": out})
    states = [state_case(a) for a in STATE_CASES]
    dump(STATE_OUT, {**header, "cases": states})
    counts = {}
    for c in out:
        counts[c["args"][1]] = counts.get(c["args"][1], 0) + 1
    print(f"{OUT}: {len(out)} cases, {os.path.getsize(OUT)} bytes", file=sys.stderr)
    print(f"{STATE_OUT}: {len(states)} cases, {os.path.getsize(STATE_OUT)} bytes",
          file=sys.stderr)
    for k, v in counts.items():
        print(f"  {k}: {v}", file=sys.stderr)


if __name__ == "__main__":
    main()
