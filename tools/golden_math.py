#!/usr/bin/env python3
"""Writes tests/golden/math.json: correctly rounded results of every function of
crates/lockstep-tensor/src/math.rs (f64 and f32 variants), for crates/lockstep-tensor/tests/math.rs.

Finite results come from mpmath at high precision (Ziv's test: two working precisions must give
the same rounded result), rounded to nearest-even in the target format, subnormals and overflow
included. Special inputs (NaN, infinities, signed zeros, domain errors, pow's C99 Annex F cases)
take the value the C library (glibc, through ctypes) returns: C99 Annex F fixes those exactly.

Per function:
  segments  the random inputs: for each segment, `n` inputs whose bit patterns are uniform
            between the bits of `x[0]` and `x[1]` (positive floats, so uniform per binade and
            log-uniform overall), with sign `xs` ("+", "-", or "±": one more draw, low bit 1 =
            negative); pow also draws `y` the same way, or an integer in `yint` inclusive.
            Draws come from splitmix64 seeded with `seed`, in order: x magnitude, x sign, y, y
            sign. The test regenerates the same inputs (integer arithmetic only).
  bulk      base64 of, per random input, the correctly rounded result's bits (little-endian, 8
            or 4 bytes) then one signed byte d: the exact value is result + d/250 ulp.
  cases     explicit inputs (thresholds, hard cases): [x, (y,) result, d] in hex bits.
  special   explicit inputs whose result is exact by the standard: [x, (y,) result].
The ulp of an exact value v is 2^(max(e, emin) - p + 1) with 2^e <= |v| < 2^(e+1).

Run: python3 tools/golden_math.py   (mpmath >= 1.3, numpy; Linux/glibc for the special values)
"""

import base64
import ctypes
import ctypes.util
import json
import math
import os
import struct
import sys

import mpmath
import numpy as np
from mpmath import mp, mpf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "math.json")
M64 = (1 << 64) - 1
DQ = 250  # d is stored in units of 1/DQ ulp

FMT = {
    "f64": dict(p=53, emin=-1022, emax=1023, hexw=16),
    "f32": dict(p=24, emin=-126, emax=127, hexw=8),
}


def bits(x, ty):
    if ty == "f64":
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_bits(b, ty):
    if ty == "f64":
        return struct.unpack("<d", struct.pack("<Q", b))[0]
    return struct.unpack("<f", struct.pack("<I", b))[0]


def to_ty(x, ty):
    """x (a Python float) rounded to the type (exact for f64)."""
    return x if ty == "f64" else float(np.float32(x))


def hexb(x, ty):
    return format(bits(x, ty), "0%dx" % FMT[ty]["hexw"])


class SplitMix64:
    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)


def round_exact(v, ty):
    """(correctly rounded float, d) for a finite real mpf v; d = (v - rounded) / ulp(v)."""
    f = FMT[ty]
    if v == 0:
        return 0.0, mpf(0)
    neg = v < 0
    a = abs(v)
    _, e = mpmath.frexp(a)  # a = m 2^e, 1/2 <= m < 1
    k = int(e) - 1
    q = max(k, f["emin"]) - (f["p"] - 1)
    t = mpmath.ldexp(a, -q)
    n = int(mpmath.floor(t))
    frac = t - n
    if frac > 0.5 or (frac == 0.5 and n % 2 == 1):
        n += 1
    d = t - n
    if n * mpmath.ldexp(1, q) >= mpmath.ldexp(1, f["emax"] + 1):
        r, d = math.inf, mpf(0)
    else:
        r = float(mpmath.ldexp(n, q))  # exact: n has at most p + 1 bits
    if neg:
        r, d = -r, -d
    return r, d


def sigmoid_mp(x):
    return 1 / (1 + mp.exp(-x))


MP = {
    "exp": mp.exp,
    "expm1": mp.expm1,
    "ln": mp.log,
    "ln_1p": mp.log1p,
    "tanh": mp.tanh,
    "erf": mp.erf,
    "sin": mp.sin,
    "cos": mp.cos,
    "pow": mp.power,
    "sigmoid": sigmoid_mp,
}


LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
for _n in ("exp", "expm1", "log", "log1p", "tanh", "erf", "sin", "cos"):
    for _suffix, _t in (("", ctypes.c_double), ("f", ctypes.c_float)):
        getattr(LIBM, _n + _suffix).restype = _t
        getattr(LIBM, _n + _suffix).argtypes = [_t]
for _suffix, _t in (("", ctypes.c_double), ("f", ctypes.c_float)):
    getattr(LIBM, "pow" + _suffix).restype = _t
    getattr(LIBM, "pow" + _suffix).argtypes = [_t, _t]
C_NAME = {"exp": "exp", "expm1": "expm1", "ln": "log", "ln_1p": "log1p", "tanh": "tanh",
          "erf": "erf", "sin": "sin", "cos": "cos", "pow": "pow"}


def c_special(name, ty, x, y=None):
    """The C library's value at a special input (C99 Annex F fixes it exactly)."""
    suffix = "" if ty == "f64" else "f"
    if name == "sigmoid":
        e = getattr(LIBM, "exp" + suffix)(-x)
        return 1.0 / (1.0 + e)  # e is 0, 1 or inf here: exact
    f = getattr(LIBM, C_NAME[name] + suffix)
    return f(x) if y is None else f(x, y)


def is_int(y):
    return math.isfinite(y) and y == math.floor(y)


def special(name, x, y=None):
    """Whether the result at this input is fixed by the standard (no rounding involved)."""
    if name == "pow":
        if not (math.isfinite(x) and math.isfinite(y)):
            return True
        return x == 0 or y == 0 or x == 1 or (x < 0 and not is_int(y))
    if not math.isfinite(x) or x == 0:
        return True
    if name == "ln" and x < 0:
        return True
    if name == "ln_1p" and x <= -1:
        return True
    return False


def exact(name, ty, x, y=None):
    """(rounded, dq) by Ziv's test over growing precisions."""
    base = 160
    if name in ("sin", "cos"):
        base += max(0, math.frexp(x)[1])  # argument reduction of huge x
    if name == "pow":
        base += 64 + max(0, math.frexp(y)[1])
    last = None
    for prec in (base, base + 96, 2 * base + 192, 4 * base + 512):
        mp.prec = prec
        args = (mpf(x),) if y is None else (mpf(x), mpf(y))
        v = MP[name](*args)
        if isinstance(v, mpmath.mpc):
            raise ValueError("complex result for %s%r" % (name, args))
        r, d = round_exact(v, ty)
        cur = (bits(r, ty), int(mpmath.nint(d * DQ)))
        if cur == last:
            return cur
        last = cur
    raise RuntimeError("Ziv's test did not settle for %s(%r, %r)" % (name, x, y))


def result(name, ty, x, y=None):
    """(bits, dq, is_special)."""
    if special(name, x, y):
        r = c_special(name, ty, x, y)
        return bits(to_ty(r, ty), ty), 0, True
    b, dq = exact(name, ty, x, y)
    return b, dq, False


def draw(rng, lo, hi, sign, ty):
    blo, bhi = bits(lo, ty), bits(hi, ty)
    assert 0 <= blo <= bhi, (lo, hi)
    x = from_bits(blo + rng.next() % (bhi - blo + 1), ty)
    neg = sign == "-" or (sign == "±" and rng.next() & 1 == 1)
    return -x if neg else x


def gen_inputs(spec, ty):
    rng = SplitMix64(spec["seed"])
    out = []
    for s in spec["segments"]:
        for _ in range(s["n"]):
            x = draw(rng, s["x"][0], s["x"][1], s["xs"], ty)
            if "yint" in s:
                lo, hi = s["yint"]
                y = float(lo + rng.next() % (hi - lo + 1))
            elif "y" in s:
                y = draw(rng, s["y"][0], s["y"][1], s["ys"], ty)
            else:
                y = None
            out.append((x, y))
    return out


def near(t, ty, k=6):
    """t rounded to the type and its k neighbours on each side (same sign)."""
    b = bits(to_ty(t, ty), ty)
    return [from_bits(b + i, ty) for i in range(-k, k + 1) if b + i >= 0]


def mpround(v, ty):
    """A threshold (an mpmath value) rounded to the type."""
    mp.prec = 200
    return round_exact(v, ty)[0]


