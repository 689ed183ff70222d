//! AVX2 forms of the `log`, `sin` and `cos` ports, four lanes of f64 at a time: the same
//! lane-wise translation of the scalar code as the AVX-512 forms in [`super::x86`] (a
//! `_mm256_fmadd_pd` where the scalar code has `mul_add`, plain IEEE operations elsewhere,
//! every branch taken by all lanes and chosen per lane by blends), so every lane has the scalar
//! function's bits. AVX2 has no mask registers, no unsigned or arithmetic 64-bit comparisons
//! and shifts, and no 64-bit integer to double conversion; what stands in for them is exact
//! (see each use). Lanes outside the vectorised ranges (zero, negative, subnormal or non-finite
//! `log` arguments; `sin`/`cos` arguments that are not finite or of magnitude ≥ 105414350) are
//! recomputed by the scalar functions.

use super::tables::{LOG_A, LOG_B, LOG_TAB, SINCOSTAB};
use super::*;
use core::arch::x86_64::*;

// SAFETY (for every intrinsic in this module): the callers are `#[target_feature(enable =
// "avx2,fma")]` functions, inside which these inline and the intrinsics are safe to call.

#[inline(always)]
fn splat(x: f64) -> __m256d {
    // SAFETY: see the module's note.
    unsafe { _mm256_set1_pd(x) }
}

#[inline(always)]
fn splat_i(x: i64) -> __m256i {
    // SAFETY: see the module's note.
    unsafe { _mm256_set1_epi64x(x) }
}

/// All-ones in the lanes where `a < b` as unsigned 64-bit integers (AVX2 compares signed:
/// flipping both sign bits maps the unsigned order onto the signed one).
#[inline(always)]
fn lt_u64(a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: see the module's note.
    unsafe {
        let s = splat_i(i64::MIN);
        _mm256_cmpgt_epi64(_mm256_xor_si256(b, s), _mm256_xor_si256(a, s))
    }
}

/// Lane `j` of the mask `m` (all-ones or zero per lane) as bit `j`.
#[inline(always)]
fn bits(m: __m256d) -> i32 {
    // SAFETY: see the module's note.
    unsafe { _mm256_movemask_pd(m) }
}

/// Applies `f` to the lanes of `v` whose bit is set in `m`, leaving the others as they are in
/// `r`.
#[inline(always)]
fn fix_lanes(r: __m256d, v: __m256d, m: i32, f: impl Fn(f64) -> f64) -> __m256d {
    let mut rs = [0f64; 4];
    let mut vs = [0f64; 4];
    // SAFETY: 4 doubles each, unaligned loads and stores.
    unsafe {
        _mm256_storeu_pd(rs.as_mut_ptr(), r);
        _mm256_storeu_pd(vs.as_mut_ptr(), v);
    }
    for j in 0..4 {
        if m & (1 << j) != 0 {
            rs[j] = f(vs[j]);
        }
    }
    // SAFETY: as above.
    unsafe { _mm256_loadu_pd(rs.as_ptr()) }
}

