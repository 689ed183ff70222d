//! glibc's `pow` and `exp` (Arm optimized-routines; `e_pow.c`, `e_exp.c`) as the `__pow_fma`
//! and `__exp_fma` builds compute them. The common path of each is `#[inline(always)]`; every
//! special case (zero, subnormal, negative or non-finite arguments, results near or beyond the
//! overflow and underflow limits) is out of line.

use super::tables::*;

const N: u64 = 128;
/// `SIGN_BIAS`: added to `ki`, sets the sign bit of the scale.
const SIGN_BIAS: u64 = 0x800 << 7;

/// `log_inline`: `(hi, lo)` with `hi + lo ≈ log(x)` to about 68 bits, for `ix` the bits of a
/// positive normal `x` (or a normalised subnormal).
#[inline(always)]
fn log_inline(ix: u64) -> (f64, f64) {
    const OFF: u64 = 0x3fe6_9555_0000_0000;
    let tmp = ix.wrapping_sub(OFF);
    let i = ((tmp >> 45) % N) as usize;
    let k = (tmp as i64) >> 52;
    let iz = ix.wrapping_sub(tmp & (0xfffu64 << 52));
    let z = f64::from_bits(iz);
    let kd = k as i32 as f64;
    let [invc, logc, logctail] = POW_LOG_TAB[i].map(f64::from_bits);
    let a = POW_A;
    let r = z.mul_add(invc, -1.0);
    let t1 = kd.mul_add(POW_LN2HI, logc);
    let t2 = t1 + r;
    let lo1 = kd.mul_add(POW_LN2LO, logctail);
    let lo2 = t1 - t2 + r;
    let ar = a[0] * r;
    let ar2 = r * ar;
    let ar3 = r * ar2;
    let hi = t2 + ar2;
    let lo3 = ar.mul_add(r, -ar2);
    let lo4 = t2 - hi + ar2;
    let q = r.mul_add(a[6], a[5]).mul_add(ar2, r.mul_add(a[4], a[3]));
    let q = ar2.mul_add(q, r.mul_add(a[2], a[1]));
    let lo = ar3.mul_add(q, lo1 + lo2 + lo3 + lo4);
    let y = hi + lo;
    let tail = hi - y + lo;
    (y, tail)
}

/// The shared part of `exp_inline` and `exp`: `exp(x + xtail) ≈ scale·(1 + tmp)`, returns
/// `(tmp, sbits, ki)` with `sbits` the bits of `scale` (exponent possibly out of range). `exp`
/// has no `xtail` (`TAIL = false`: not even `+ 0.0`, which would turn `r = -0` into `+0`).
#[inline(always)]
fn exp_core<const TAIL: bool>(x: f64, xtail: f64, sign_bias: u64) -> (f64, u64, u64) {
    let kd = x.mul_add(EXP_INVLN2N, EXP_SHIFT);
    let ki = kd.to_bits();
    let kd = kd - EXP_SHIFT;
    let r = kd.mul_add(EXP_NEGLN2LON, kd.mul_add(EXP_NEGLN2HIN, x));
    let r = if TAIL { r + xtail } else { r };
    let idx = 2 * (ki % N) as usize;
    let top = ki.wrapping_add(sign_bias) << 45;
    let tail = f64::from_bits(EXP_TAB[idx]);
    let sbits = EXP_TAB[idx + 1].wrapping_add(top);
    let c = EXP_C;
    let r2 = r * r;
    let tmp = (r2 * r2).mul_add(
        r.mul_add(c[3], c[2]),
        r.mul_add(c[1], c[0]).mul_add(r2, tail + r),
    );
    (tmp, sbits, ki)
}

/// `exp_inline(x, xtail, sign_bias)` of `e_pow.c`.
#[inline(always)]
fn exp_inline(x: f64, xtail: f64, sign_bias: u64) -> f64 {
    let abstop = ((x.to_bits() >> 52) & 0x7ff) as u32;
    // top12(0x1p-54) = 0x3c9, top12(512) = 0x408.
    if abstop.wrapping_sub(0x3c9) >= 0x408 - 0x3c9 {
        return exp_inline_special(x, xtail, sign_bias);
    }
    let (tmp, sbits, _) = exp_core::<true>(x, xtail, sign_bias);
    let scale = f64::from_bits(sbits);
    scale.mul_add(tmp, scale)
}