# --- the domains -------------------------------------------------------------------------------

TINY = {"f64": 5e-324, "f32": float(np.float32(1e-45))}
MINN = {"f64": 2.0 ** -1022, "f32": 2.0 ** -126}
MAX = {"f64": sys.float_info.max, "f32": float(np.finfo(np.float32).max)}


def seg(lo, hi, n, xs="±", **kw):
    d = {"x": [lo, hi], "xs": xs, "n": n}
    d.update(kw)
    return d


def segments(name, ty):
    t, mx = TINY[ty], MAX[ty]
    f64 = ty == "f64"
    eps = 2.0 ** (-28 if f64 else -14)
    lnmax = 709.78 if f64 else 88.72
    lnmin = 745.2 if f64 else 103.98
    if name in ("exp", "expm1"):
        return [seg(t, eps, 300), seg(eps, 1.0, 400), seg(1.0, lnmax, 300, "+"),
                seg(1.0, lnmin, 300, "-"), seg(1e-3, 88.0, 200, "-"),
                seg(lnmax - 1, lnmax + 0.05, 100, "+"), seg(lnmin - 40, lnmin + 1, 200, "-"),
                seg(lnmax + 1, mx, 50, "+"), seg(lnmin + 1, mx, 50, "-")]
    if name == "ln":
        return [seg(t, MINN[ty], 200, "+"), seg(MINN[ty], 1e-10, 200, "+"),
                seg(1e-10, 1.0, 300, "+"), seg(0.5, 2.0, 400, "+"),
                seg(1 - 2.0 ** -20, 1 + 2.0 ** -20, 200, "+"), seg(1.0, 1e10, 300, "+"),
                seg(1e10, mx, 200, "+"), seg(t, mx, 50, "-")]
    if name == "ln_1p":
        below1 = from_bits(bits(1.0, ty) - 1, ty)
        return [seg(t, eps, 300), seg(eps, 1.0, 300, "+"), seg(eps, below1, 300, "-"),
                seg(0.99, below1, 150, "-"), seg(1.0, 1e10, 300, "+"), seg(1e10, mx, 150, "+"),
                seg(1e-3, 10.0, 300, "+"),
                seg(from_bits(bits(1.0, ty) + 1, ty), mx, 50, "-")]
    if name == "tanh":
        big = 22.0 if f64 else 9.5
        return [seg(t, eps, 300), seg(eps, 1.0, 400), seg(1.0, big, 500), seg(big, mx, 150),
                seg(0.5, 1.0, 200), seg(1e-3, 5.0, 300)]
    if name == "erf":
        big = 6.0 if f64 else 4.0
        return [seg(t, eps, 300), seg(eps, 1.0, 400), seg(1.0, big, 500), seg(big, mx, 100),
                seg(0.5, 1.25, 300), seg(2.857, big, 300)]
    if name in ("sin", "cos"):
        return [seg(t, eps, 300), seg(eps, 1.0, 300), seg(1.0, 100.0, 500),
                seg(100.0, 1e6, 300), seg(1e6, 1e22, 200), seg(1e22, mx, 200)]
    if name == "sigmoid":
        return [seg(t, eps, 200), seg(eps, 1.0, 400), seg(1.0, 40.0 if f64 else 20.0, 500),
                seg(40.0 if f64 else 17.0, lnmin + 1, 300, "-"),
                seg(40.0 if f64 else 17.0, mx, 100, "+"), seg(lnmin + 1, mx, 100, "-"),
                seg(1e-3, 20.0, 400)]
    if name == "pow":
        return [
            seg(2.0 ** -20, 2.0 ** 20, 500, "+", y=[2.0 ** -10, 64.0], ys="±"),
            seg(0.5, 2.0, 400, "+", y=[1.0, 2000.0 if f64 else 300.0], ys="±"),
            seg(1 - 2.0 ** -20, 1 + 2.0 ** -20, 200, "+", y=[1e3, 1e12 if f64 else 1e9], ys="±"),
            seg(t, mx, 300, "+", y=[2.0 ** -20, 256.0], ys="±"),
            seg(0.1, 100.0, 300, "-", yint=[-60, 60] if f64 else [-20, 20]),
            seg(1e-3, 1e3, 200, "+", yint=[-30, 30] if f64 else [-12, 12]),
        ]
    raise KeyError(name)


