#!/usr/bin/env python3
"""Golden values for lockstep's ports of glibc's `pow` and `exp` (compat::glibc_math): the bits
CPython's `math.pow` / `math.exp` return, which call the C library's `pow` / `exp` (glibc's
`__pow_fma` / `__exp_fma` on x86-64 with FMA). NumPy's samplers call the same functions from C.
(`numpy.power` / `numpy.exp` on float64 arrays use NumPy's own SIMD code on AVX-512 CPUs, not
glibc's, so they are not used for the values; their agreement is only printed, to stderr.)

Only finite arguments whose result CPython returns without raising (no domain error, no
overflow) are recorded; special values are covered by the platform comparison in the tests.

Run on Linux x86-64 with glibc >= 2.28 on a CPU with FMA (the bits lockstep reproduces):
    python3 tools/golden_glibc_pow_exp.py > crates/lockstep-rng/tests/golden/glibc_pow_exp.json
"""
import json
import math
import platform
import random
import struct
import sys

import numpy as np

assert platform.machine() == "x86_64" and platform.libc_ver()[0] == "glibc", platform.libc_ver()
assert "fma" in open("/proc/cpuinfo").read().split(), "needs a CPU with FMA"


def bits(v):
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def frombits(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


rng = random.Random(20261130)


def unit():
    return rng.getrandbits(53) / 2.0**53


def pow_group(y, xs):
    out = []
    for x in xs:
        try:
            out.append((x, math.pow(x, y)))
        except (ValueError, OverflowError):
            pass
    return {"y": f"{bits(y):016x}", "x": [f"{bits(x):016x}" for x, _ in out],
            "r": [f"{bits(r):016x}" for _, r in out]}


G = 19  # values per group: two eight-lane blocks and a scalar tail
groups = []
# The samplers' case: pow(u, 1/shape), u = 1 - U(0,1) and shape in (0.01, 1).
for _ in range(60):
    y = 1.0 / (0.01 + 0.99 * unit())
    groups.append(pow_group(y, [1.0 - unit() for _ in range(G)]))
for _ in range(20):
    y = 1.0 / 0.01 ** unit()
    groups.append(pow_group(y, [unit() for _ in range(G)]))
# x in (0, 1024]; y in the sampler range and in [-20, 20].
for _ in range(30):
    y = 1.0 / (0.01 + 0.99 * unit())
    groups.append(pow_group(y, [1024.0 * (1.0 - unit()) for _ in range(G)]))
for _ in range(20):
    y = 40.0 * unit() - 20.0
    groups.append(pow_group(y, [1024.0 * (1.0 - unit()) for _ in range(G)]))
# Any positive normal or subnormal x, moderate y.
for _ in range(20):
    y = (1.0 + unit()) * 2.0 ** rng.randint(-70, 8) * rng.choice([-1, 1])
    groups.append(pow_group(y, [frombits(rng.getrandbits(63)) for _ in range(G)]))
for _ in range(10):
    y = 4.0 * unit() - 2.0
    groups.append(pow_group(y, [frombits(rng.getrandbits(52)) for _ in range(G)]))
# Negative x with integer y (odd and even).
for _ in range(15):
    y = float(rng.randint(-60, 60))
    groups.append(pow_group(y, [-(0.25 + 8.0 * unit()) for _ in range(G)]))
# Results near the overflow and underflow limits (glibc's specialcase), subnormal results.
for t in [1023.2, 1023.9, -1021.5, -1030.0, -1060.0, -1074.5]:
    y = 7.5 + unit()
    xs = [2.0 ** (t * (1 + 1e-9 * (unit() - 0.5)) / y) for _ in range(G)]
    groups.append(pow_group(y, xs))
# Exact cases and edges.
groups.append(pow_group(2.0, [float(k) for k in range(-9, 10)]))
groups.append(pow_group(0.5, [0.25, 4.0, 2.0, 1.0, 9.0, 1e-300, 1e300, 5e-324, 2.2250738585072014e-308]))
groups.append(pow_group(-1.0, [-2.0, 2.0, 3.0, -0.5, 1e-310]))
groups.append(pow_group(2.0**-65, [0.5, 2.0, 1e300]))
groups.append(pow_group(2.0**62, [1.0 + 2.0**-52, 1.0 - 2.0**-53]))

exps = []
for lo, hi, n in [(-746.0, 710.0, 800), (-1.0, 1.0, 400), (704.0, 709.8, 200),
                  (-746.0, -700.0, 300), (-2.0**-50, 2.0**-50, 100)]:
    for _ in range(n):
        x = lo + (hi - lo) * unit()
        try:
            exps.append((x, math.exp(x)))
        except OverflowError:
            pass
for k in range(-1075, 1025, 7):
    x = k * math.log(2)
    for d in (-1, 0, 1):
        xv = frombits(bits(x) + d) if x > 0 else frombits(bits(x) - d)
        try:
            exps.append((xv, math.exp(xv)))
        except OverflowError:
            pass

# Informational: does numpy.power / numpy.exp give the same bits here?
px = np.array([frombits(int(x, 16)) for g in groups for x in g["x"]])
py = np.array([frombits(int(g["y"], 16)) for g in groups for _ in g["x"]])
pr = np.array([frombits(int(r, 16)) for g in groups for r in g["r"]])
ex = np.array([x for x, _ in exps])
er = np.array([r for _, r in exps])
print(f"numpy.power agrees on {(np.power(px, py) == pr).sum()}/{len(pr)}, "
      f"numpy.exp on {(np.exp(ex) == er).sum()}/{len(er)}", file=sys.stderr)

print(json.dumps({
    "source": "CPython math.pow / math.exp (the C library's pow / exp)",
    "python": platform.python_version(),
    "numpy": np.__version__,
    "libc": " ".join(platform.libc_ver()),
    "pow_groups": groups,
    "exp": [[f"{bits(x):016x}", f"{bits(r):016x}"] for x, r in exps],
}, indent=0))