#[cold]
#[inline(never)]
fn exp_inline_special(x: f64, xtail: f64, sign_bias: u64) -> f64 {
    let abstop = ((x.to_bits() >> 52) & 0x7ff) as u32;
    if abstop < 0x3c9 {
        let one = 1.0 + x;
        return if sign_bias != 0 { -one } else { one };
    }
    if abstop >= 0x409 {
        return if x.to_bits() >> 63 != 0 {
            uflow(sign_bias != 0)
        } else {
            oflow(sign_bias != 0)
        };
    }
    let (tmp, sbits, ki) = exp_core::<true>(x, xtail, sign_bias);
    pow_specialcase(tmp, sbits, ki)
}

/// `__math_oflow(sign)`: ±inf.
#[inline(always)]
fn oflow(neg: bool) -> f64 {
    if neg {
        f64::NEG_INFINITY
    } else {
        f64::INFINITY
    }
}

/// `__math_uflow(sign)`: ±0.
#[inline(always)]
fn uflow(neg: bool) -> f64 {
    if neg { -0.0 } else { 0.0 }
}

/// `specialcase` of `e_pow.c`: `scale·(1 + tmp)` where it may overflow or be subnormal.
#[cold]
#[inline(never)]
fn pow_specialcase(tmp: f64, sbits: u64, ki: u64) -> f64 {
    const P1009: f64 = f64::from_bits(0x7f00_0000_0000_0000); // 0x1p1009
    const PM1022: f64 = f64::from_bits(0x0010_0000_0000_0000); // 0x1p-1022
    if ki & 0x8000_0000 == 0 {
        let scale = f64::from_bits(sbits.wrapping_sub(1009u64 << 52));
        return P1009 * scale.mul_add(tmp, scale);
    }
    let sbits = sbits.wrapping_add(1022u64 << 52);
    let scale = f64::from_bits(sbits);
    // Not contracted in glibc's build: `scale * tmp` is used twice.
    let st = scale * tmp;
    let mut y = scale + st;
    if y.abs() < 1.0 {
        let one = if y < 0.0 { -1.0 } else { 1.0 };
        let lo = scale - y + st;
        let hi = one + y;
        let lo = one - hi + y + lo;
        y = (hi + lo) - one;
        if y == 0.0 {
            y = f64::from_bits(sbits & 0x8000_0000_0000_0000);
        }
    }
    PM1022 * y
}

/// `specialcase` of `e_exp.c` (no sign; `y < 1` rather than `|y| < 1`).
#[cold]
#[inline(never)]
fn exp_specialcase(tmp: f64, sbits: u64, ki: u64) -> f64 {
    const P1009: f64 = f64::from_bits(0x7f00_0000_0000_0000);
    const PM1022: f64 = f64::from_bits(0x0010_0000_0000_0000);
    if ki & 0x8000_0000 == 0 {
        let scale = f64::from_bits(sbits.wrapping_sub(1009u64 << 52));
        return P1009 * scale.mul_add(tmp, scale);
    }
    let scale = f64::from_bits(sbits.wrapping_add(1022u64 << 52));
    let st = scale * tmp;
    let mut y = scale + st;
    if y < 1.0 {
        let lo = scale - y + st;
        let hi = 1.0 + y;
        let lo = 1.0 - hi + y + lo;
        y = (hi + lo) - 1.0;
        if y == 0.0 {
            y = 0.0;
        }
    }
    PM1022 * y
}

/// `checkint(iy)`: 0 if not an integer, 1 if odd, 2 if even (`iy` non-zero finite).
#[inline(always)]
fn checkint(iy: u64) -> u32 {
    let e = ((iy >> 52) & 0x7ff) as u32;
    if e < 0x3ff {
        return 0;
    }
    if e > 0x3ff + 52 {
        return 2;
    }
    if iy & ((1u64 << (0x3ff + 52 - e)) - 1) != 0 {
        return 0;
    }
    if iy & (1u64 << (0x3ff + 52 - e)) != 0 {
        return 1;
    }
    2
}