/// `log` of four lanes (see [`super::log`]).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) fn log4(x: __m256d) -> __m256d {
    let ix = _mm256_castpd_si256(x);
    let top = _mm256_srli_epi64::<48>(ix);
    // top - 0x10 >= 0x7ff0 - 0x10 (unsigned): zero, subnormal, negative, inf or NaN.
    let special = _mm256_castsi256_pd(_mm256_xor_si256(
        lt_u64(_mm256_sub_epi64(top, splat_i(0x10)), splat_i(0x7ff0 - 0x10)),
        splat_i(-1),
    ));
    const LO: i64 = 0x3fee_0000_0000_0000;
    const HI: i64 = 0x3ff1_0900_0000_0000;
    let near = _mm256_castsi256_pd(lt_u64(_mm256_sub_epi64(ix, splat_i(LO)), splat_i(HI - LO)));
    // Main path; special lanes get x = 1.0 so their table index stays in range.
    let ix = _mm256_castpd_si256(_mm256_blendv_pd(
        _mm256_castsi256_pd(ix),
        splat(1.0),
        special,
    ));
    let tmp = _mm256_sub_epi64(ix, splat_i(0x3fe6_0000_0000_0000));
    let i2 = _mm256_slli_epi64::<1>(_mm256_and_si256(_mm256_srli_epi64::<45>(tmp), splat_i(127)));
    // k = tmp >> 52 (arithmetic) as a double: the top 12 bits with their sign bit flipped are
    // k + 2048 in 0..4096, and 2^52 + (k + 2048) - (2^52 + 2048) = k exactly.
    let kb = _mm256_xor_si256(_mm256_srli_epi64::<52>(tmp), splat_i(0x800));
    let kd = _mm256_sub_pd(
        _mm256_castsi256_pd(_mm256_or_si256(kb, splat_i(0x4330_0000_0000_0000))),
        splat(f64::from_bits(0x4330_0000_0000_0800)), // 2^52 + 2048
    );
    let iz = _mm256_sub_epi64(ix, _mm256_and_si256(tmp, splat_i((0xfffu64 << 52) as i64)));
    let base = LOG_TAB.as_ptr() as *const f64;
    // SAFETY: i2 is in 0..=254 (an even index into a 256-double table), +1 stays in bounds.
    let (invc, logc) = unsafe {
        (
            _mm256_i64gather_pd::<8>(base, i2),
            _mm256_i64gather_pd::<8>(base, _mm256_add_epi64(i2, splat_i(1))),
        )
    };
    let z = _mm256_castsi256_pd(iz);
    let r = _mm256_fmadd_pd(z, invc, splat(-1.0));
    let w = _mm256_fmadd_pd(kd, splat(LN2HI), logc);
    let hi = _mm256_add_pd(w, r);
    let lo = _mm256_fmadd_pd(kd, splat(LN2LO), _mm256_add_pd(_mm256_sub_pd(w, hi), r));
    let r2 = _mm256_mul_pd(r, r);
    let a = LOG_A;
    let p = _mm256_fmadd_pd(
        _mm256_fmadd_pd(r, splat(a[4]), splat(a[3])),
        r2,
        _mm256_fmadd_pd(r, splat(a[2]), splat(a[1])),
    );
    let y = _mm256_fmadd_pd(
        _mm256_mul_pd(r, r2),
        p,
        _mm256_fmadd_pd(r2, splat(a[0]), lo),
    );
    let mut res = _mm256_add_pd(y, hi);
    if bits(near) != 0 {
        res = _mm256_blendv_pd(res, log_near_one4(x), near);
    }
    let sp = bits(special);
    if sp != 0 {
        res = fix_lanes(res, x, sp, super::log);
    }
    res
}

#[inline]
#[target_feature(enable = "avx2,fma")]
fn log_near_one4(x: __m256d) -> __m256d {
    let b = LOG_B;
    let r = _mm256_sub_pd(x, splat(1.0));
    let r2 = _mm256_mul_pd(r, r);
    let r3 = _mm256_mul_pd(r, r2);
    let p1 = _mm256_fmadd_pd(
        r2,
        splat(b[3]),
        _mm256_fmadd_pd(r, splat(b[2]), splat(b[1])),
    );
    let p2 = _mm256_fmadd_pd(
        r2,
        splat(b[6]),
        _mm256_fmadd_pd(r, splat(b[5]), splat(b[4])),
    );
    let p3 = _mm256_fmadd_pd(
        r3,
        splat(b[10]),
        _mm256_fmadd_pd(
            r2,
            splat(b[9]),
            _mm256_fmadd_pd(r, splat(b[8]), splat(b[7])),
        ),
    );
    let p = _mm256_fmadd_pd(_mm256_fmadd_pd(p3, r3, p2), r3, p1);
    let two27 = splat(134_217_728.0);
    let t = _mm256_fmadd_pd(r, two27, r);
    let rhi = _mm256_fnmadd_pd(two27, r, t);
    let rlo = _mm256_sub_pd(r, rhi);
    let rhi2 = _mm256_mul_pd(rhi, rhi);
    let hi = _mm256_fmadd_pd(rhi2, splat(b[0]), r);
    let lo = _mm256_fmadd_pd(rhi2, splat(b[0]), _mm256_sub_pd(r, hi));
    let lo = _mm256_fmadd_pd(_mm256_mul_pd(splat(b[0]), rlo), _mm256_add_pd(r, rhi), lo);
    let y = _mm256_fmadd_pd(p, r3, lo);
    // x == 1 gives +0 here as in the scalar code (r = 0: every term is +0).
    _mm256_add_pd(hi, y)
}