def cases(name, ty):
    """Explicit inputs: thresholds and hard cases, as (x, y) pairs."""
    f64 = ty == "f64"
    t, mx, mn = TINY[ty], MAX[ty], MINN[ty]
    p = FMT[ty]["p"]
    emin, emax = FMT[ty]["emin"], FMT[ty]["emax"]
    one = [1.0, from_bits(bits(1.0, ty) + 1, ty), from_bits(bits(1.0, ty) - 1, ty)]
    common = [t, 2 * t, mn, from_bits(bits(mn, ty) - 1, ty), mx, 0.5, 2.0, 0.1, 3.0, 10.0] + one
    common = [to_ty(v, ty) for v in common]
    xs = []
    if name in ("exp", "expm1", "sigmoid"):
        mp.prec = 200
        for thr in (mp.log(mpmath.ldexp(1, emax + 1)), mp.log(mpmath.ldexp(1, emin)),
                    mp.log(mpmath.ldexp(1, emin - p + 1)), mp.log(mpmath.ldexp(1, emin - p))):
            v = mpround(thr, ty)
            xs += near(v, ty) + [-w for w in near(v, ty)]
        xs += common + [-v for v in common]
        xs += [to_ty(v, ty) for v in (88.0, -88.0, 36.7, -36.7, 16.7, -16.7, 1e-7, -1e-7)]
    elif name == "ln":
        xs += common + near(1.0, ty, 16) + near(math.e, ty) + near(0.5, ty) + near(2.0, ty)
        xs += [to_ty(2.0 ** k, ty) for k in range(emin - p + 1, emax + 1, 37)]
    elif name == "ln_1p":
        m1 = to_ty(-1.0, ty)
        xs += common + [-v for v in common if v < 1] + near(m1, ty, 0)
        xs += [from_bits(bits(m1, ty) - i, ty) for i in range(1, 16)]
        xs += [to_ty(v, ty) for v in (math.e - 1, -0.5, 1e-8, -1e-8, 2.0 ** -30, 0.4142)]
    elif name in ("tanh", "erf"):
        for v in ((0.55, 1.0986122886681098 / 2, 1.0986122886681098, 19.06, 20.0, 22.0, 9.0,
                   0.84375, 1.25, 2.857142857142857, 5.9, 6.0, 3.9, 4.0)):
            xs += near(v, ty, 3) + [-w for w in near(v, ty, 3)]
        xs += common + [-v for v in common]
    elif name in ("sin", "cos"):
        mp.prec = 200
        for k in range(1, 65):
            v = mpround(k * mp.pi / 2, ty)
            xs += [v, -v]
        for k in (10 ** 3, 10 ** 5, 10 ** 9, 10 ** 15):
            xs.append(mpround(k * mp.pi, ty))
        xs += [to_ty(v, ty) for v in (1e22, 1e15, 1e300 if f64 else 1e38, 2.0 ** 60)]
        if f64:
            xs += [6381956970095103.0 * 2.0 ** 797, 5.319372648326541e255, 1.0e22 * 3]
        else:
            xs += [to_ty(1.0e38 / 3, ty), from_bits(0x5922AA80, ty)]
        xs += common + [-v for v in common]
    if name == "pow":
        pairs = []
        ys = [1023.0, 1024.0, -1022.0, -1074.0, -1075.0, -1074.5, 0.5, -0.5] if f64 else \
            [127.0, 128.0, -126.0, -149.0, -150.0, -149.5, 0.5, -0.5]
        for y in ys:
            pairs += [(2.0, y), (-2.0, y), (to_ty(0.5, ty), -y)]
        pairs += [(10.0, 308.0 if f64 else 38.0), (10.0, 309.0 if f64 else 39.0),
                  (to_ty(1.0000001, ty), to_ty(1e7, ty)), (mx, to_ty(0.5, ty)), (t, to_ty(0.5, ty)),
                  (t, -1.0), (mn, -1.0), (mx, -1.0), (to_ty(math.e, ty), to_ty(math.pi, ty)),
                  (to_ty(0.1, ty), 3.0), (3.0, to_ty(0.1, ty)), (-3.0, 3.0), (-3.0, -3.0)]
        return [(to_ty(x, ty), to_ty(y, ty)) for x, y in pairs]
    if ty == "f32":
        # The largest errors of an exhaustive f32 scan (every input, against the f64 function).
        xs += [from_bits(b, ty) for b in WORST_F32.get(name, [])]
    return [(to_ty(x, ty), None) for x in xs]