/// Whether `i` is the bits of ±0, ±inf or NaN.
#[inline(always)]
fn zeroinfnan(i: u64) -> bool {
    (i << 1).wrapping_sub(1) >= 2 * f64::INFINITY.to_bits() - 1
}

/// Whether `x` and `y` need [`pow_special`]: `x` not a positive normal, or
/// `|y| ∉ [2^-65, 2^63)` or NaN.
#[inline(always)]
pub(super) fn pow_is_special(x: f64, y: f64) -> bool {
    let topx = (x.to_bits() >> 52) as u32;
    let topy = (y.to_bits() >> 52) as u32;
    topx.wrapping_sub(1) >= 0x7ff - 1 || (topy & 0x7ff).wrapping_sub(0x3be) >= 0x43e - 0x3be
}

/// glibc's `pow(x, y)` (its FMA build; glibc's error bound 0.54 ulp): glibc's bits, NaN
/// payloads aside (checked on over 10^9 inputs, see the module documentation). Special
/// cases are out of line; the common path (`x` a positive normal double, `y·log x` in
/// `[2^-54, 512)` in magnitude) inlines.
#[inline(always)]
pub fn pow(x: f64, y: f64) -> f64 {
    #[cfg(all(target_arch = "x86_64", not(target_feature = "fma")))]
    if hardware_fma() {
        // SAFETY: the CPU has FMA (checked by `hardware_fma`).
        return unsafe { pow_fma(x, y) };
    }
    pow_generic(x, y)
}

/// Whether `mul_add` may be the FMA instruction: without it (a build for baseline x86-64)
/// every `mul_add` is a call into the C library's `fma`, several times slower. Follows
/// [`crate::isa`], so that forcing `portable` tests the other path (same bits).
#[cfg(all(target_arch = "x86_64", not(target_feature = "fma")))]
#[inline(always)]
pub(super) fn hardware_fma() -> bool {
    crate::isa::Isa::Avx2.enabled() && std::arch::is_x86_feature_detected!("fma")
}

/// [`pow`] compiled with the FMA instruction.
#[cfg(all(target_arch = "x86_64", not(target_feature = "fma")))]
#[target_feature(enable = "fma")]
fn pow_fma(x: f64, y: f64) -> f64 {
    pow_generic(x, y)
}

/// [`exp`] compiled with the FMA instruction.
#[cfg(all(target_arch = "x86_64", not(target_feature = "fma")))]
#[target_feature(enable = "fma")]
fn exp_fma(x: f64) -> f64 {
    exp_generic(x)
}

#[inline(always)]
pub(crate) fn pow_generic(x: f64, y: f64) -> f64 {
    if pow_is_special(x, y) {
        return pow_special(x, y);
    }
    pow_main(x.to_bits(), y, 0)
}

/// The common path: `ix` a positive normal (or normalised subnormal), `y` in range.
#[inline(always)]
fn pow_main(ix: u64, y: f64, sign_bias: u64) -> f64 {
    let (hi, lo) = log_inline(ix);
    let ehi = y * hi;
    let elo = y.mul_add(lo, y.mul_add(hi, -ehi));
    exp_inline(ehi, elo, sign_bias)
}