#[inline(always)]
fn sign() -> __m256d {
    splat(-0.0)
}

#[inline(always)]
fn abs4(x: __m256d) -> __m256d {
    // SAFETY: see the module's note.
    unsafe { _mm256_andnot_pd(sign(), x) }
}

/// `copysign(mag, sgn)`: the sign bit of `sgn`, the other bits of `mag`.
#[inline(always)]
fn copysign4(mag: __m256d, sgn: __m256d) -> __m256d {
    // SAFETY: see the module's note.
    unsafe { _mm256_or_pd(_mm256_andnot_pd(sign(), mag), _mm256_and_pd(sign(), sgn)) }
}

/// `-x` in the lanes set in the mask `m`, `x` elsewhere.
#[inline(always)]
fn neg4(x: __m256d, m: __m256d) -> __m256d {
    // SAFETY: see the module's note.
    unsafe { _mm256_xor_pd(x, _mm256_and_pd(m, sign())) }
}

/// The four table entries at `4·k` for `u = BIG + |x|`, as (sn, ssn, cs, ccs): each lane's
/// four consecutive doubles loaded as one vector, then the 4×4 block transposed (cheaper than
/// four gathers).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn table4(u: __m256d) -> (__m256d, __m256d, __m256d, __m256d) {
    let mut k = [0u64; 4];
    // SAFETY: 4 u64s, an unaligned store.
    unsafe { _mm256_storeu_si256(k.as_mut_ptr().cast(), _mm256_castpd_si256(u)) };
    let base = SINCOSTAB.as_ptr() as *const f64;
    // SAFETY: callers pass |x| < 0.86, so the low word of `u` is below 110 and every row
    // 4·k .. 4·k + 4 lies inside the table (440 doubles).
    let row = |j: usize| unsafe { _mm256_loadu_pd(base.add(4 * (k[j] as u32 as usize))) };
    let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
    let t0 = _mm256_unpacklo_pd(r0, r1);
    let t1 = _mm256_unpackhi_pd(r0, r1);
    let t2 = _mm256_unpacklo_pd(r2, r3);
    let t3 = _mm256_unpackhi_pd(r2, r3);
    (
        _mm256_permute2f128_pd::<0x20>(t0, t2),
        _mm256_permute2f128_pd::<0x20>(t1, t3),
        _mm256_permute2f128_pd::<0x31>(t0, t2),
        _mm256_permute2f128_pd::<0x31>(t1, t3),
    )
}

/// `do_sin(x, dx)` lane-wise, Taylor branch included; requires `|x| < 0.86` in every lane.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn do_sin4(x: __m256d, dx: __m256d) -> __m256d {
    let ax = abs4(x);
    // TAYLOR_SIN.
    let xx = _mm256_mul_pd(x, x);
    let mut p = _mm256_fmadd_pd(splat(S5), xx, splat(S4));
    p = _mm256_fmadd_pd(p, xx, splat(S3));
    p = _mm256_fmadd_pd(p, xx, splat(S2));
    p = _mm256_fmadd_pd(p, xx, splat(S1));
    let t = _mm256_fmadd_pd(xx, _mm256_fmsub_pd(p, x, _mm256_mul_pd(splat(0.5), dx)), dx);
    let taylor = _mm256_add_pd(x, t);
    // Table branch.
    let le0 = _mm256_cmp_pd::<_CMP_LE_OQ>(x, _mm256_setzero_pd());
    let dx = neg4(dx, le0);
    let u = _mm256_add_pd(splat(BIG), ax);
    let xr = _mm256_sub_pd(ax, _mm256_sub_pd(u, splat(BIG)));
    let (sn, ssn, cs, ccs) = table4(u);
    let xx = _mm256_mul_pd(xr, xr);
    let s = _mm256_add_pd(
        xr,
        _mm256_fmadd_pd(
            _mm256_mul_pd(xr, xx),
            _mm256_fmadd_pd(xx, splat(SN5), splat(SN3)),
            dx,
        ),
    );
    let c = _mm256_fmadd_pd(
        xr,
        dx,
        _mm256_mul_pd(
            xx,
            _mm256_fmadd_pd(xx, _mm256_fmadd_pd(xx, splat(CS6), splat(CS4)), splat(CS2)),
        ),
    );
    let cor = _mm256_fmadd_pd(s, cs, _mm256_fnmadd_pd(c, sn, _mm256_fmadd_pd(s, ccs, ssn)));
    let table = copysign4(_mm256_add_pd(sn, cor), x);
    let small = _mm256_cmp_pd::<_CMP_LT_OQ>(ax, splat(0.126));
    _mm256_blendv_pd(table, taylor, small)
}