WORST_F32 = {"tanh": [0x3e6ee50c], "sigmoid": [0xc18515ec], "exp": [0xc2171adb],
             "ln": [0x3fb3e619], "ln_1p": [0x3ecf9864], "expm1": [0x3eb9c703],
             "erf": [0x3f563109], "sin": [0x73a291c1], "cos": [0x46756516]}


def specials(name, ty):
    inf, nan = math.inf, math.nan
    base = [0.0, -0.0, inf, -inf, nan]
    if name == "pow":
        vals = [0.0, -0.0, 1.0, -1.0, inf, -inf, nan, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, -2.5]
        return [(to_ty(x, ty), to_ty(y, ty)) for x in vals for y in vals if special("pow", x, y)]
    xs = list(base)
    if name == "ln":
        xs += [-1.0, -TINY[ty], -MAX[ty], -0.5]
    if name == "ln_1p":
        xs += [-1.0, from_bits(bits(-1.0, ty) + 1, ty), -2.0, -MAX[ty]]
    return [(to_ty(x, ty), None) for x in xs]


NAMES = ["exp", "expm1", "ln", "ln_1p", "tanh", "erf", "sin", "cos", "pow", "sigmoid"]


def build(name, ty, seed):
    spec = {"seed": seed, "segments": segments(name, ty)}
    inputs = gen_inputs(spec, ty)
    blob = bytearray()
    n_special = 0
    for x, y in inputs:
        b, dq, sp = result(name, ty, x, y)
        n_special += sp
        blob += struct.pack("<Q" if ty == "f64" else "<I", b) + struct.pack("<b", dq)
    segs = []
    for s in spec["segments"]:
        o = {"x": [hexb(s["x"][0], ty), hexb(s["x"][1], ty)], "xs": s["xs"], "n": s["n"]}
        if "y" in s:
            o["y"], o["ys"] = [hexb(s["y"][0], ty), hexb(s["y"][1], ty)], s["ys"]
        if "yint" in s:
            o["yint"] = s["yint"]
        segs.append(o)
    out_cases, out_special = [], []
    seen = set()
    for x, y in cases(name, ty) + specials(name, ty):
        key = (bits(x, ty), None if y is None else bits(y, ty))
        if key in seen:
            continue
        seen.add(key)
        b, dq, sp = result(name, ty, x, y)
        row = [hexb(x, ty)] + ([] if y is None else [hexb(y, ty)])
        row.append(format(b, "0%dx" % FMT[ty]["hexw"]))
        if sp:
            out_special.append(row)
        else:
            out_cases.append(row + [dq])
    return {
        "type": ty,
        "args": 2 if name == "pow" else 1,
        "seed": seed,
        "segments": segs,
        "bulk": base64.b64encode(bytes(blob)).decode(),
        "cases": out_cases,
        "special": out_special,
    }, len(inputs), n_special


def main():
    funcs = {}
    for i, name in enumerate(NAMES):
        for ty in ("f64", "f32"):
            rust = name + ("f" if ty == "f32" else "")
            funcs[rust], n, ns = build(name, ty, 0x5EED0000 + 2 * i + (ty == "f32"))
            print("%-9s %5d random (%d special), %3d cases, %3d special" % (
                rust, n, ns, len(funcs[rust]["cases"]), len(funcs[rust]["special"])))
    doc = {
        "about": "Correctly rounded results of lockstep_tensor::math's functions; written by "
                 "tools/golden_math.py (see its docstring for the format).",
        "mpmath": mpmath.__version__,
        "numpy": np.__version__,
        "d_units_per_ulp": DQ,
        "functions": funcs,
    }
    with open(OUT, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print("wrote %s (%d bytes)" % (OUT, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