/// The special cases of `__pow`, in glibc's order.
// `x + y` of NaNs and `(x - x) / (x - x)` are glibc's NaN results.
#[allow(clippy::eq_op)]
#[cold]
#[inline(never)]
fn pow_special(x: f64, y: f64) -> f64 {
    let mut ix = x.to_bits();
    let iy = y.to_bits();
    let mut topx = (ix >> 52) as u32;
    let topy = (iy >> 52) as u32;
    let mut sign_bias = 0;
    if zeroinfnan(iy) {
        if iy << 1 == 0 {
            return if is_signaling(x) { x + y } else { 1.0 };
        }
        if ix == 1f64.to_bits() {
            return if is_signaling(y) { x + y } else { 1.0 };
        }
        let inf2 = 2 * f64::INFINITY.to_bits();
        if ix << 1 > inf2 || iy << 1 > inf2 {
            return x + y;
        }
        if ix << 1 == 1f64.to_bits() << 1 {
            return 1.0;
        }
        if (ix << 1 < 1f64.to_bits() << 1) == (iy >> 63 == 0) {
            return 0.0;
        }
        return y * y;
    }
    if zeroinfnan(ix) {
        let mut x2 = x * x;
        if ix >> 63 != 0 && checkint(iy) == 1 {
            x2 = -x2;
        }
        return if iy >> 63 != 0 { 1.0 / x2 } else { x2 };
    }
    // x and y are non-zero finite.
    if ix >> 63 != 0 {
        match checkint(iy) {
            0 => return (x - x) / (x - x),
            1 => sign_bias = SIGN_BIAS,
            _ => {}
        }
        ix &= 0x7fff_ffff_ffff_ffff;
        topx &= 0x7ff;
    }
    if (topy & 0x7ff).wrapping_sub(0x3be) >= 0x43e - 0x3be {
        // sign_bias == 0 here: y is not odd.
        if ix == 1f64.to_bits() {
            return 1.0;
        }
        if (topy & 0x7ff) < 0x3be {
            return if ix > 1f64.to_bits() {
                1.0 + y
            } else {
                1.0 - y
            };
        }
        return if (ix > 1f64.to_bits()) == (topy < 0x800) {
            f64::INFINITY
        } else {
            0.0
        };
    }
    if topx == 0 {
        // Subnormal x: normalise so that the exponent becomes negative.
        ix = (x * f64::from_bits(0x4330_0000_0000_0000)).to_bits(); // x * 0x1p52
        ix &= 0x7fff_ffff_ffff_ffff;
        ix = ix.wrapping_sub(52u64 << 52);
    }
    pow_main(ix, y, sign_bias)
}

/// `issignaling_inline`.
#[inline(always)]
fn is_signaling(x: f64) -> bool {
    (x.to_bits() ^ 0x0008_0000_0000_0000) << 1 > 0x7ff8_0000_0000_0000 << 1
}

/// Whether `x` needs [`exp_special`]: `|x| ∉ [2^-54, 512)` or NaN.
#[inline(always)]
pub(super) fn exp_is_special(x: f64) -> bool {
    let abstop = ((x.to_bits() >> 52) & 0x7ff) as u32;
    abstop.wrapping_sub(0x3c9) >= 0x408 - 0x3c9
}

/// glibc's `exp(x)` (its FMA build; glibc's error bound 0.509 ulp): glibc's bits, NaN payloads
/// aside (checked on over 10^9 inputs). `|x| ∉ [2^-54, 512)` is out of line.
#[inline(always)]
pub fn exp(x: f64) -> f64 {
    #[cfg(all(target_arch = "x86_64", not(target_feature = "fma")))]
    if hardware_fma() {
        // SAFETY: the CPU has FMA (checked by `hardware_fma`).
        return unsafe { exp_fma(x) };
    }
    exp_generic(x)
}

#[inline(always)]
pub(crate) fn exp_generic(x: f64) -> f64 {
    if exp_is_special(x) {
        return exp_special(x);
    }
    let (tmp, sbits, _) = exp_core::<false>(x, 0.0, 0);
    let scale = f64::from_bits(sbits);
    scale.mul_add(tmp, scale)
}

#[cold]
#[inline(never)]
fn exp_special(x: f64) -> f64 {
    let abstop = ((x.to_bits() >> 52) & 0x7ff) as u32;
    if abstop < 0x3c9 {
        return 1.0 + x;
    }
    if abstop >= 0x409 {
        if x == f64::NEG_INFINITY {
            return 0.0;
        }
        if abstop >= 0x7ff {
            return 1.0 + x;
        }
        return if x.to_bits() >> 63 != 0 {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let (tmp, sbits, ki) = exp_core::<false>(x, 0.0, 0);
    exp_specialcase(tmp, sbits, ki)
}