/// `do_cos(x, dx)` lane-wise; requires `|x| < 0.86` in every lane.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn do_cos4(x: __m256d, dx: __m256d) -> __m256d {
    let lt0 = _mm256_cmp_pd::<_CMP_LT_OQ>(x, _mm256_setzero_pd());
    let dx = neg4(dx, lt0);
    let ax = abs4(x);
    let u = _mm256_add_pd(splat(BIG), ax);
    let xr = _mm256_add_pd(_mm256_sub_pd(ax, _mm256_sub_pd(u, splat(BIG))), dx);
    let (sn, ssn, cs, ccs) = table4(u);
    let xx = _mm256_mul_pd(xr, xr);
    let s = _mm256_fmadd_pd(
        _mm256_mul_pd(xr, xx),
        _mm256_fmadd_pd(xx, splat(SN5), splat(SN3)),
        xr,
    );
    let c = _mm256_mul_pd(
        xx,
        _mm256_fmadd_pd(xx, _mm256_fmadd_pd(xx, splat(CS6), splat(CS4)), splat(CS2)),
    );
    let cor = _mm256_fnmadd_pd(
        s,
        sn,
        _mm256_fnmadd_pd(c, cs, _mm256_fnmadd_pd(s, ssn, ccs)),
    );
    _mm256_add_pd(cs, cor)
}

/// All-ones in the lanes of the 64-bit integers `n` that have `bit` set.
#[inline(always)]
fn has_bit(n: __m256i, bit: i64) -> __m256d {
    // SAFETY: see the module's note.
    unsafe {
        _mm256_castsi256_pd(_mm256_cmpeq_epi64(
            _mm256_and_si256(n, splat_i(bit)),
            splat_i(bit),
        ))
    }
}

