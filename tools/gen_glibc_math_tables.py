#!/usr/bin/env python3
"""Writes crates/lockstep-rng/src/compat/glibc_math/tables.rs from glibc's sources.

lockstep's ports of glibc's `log`, `sin`, `cos`, `pow` and `exp` (compat/glibc_math) must use
the exact doubles of glibc's tables: `__log_data` (sysdeps/ieee754/dbl-64/e_log_data.c),
`__pow_log_data` (e_pow_log_data.c), `__exp_data` (e_exp_data.c), all from Arm's
optimized-routines, and `__sincostab` (sysdeps/ieee754/dbl-64/sincostab.c, IBM Accurate
Mathematical Library). The low halves of `__sincostab` are not all the nearest doubles to
sin/cos(k/128) - hi (18 of 220 differ by one unit), so the table is taken as data, not recomputed.

usage: gen_glibc_math_tables.py GLIBC_SOURCE_DIR [LIBM]  (a checkout of glibc 2.28 or later;
the tables have not changed since 2.28), then `rustfmt --edition 2024` the written file.
Every table is also looked for, byte for byte, in the shipped libm (default
/lib/x86_64-linux-gnu/libm.so.6, where it exists): the script fails if one is missing there.
"""
import os
import re
import sys

root = sys.argv[1]
d = os.path.join(root, "sysdeps/ieee754/dbl-64")

def hexfloats(text):
    return [float.fromhex(t) for t in re.findall(r"-?0x[0-9a-fA-F.]+p[-+]?\d+", text)]

src = open(os.path.join(d, "e_log_data.c")).read()
def block(name):
    m = re.search(r"\." + name + r" = \{(.*?)\n\},", src, re.S)
    body = re.sub(r"//.*", "", m.group(1))
    body = re.sub(r"#if.*|#endif.*", "", body)
    return hexfloats(body)
ln2hi = hexfloats(re.search(r"\.ln2hi = ([^,]+),", src).group(1))[0]
ln2lo = hexfloats(re.search(r"\.ln2lo = ([^,]+),", src).group(1))[0]
poly1 = block("poly1")
poly = block("poly")
tab_text = src[src.index(".tab = {"):src.index("#ifndef __FP_FAST_FMA")]
tab_text = re.sub(r"/\*.*?\*/", "", tab_text, flags=re.S)
tab = hexfloats(tab_text)
assert len(poly1) == 11 and len(poly) == 5 and len(tab) == 256, (len(poly1), len(poly), len(tab))

s = open(os.path.join(d, "sincostab.c")).read()
le = s[s.index("LITTLE_ENDI"):]
words = [int(w, 16) for w in re.findall(r"0x([0-9A-Fa-f]{8})", le)]
assert len(words) == 880
sincos = [(words[2 * i + 1] << 32) | words[2 * i] for i in range(440)]

def bits(x):
    import struct
    return struct.unpack("<Q", struct.pack("<d", x))[0]

def cexpr(t):
    """A C constant expression of hex floats, `*` and integers (the poly scalings, `* N`)."""
    t = t.strip().replace("N", "128")
    v = 1.0
    for f in t.split("*"):
        f = f.strip()
        v *= float.fromhex(f) if ("0x" in f and "p" in f) else float(int(f))
    return v

# __pow_log_data (e_pow_log_data.c): ln2hi, ln2lo, poly[7] (scaled), tab[128] of
# {invc, pad, logc, logctail}.
ps = open(os.path.join(d, "e_pow_log_data.c")).read()
pow_ln2hi = hexfloats(re.search(r"\.ln2hi = ([^,]+),", ps).group(1))[0]
pow_ln2lo = hexfloats(re.search(r"\.ln2lo = ([^,]+),", ps).group(1))[0]
pbody = re.search(r"\.poly = \{(.*?)\n\},", ps, re.S).group(1)
pow_poly = [cexpr(l.rstrip(",")) for l in pbody.splitlines()
            if l.strip() and not l.strip().startswith(("//", "#"))]
ptab = re.findall(r"^A\(([^,]+), ([^,]+), ([^)]+)\)", ps, re.M)
pow_tab = [[float.fromhex(a) for a in row] for row in ptab]
assert len(pow_poly) == 7 and len(pow_tab) == 128, (len(pow_poly), len(pow_tab))

# __exp_data (e_exp_data.c): invln2N, negln2hiN, negln2loN, shift, poly[4], tab[256].
es = open(os.path.join(d, "e_exp_data.c")).read()
def field(name):
    return cexpr(re.search(r"\." + name + r" = ([^,\n]+),", es).group(1))
exp_invln2n, exp_shift = field("invln2N"), field("shift")
exp_negln2hin, exp_negln2lon = field("negln2hiN"), field("negln2loN")
ebody = re.search(r"\.poly = \{(.*?)\n\},", es, re.S).group(1)
exp_poly = hexfloats(re.sub(r"//.*", "", ebody))
etab = es[es.index(".tab = {"):]
exp_tab = [int(w, 16) for w in re.findall(r"0x([0-9a-fA-F]+)", re.sub(r"//.*", "", etab))]
assert len(exp_poly) == 4 and len(exp_tab) == 256, (len(exp_poly), len(exp_tab))
assert exp_invln2n == float.fromhex("0x1.71547652b82fep7") and exp_shift == 2.0**52 * 1.5