/// `(sin x, cos x)` of four lanes, each with the bits of [`super::sin`] and [`super::cos`].
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) fn sincos4(x: __m256d) -> (__m256d, __m256d) {
    let ax = abs4(x);
    let lim = |hi: u64| splat(f64::from_bits(hi << 32));
    // Lanes the vector code computes (|x| < 105414350; false for NaN): the others are left to
    // the scalar functions.
    let fast = _mm256_cmp_pd::<_CMP_LT_OQ>(ax, lim(0x4199_21fb));
    let r1 = _mm256_cmp_pd::<_CMP_LT_OQ>(ax, lim(0x3feb_6000));
    let r12 = _mm256_cmp_pd::<_CMP_LT_OQ>(ax, lim(0x4003_68fd));
    let r2 = _mm256_andnot_pd(r1, r12);
    let r3 = _mm256_andnot_pd(r12, fast);
    // Zero in the slow lanes keeps every table index in range.
    let x_in = x;
    let x = _mm256_and_pd(x, fast);
    let ax = _mm256_and_pd(ax, fast);
    // reduce_sincos (for r3 lanes; computed for all).
    let t = _mm256_fmadd_pd(x, splat(HPINV), splat(TOINT));
    let xn = _mm256_sub_pd(t, splat(TOINT));
    let n = _mm256_and_si256(_mm256_castpd_si256(t), splat_i(3));
    let y = _mm256_fnmadd_pd(xn, splat(MP2), _mm256_fnmadd_pd(xn, splat(MP1), x));
    let t2 = _mm256_fnmadd_pd(xn, splat(PP3), y);
    let db = _mm256_fnmadd_pd(xn, splat(PP3), _mm256_sub_pd(y, t2));
    let b = _mm256_fnmadd_pd(xn, splat(PP4), t2);
    let db = _mm256_add_pd(db, _mm256_fnmadd_pd(xn, splat(PP4), _mm256_sub_pd(t2, b)));
    // 0.855469 ≤ |x| < 2.426265.
    let hy = _mm256_sub_pd(splat(HP0), ax);
    let a2 = _mm256_add_pd(hy, splat(HP1));
    let da2 = _mm256_add_pd(_mm256_sub_pd(hy, a2), splat(HP1));
    // E1 = do_sin(p, dp), E2 = do_cos(q, dq), arguments chosen per lane.
    let zero = _mm256_setzero_pd();
    let p = _mm256_blendv_pd(_mm256_blendv_pd(b, a2, r2), x, r1);
    let dp = _mm256_blendv_pd(_mm256_blendv_pd(db, da2, r2), zero, r1);
    let q = _mm256_blendv_pd(_mm256_blendv_pd(b, hy, r2), x, r1);
    let dq = _mm256_blendv_pd(_mm256_blendv_pd(db, splat(HP1), r2), zero, r1);
    let e1 = do_sin4(p, dp);
    let e2 = do_cos4(q, dq);
    let n_odd = has_bit(n, 1);
    let n_2 = has_bit(n, 2);
    let n1_2 = has_bit(_mm256_add_epi64(n, splat_i(1)), 2);
    // sin: r1 → E1; r2 → copysign(E2, x); r3 → (n odd ? E2 : E1), negated if n & 2.
    let s3 = neg4(_mm256_blendv_pd(e1, e2, n_odd), n_2);
    let mut s = _mm256_blendv_pd(_mm256_blendv_pd(e1, copysign4(e2, x), r2), s3, r3);
    // cos: r1 → E2; r2 → E1; r3 → (n odd ? E1 : E2), negated if (n + 1) & 2.
    let c3 = neg4(_mm256_blendv_pd(e2, e1, n_odd), n1_2);
    let mut c = _mm256_blendv_pd(_mm256_blendv_pd(e2, e1, r2), c3, r3);
    // |x| < 2^-26: sin x = x; |x| < 2^-27: cos x = 1.
    s = _mm256_blendv_pd(s, x, _mm256_cmp_pd::<_CMP_LT_OQ>(ax, lim(0x3e50_0000)));
    c = _mm256_blendv_pd(
        c,
        splat(1.0),
        _mm256_cmp_pd::<_CMP_LT_OQ>(ax, lim(0x3e40_0000)),
    );
    let slow = bits(fast) ^ 0xf;
    if slow != 0 {
        s = fix_lanes(s, x_in, slow, super::sin);
        c = fix_lanes(c, x_in, slow, super::cos);
    }
    (s, c)
}

#[target_feature(enable = "avx2,fma")]
pub(crate) fn log_all(x: &[f64], out: &mut [f64]) {
    let mut xc = x.chunks_exact(4);
    let mut oc = out.chunks_exact_mut(4);
    for (xs, os) in (&mut xc).zip(&mut oc) {
        // SAFETY: 4 doubles each; unaligned loads and stores.
        unsafe { _mm256_storeu_pd(os.as_mut_ptr(), log4(_mm256_loadu_pd(xs.as_ptr()))) };
    }
    for (o, &v) in oc.into_remainder().iter_mut().zip(xc.remainder()) {
        *o = super::log(v);
    }
}

#[target_feature(enable = "avx2,fma")]
pub(crate) fn sin_cos_all(x: &[f64], so: &mut [f64], co: &mut [f64]) {
    let n = x.len() - x.len() % 4;
    for i in (0..n).step_by(4) {
        // SAFETY: i + 4 ≤ n ≤ every length; unaligned loads and stores.
        unsafe {
            let (s, c) = sincos4(_mm256_loadu_pd(x.as_ptr().add(i)));
            _mm256_storeu_pd(so.as_mut_ptr().add(i), s);
            _mm256_storeu_pd(co.as_mut_ptr().add(i), c);
        }
    }
    for i in n..x.len() {
        so[i] = super::sin(x[i]);
        co[i] = super::cos(x[i]);
    }
}