# Every table, as the bytes glibc stores, must be in the shipped libm.
libm = sys.argv[2] if len(sys.argv) > 2 else "/lib/x86_64-linux-gnu/libm.so.6"
if os.path.exists(libm):
    import struct
    lib = open(libm, "rb").read()
    def dbl(v):
        return b"".join(struct.pack("<d", x) for x in v)
    for name, blob in [
        ("__log_data.poly", dbl(poly)), ("__log_data.poly1", dbl(poly1)),
        ("__log_data.tab", dbl(tab)), ("__log_data.ln2hi/lo", dbl([ln2hi, ln2lo])),
        ("__sincostab", b"".join(struct.pack("<Q", v) for v in sincos)),
        ("__pow_log_data", dbl([pow_ln2hi, pow_ln2lo] + pow_poly
                               + [v for r in pow_tab for v in (r[0], 0.0, r[1], r[2])])),
        ("__exp_data.invln2N/negln2hiN/negln2loN/poly",
         dbl([exp_invln2n, exp_negln2hin, exp_negln2lon] + exp_poly)),
        ("__exp_data.shift", dbl([exp_shift])),
        ("__exp_data.tab", b"".join(struct.pack("<Q", v) for v in exp_tab)),
    ]:
        assert blob in lib, f"{name} not found in {libm}"
    print("all tables found byte for byte in", libm)
else:
    print("warning:", libm, "not found; tables not checked against a shipped libm")

out = []
w = out.append
w("// @generated by tools/gen_glibc_math_tables.py from glibc's e_log_data.c, sincostab.c,")
w("// e_pow_log_data.c and e_exp_data.c (unchanged since glibc 2.28; checked equal to the")
w("// data in Debian's glibc 2.36 libm.so.6). Do not edit by hand.")
w("")
w("/// `__log_data.ln2hi`, `ln2lo`.")
w(f"pub(super) const LN2HI: f64 = f64::from_bits(0x{bits(ln2hi):016x});")
w(f"pub(super) const LN2LO: f64 = f64::from_bits(0x{bits(ln2lo):016x});")
w("/// `__log_data.poly` (A[0..5]).")
w("pub(super) const LOG_A: [f64; 5] = [")
for v in poly:
    w(f"    f64::from_bits(0x{bits(v):016x}),")
w("];")
w("/// `__log_data.poly1` (B[0..11]).")
w("pub(super) const LOG_B: [f64; 11] = [")
for v in poly1:
    w(f"    f64::from_bits(0x{bits(v):016x}),")
w("];")
w("/// `__log_data.tab`: (invc, logc) bit patterns for each of the 128 subintervals.")
w("pub(super) const LOG_TAB: [[u64; 2]; 128] = [")
for i in range(128):
    w(f"    [0x{bits(tab[2 * i]):016x}, 0x{bits(tab[2 * i + 1]):016x}],")
w("];")
w("/// `__sincostab`: for k in 0..110, sin(k/128) as hi, lo, then cos(k/128) as hi, lo (bit patterns).")
w("pub(super) const SINCOSTAB: [u64; 440] = [")
for i in range(0, 440, 4):
    w("    " + " ".join(f"0x{v:016x}," for v in sincos[i:i + 4]))
w("];")
w("/// `__pow_log_data.ln2hi`, `ln2lo`.")
w(f"pub(super) const POW_LN2HI: f64 = f64::from_bits(0x{bits(pow_ln2hi):016x});")
w(f"pub(super) const POW_LN2LO: f64 = f64::from_bits(0x{bits(pow_ln2lo):016x});")
w("/// `__pow_log_data.poly` (A[0..7], scaled as glibc stores them).")
w("pub(super) const POW_A: [f64; 7] = [")
for v in pow_poly:
    w(f"    f64::from_bits(0x{bits(v):016x}),")
w("];")
w("/// `__pow_log_data.tab`: (invc, logc, logctail) bit patterns (glibc's unused pad dropped).")
w("pub(super) const POW_LOG_TAB: [[u64; 3]; 128] = [")
for r in pow_tab:
    w("    [" + ", ".join(f"0x{bits(v):016x}" for v in r) + "],")
w("];")
w("/// `__exp_data.invln2N` (128/ln 2), `shift` (0x1.8p52), `negln2hiN`, `negln2loN` (-ln 2/128).")
w(f"pub(super) const EXP_INVLN2N: f64 = f64::from_bits(0x{bits(exp_invln2n):016x});")
w(f"pub(super) const EXP_SHIFT: f64 = f64::from_bits(0x{bits(exp_shift):016x});")
w(f"pub(super) const EXP_NEGLN2HIN: f64 = f64::from_bits(0x{bits(exp_negln2hin):016x});")
w(f"pub(super) const EXP_NEGLN2LON: f64 = f64::from_bits(0x{bits(exp_negln2lon):016x});")
w("/// `__exp_data.poly` (C2..C5).")
w("pub(super) const EXP_C: [f64; 4] = [")
for v in exp_poly:
    w(f"    f64::from_bits(0x{bits(v):016x}),")
w("];")
w("/// `__exp_data.tab`: for k in 0..128, the bits of T[k] (tail) then of H[k] - (k << 52)/128.")
w("pub(super) const EXP_TAB: [u64; 256] = [")
for i in range(0, 256, 4):
    w("    " + " ".join(f"0x{v:016x}," for v in exp_tab[i:i + 4]))
w("];")
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates/lockstep-rng/src/compat/glibc_math/tables.rs")
open(path, "w").write("\n".join(out) + "\n")
print("wrote", os.path.normpath(path))
