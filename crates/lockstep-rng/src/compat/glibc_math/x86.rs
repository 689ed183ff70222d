//! AVX-512 forms of the ports, eight lanes at a time. Each vector operation is the lane-wise
//! form of the scalar operation at the same place in `super` (an `_mm512_fmadd_pd` where the
//! scalar code has `mul_add`, plain IEEE operations elsewhere), and lanes take the branch the
//! scalar code would take by masks, so every lane has the scalar function's bits. Lanes outside
//! the vectorised ranges (zero, negative, subnormal or non-finite `log` and `pow` bases;
//! `sin`/`cos` arguments that are not finite or of magnitude ≥ 105414350; `exp` arguments, or
//! `y·log x` in `pow`, of magnitude outside `[2^-54, 512)`) are recomputed by the scalar
//! functions.

use super::tables::{
    EXP_C, EXP_INVLN2N, EXP_NEGLN2HIN, EXP_NEGLN2LON, EXP_SHIFT, EXP_TAB, LOG_A, LOG_B, LOG_TAB,
    POW_A, POW_LN2HI, POW_LN2LO, POW_LOG_TAB, SINCOSTAB,
};
use super::*;
use core::arch::x86_64::*;

#[inline(always)]
fn splat(x: f64) -> __m512d {
    // SAFETY (for every intrinsic in this module): callers are `#[target_feature(enable =
    // "avx512f")]` functions; the intrinsics are safe to call inside them.
    unsafe { _mm512_set1_pd(x) }
}

/// Applies `f` to the lanes of `v` selected by `m`, leaving the others as they are in `r`.
#[inline(always)]
fn fix_lanes(r: __m512d, v: __m512d, m: __mmask8, f: impl Fn(f64) -> f64) -> __m512d {
    let mut rs = [0f64; 8];
    let mut vs = [0f64; 8];
    // SAFETY: 8 doubles each, unaligned loads and stores.
    unsafe {
        _mm512_storeu_pd(rs.as_mut_ptr(), r);
        _mm512_storeu_pd(vs.as_mut_ptr(), v);
    }
    for j in 0..8 {
        if m & (1 << j) != 0 {
            rs[j] = f(vs[j]);
        }
    }
    // SAFETY: as above.
    unsafe { _mm512_loadu_pd(rs.as_ptr()) }
}

/// `log` of eight lanes (see [`super::log`]).
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn log8(x: __m512d) -> __m512d {
    let ix = _mm512_castpd_si512(x);
    let top = _mm512_srli_epi64::<48>(ix);
    let special = _mm512_cmpge_epu64_mask(
        _mm512_sub_epi64(top, _mm512_set1_epi64(0x10)),
        _mm512_set1_epi64(0x7ff0 - 0x10),
    );
    const LO: i64 = 0x3fee_0000_0000_0000;
    const HI: i64 = 0x3ff1_0900_0000_0000;
    let near = _mm512_cmplt_epu64_mask(
        _mm512_sub_epi64(ix, _mm512_set1_epi64(LO)),
        _mm512_set1_epi64(HI - LO),
    );
    // Main path; special lanes get x = 1.0 so their table index stays in range.
    let ix = _mm512_mask_blend_epi64(special, ix, _mm512_set1_epi64(0x3ff0_0000_0000_0000));
    let tmp = _mm512_sub_epi64(ix, _mm512_set1_epi64(0x3fe6_0000_0000_0000));
    let i2 = _mm512_slli_epi64::<1>(_mm512_and_si512(
        _mm512_srli_epi64::<45>(tmp),
        _mm512_set1_epi64(127),
    ));
    let k = _mm512_srai_epi64::<52>(tmp);
    let iz = _mm512_sub_epi64(
        ix,
        _mm512_and_si512(tmp, _mm512_set1_epi64((0xfffu64 << 52) as i64)),
    );
    let base = LOG_TAB.as_ptr() as *const f64;
    // SAFETY: i2 is in 0..=254 (an even index into a 256-double table), +1 stays in bounds.
    let (invc, logc) = unsafe {
        (
            _mm512_i64gather_pd::<8>(i2, base),
            _mm512_i64gather_pd::<8>(_mm512_add_epi64(i2, _mm512_set1_epi64(1)), base),
        )
    };
    let z = _mm512_castsi512_pd(iz);
    let r = _mm512_fmadd_pd(z, invc, splat(-1.0));
    let kd = _mm512_cvtepi32_pd(_mm512_cvtepi64_epi32(k));
    let w = _mm512_fmadd_pd(kd, splat(LN2HI), logc);
    let hi = _mm512_add_pd(w, r);
    let lo = _mm512_fmadd_pd(kd, splat(LN2LO), _mm512_add_pd(_mm512_sub_pd(w, hi), r));
    let r2 = _mm512_mul_pd(r, r);
    let a = LOG_A;
    let p = _mm512_fmadd_pd(
        _mm512_fmadd_pd(r, splat(a[4]), splat(a[3])),
        r2,
        _mm512_fmadd_pd(r, splat(a[2]), splat(a[1])),
    );
    let y = _mm512_fmadd_pd(
        _mm512_mul_pd(r, r2),
        p,
        _mm512_fmadd_pd(r2, splat(a[0]), lo),
    );
    let mut res = _mm512_add_pd(y, hi);
    if near != 0 {
        res = _mm512_mask_blend_pd(near, res, log_near_one8(x));
    }
    if special != 0 {
        res = fix_lanes(res, x, special, super::log);
    }
    res
}

#[inline]
#[target_feature(enable = "avx512f")]
fn log_near_one8(x: __m512d) -> __m512d {
    let b = LOG_B;
    let r = _mm512_sub_pd(x, splat(1.0));
    let r2 = _mm512_mul_pd(r, r);
    let r3 = _mm512_mul_pd(r, r2);
    let p1 = _mm512_fmadd_pd(
        r2,
        splat(b[3]),
        _mm512_fmadd_pd(r, splat(b[2]), splat(b[1])),
    );
    let p2 = _mm512_fmadd_pd(
        r2,
        splat(b[6]),
        _mm512_fmadd_pd(r, splat(b[5]), splat(b[4])),
    );
    let p3 = _mm512_fmadd_pd(
        r3,
        splat(b[10]),
        _mm512_fmadd_pd(
            r2,
            splat(b[9]),
            _mm512_fmadd_pd(r, splat(b[8]), splat(b[7])),
        ),
    );
    let p = _mm512_fmadd_pd(_mm512_fmadd_pd(p3, r3, p2), r3, p1);
    let two27 = splat(134_217_728.0);
    let t = _mm512_fmadd_pd(r, two27, r);
    let rhi = _mm512_fnmadd_pd(two27, r, t);
    let rlo = _mm512_sub_pd(r, rhi);
    let rhi2 = _mm512_mul_pd(rhi, rhi);
    let hi = _mm512_fmadd_pd(rhi2, splat(b[0]), r);
    let lo = _mm512_fmadd_pd(rhi2, splat(b[0]), _mm512_sub_pd(r, hi));
    let lo = _mm512_fmadd_pd(_mm512_mul_pd(splat(b[0]), rlo), _mm512_add_pd(r, rhi), lo);
    let y = _mm512_fmadd_pd(p, r3, lo);
    // x == 1 gives +0 here as in the scalar code (r = 0: every term is +0).
    _mm512_add_pd(hi, y)
}

const SIGN: i64 = i64::MIN;

#[inline(always)]
fn abs8(x: __m512d) -> __m512d {
    // SAFETY: see `splat`.
    unsafe {
        _mm512_castsi512_pd(_mm512_andnot_si512(
            _mm512_set1_epi64(SIGN),
            _mm512_castpd_si512(x),
        ))
    }
}

/// `copysign(mag, sgn)`: the sign bit of `sgn`, the other bits of `mag`.
#[inline(always)]
fn copysign8(mag: __m512d, sgn: __m512d) -> __m512d {
    // SAFETY: see `splat`.
    unsafe {
        _mm512_castsi512_pd(_mm512_ternarylogic_epi64::<0xCA>(
            _mm512_set1_epi64(SIGN),
            _mm512_castpd_si512(sgn),
            _mm512_castpd_si512(mag),
        ))
    }
}

#[inline(always)]
fn neg8(x: __m512d, m: __mmask8) -> __m512d {
    // SAFETY: see `splat`.
    unsafe {
        _mm512_castsi512_pd(_mm512_mask_xor_epi64(
            _mm512_castpd_si512(x),
            m,
            _mm512_castpd_si512(x),
            _mm512_set1_epi64(SIGN),
        ))
    }
}

/// The four table entries at `4·k` for `u = BIG + |x|`.
#[inline]
#[target_feature(enable = "avx512f")]
fn table8(u: __m512d) -> (__m512d, __m512d, __m512d, __m512d) {
    let k = _mm512_slli_epi64::<2>(_mm512_and_si512(
        _mm512_castpd_si512(u),
        _mm512_set1_epi64(0xffff_ffff),
    ));
    let base = SINCOSTAB.as_ptr() as *const f64;
    let one = _mm512_set1_epi64(1);
    let k1 = _mm512_add_epi64(k, one);
    let k2 = _mm512_add_epi64(k1, one);
    let k3 = _mm512_add_epi64(k2, one);
    // SAFETY: callers pass |x| < 0.86, so k ≤ 4·110 - 4 and k + 3 < 440.
    unsafe {
        (
            _mm512_i64gather_pd::<8>(k, base),
            _mm512_i64gather_pd::<8>(k1, base),
            _mm512_i64gather_pd::<8>(k2, base),
            _mm512_i64gather_pd::<8>(k3, base),
        )
    }
}

/// `do_sin(x, dx)` lane-wise, Taylor branch included; requires `|x| < 0.86` in every lane.
#[inline]
#[target_feature(enable = "avx512f")]
fn do_sin8(x: __m512d, dx: __m512d) -> __m512d {
    let ax = abs8(x);
    // TAYLOR_SIN.
    let xx = _mm512_mul_pd(x, x);
    let mut p = _mm512_fmadd_pd(splat(S5), xx, splat(S4));
    p = _mm512_fmadd_pd(p, xx, splat(S3));
    p = _mm512_fmadd_pd(p, xx, splat(S2));
    p = _mm512_fmadd_pd(p, xx, splat(S1));
    let t = _mm512_fmadd_pd(xx, _mm512_fmsub_pd(p, x, _mm512_mul_pd(splat(0.5), dx)), dx);
    let taylor = _mm512_add_pd(x, t);
    // Table branch.
    let le0 = _mm512_cmp_pd_mask::<_CMP_LE_OQ>(x, _mm512_setzero_pd());
    let dx = neg8(dx, le0);
    let u = _mm512_add_pd(splat(BIG), ax);
    let xr = _mm512_sub_pd(ax, _mm512_sub_pd(u, splat(BIG)));
    let (sn, ssn, cs, ccs) = table8(u);
    let xx = _mm512_mul_pd(xr, xr);
    let s = _mm512_add_pd(
        xr,
        _mm512_fmadd_pd(
            _mm512_mul_pd(xr, xx),
            _mm512_fmadd_pd(xx, splat(SN5), splat(SN3)),
            dx,
        ),
    );
    let c = _mm512_fmadd_pd(
        xr,
        dx,
        _mm512_mul_pd(
            xx,
            _mm512_fmadd_pd(xx, _mm512_fmadd_pd(xx, splat(CS6), splat(CS4)), splat(CS2)),
        ),
    );
    let cor = _mm512_fmadd_pd(s, cs, _mm512_fnmadd_pd(c, sn, _mm512_fmadd_pd(s, ccs, ssn)));
    let table = copysign8(_mm512_add_pd(sn, cor), x);
    let small = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(ax, splat(0.126));
    _mm512_mask_blend_pd(small, table, taylor)
}

/// `do_cos(x, dx)` lane-wise; requires `|x| < 0.86` in every lane.
#[inline]
#[target_feature(enable = "avx512f")]
fn do_cos8(x: __m512d, dx: __m512d) -> __m512d {
    let lt0 = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(x, _mm512_setzero_pd());
    let dx = neg8(dx, lt0);
    let ax = abs8(x);
    let u = _mm512_add_pd(splat(BIG), ax);
    let xr = _mm512_add_pd(_mm512_sub_pd(ax, _mm512_sub_pd(u, splat(BIG))), dx);
    let (sn, ssn, cs, ccs) = table8(u);
    let xx = _mm512_mul_pd(xr, xr);
    let s = _mm512_fmadd_pd(
        _mm512_mul_pd(xr, xx),
        _mm512_fmadd_pd(xx, splat(SN5), splat(SN3)),
        xr,
    );
    let c = _mm512_mul_pd(
        xx,
        _mm512_fmadd_pd(xx, _mm512_fmadd_pd(xx, splat(CS6), splat(CS4)), splat(CS2)),
    );
    let cor = _mm512_fnmadd_pd(
        s,
        sn,
        _mm512_fnmadd_pd(c, cs, _mm512_fnmadd_pd(s, ssn, ccs)),
    );
    _mm512_add_pd(cs, cor)
}

/// `(sin x, cos x)` of eight lanes, each with the bits of [`super::sin`] and [`super::cos`].
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn sincos8(x: __m512d) -> (__m512d, __m512d) {
    let ax = abs8(x);
    let lim = |hi: u64| splat(f64::from_bits(hi << 32));
    // Lanes handled by the scalar functions (also NaN: the comparison is false).
    let slow = !_mm512_cmp_pd_mask::<_CMP_LT_OQ>(ax, lim(0x4199_21fb));
    let r1 = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(ax, lim(0x3feb_6000));
    let r12 = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(ax, lim(0x4003_68fd));
    let r2 = r12 & !r1;
    let r3 = !r12 & !slow;
    // Zero in the slow lanes keeps every table index in range.
    let x_in = x;
    let x = _mm512_mask_blend_pd(slow, x, _mm512_setzero_pd());
    let ax = _mm512_mask_blend_pd(slow, ax, _mm512_setzero_pd());
    // reduce_sincos (for r3 lanes; computed for all).
    let t = _mm512_fmadd_pd(x, splat(HPINV), splat(TOINT));
    let xn = _mm512_sub_pd(t, splat(TOINT));
    let n = _mm512_and_si512(_mm512_castpd_si512(t), _mm512_set1_epi64(3));
    let y = _mm512_fnmadd_pd(xn, splat(MP2), _mm512_fnmadd_pd(xn, splat(MP1), x));
    let t2 = _mm512_fnmadd_pd(xn, splat(PP3), y);
    let db = _mm512_fnmadd_pd(xn, splat(PP3), _mm512_sub_pd(y, t2));
    let b = _mm512_fnmadd_pd(xn, splat(PP4), t2);
    let db = _mm512_add_pd(db, _mm512_fnmadd_pd(xn, splat(PP4), _mm512_sub_pd(t2, b)));
    // 0.855469 ≤ |x| < 2.426265.
    let hy = _mm512_sub_pd(splat(HP0), ax);
    let a2 = _mm512_add_pd(hy, splat(HP1));
    let da2 = _mm512_add_pd(_mm512_sub_pd(hy, a2), splat(HP1));
    // E1 = do_sin(p, dp), E2 = do_cos(q, dq), arguments chosen per lane.
    let zero = _mm512_setzero_pd();
    let p = _mm512_mask_blend_pd(r1, _mm512_mask_blend_pd(r2, b, a2), x);
    let dp = _mm512_mask_blend_pd(r1, _mm512_mask_blend_pd(r2, db, da2), zero);
    let q = _mm512_mask_blend_pd(r1, _mm512_mask_blend_pd(r2, b, hy), x);
    let dq = _mm512_mask_blend_pd(r1, _mm512_mask_blend_pd(r2, db, splat(HP1)), zero);
    let e1 = do_sin8(p, dp);
    let e2 = do_cos8(q, dq);
    let n_odd = _mm512_test_epi64_mask(n, _mm512_set1_epi64(1));
    let n_2 = _mm512_test_epi64_mask(n, _mm512_set1_epi64(2));
    let n1_2 = _mm512_test_epi64_mask(
        _mm512_add_epi64(n, _mm512_set1_epi64(1)),
        _mm512_set1_epi64(2),
    );
    // sin: r1 → E1; r2 → copysign(E2, x); r3 → (n odd ? E2 : E1), negated if n & 2.
    let s3 = neg8(_mm512_mask_blend_pd(n_odd, e1, e2), n_2);
    let mut s = _mm512_mask_blend_pd(r3, _mm512_mask_blend_pd(r2, e1, copysign8(e2, x)), s3);
    // cos: r1 → E2; r2 → E1; r3 → (n odd ? E1 : E2), negated if (n + 1) & 2.
    let c3 = neg8(_mm512_mask_blend_pd(n_odd, e2, e1), n1_2);
    let mut c = _mm512_mask_blend_pd(r3, _mm512_mask_blend_pd(r2, e2, e1), c3);
    // |x| < 2^-26: sin x = x; |x| < 2^-27: cos x = 1.
    s = _mm512_mask_blend_pd(_mm512_cmp_pd_mask::<_CMP_LT_OQ>(ax, lim(0x3e50_0000)), s, x);
    c = _mm512_mask_blend_pd(
        _mm512_cmp_pd_mask::<_CMP_LT_OQ>(ax, lim(0x3e40_0000)),
        c,
        splat(1.0),
    );
    if slow != 0 {
        s = fix_lanes(s, x_in, slow, super::sin);
        c = fix_lanes(c, x_in, slow, super::cos);
    }
    (s, c)
}

#[target_feature(enable = "avx512f")]
pub(crate) fn log_all(x: &[f64], out: &mut [f64]) {
    let mut xc = x.chunks_exact(8);
    let mut oc = out.chunks_exact_mut(8);
    for (xs, os) in (&mut xc).zip(&mut oc) {
        // SAFETY: 8 doubles each; unaligned loads and stores.
        unsafe { _mm512_storeu_pd(os.as_mut_ptr(), log8(_mm512_loadu_pd(xs.as_ptr()))) };
    }
    for (o, &v) in oc.into_remainder().iter_mut().zip(xc.remainder()) {
        *o = super::log(v);
    }
}

#[target_feature(enable = "avx512f")]
pub(crate) fn sin_cos_all(x: &[f64], so: &mut [f64], co: &mut [f64]) {
    let n = x.len() - x.len() % 8;
    for i in (0..n).step_by(8) {
        // SAFETY: i + 8 ≤ n ≤ every length; unaligned loads and stores.
        unsafe {
            let (s, c) = sincos8(_mm512_loadu_pd(x.as_ptr().add(i)));
            _mm512_storeu_pd(so.as_mut_ptr().add(i), s);
            _mm512_storeu_pd(co.as_mut_ptr().add(i), c);
        }
    }
    for i in n..x.len() {
        so[i] = super::sin(x[i]);
        co[i] = super::cos(x[i]);
    }
}

/// `log_inline` then `exp_inline` of `pow(x, y)` lane-wise (see [`super::pow`]); lanes that
/// the scalar code sends to a special case (`x` not a positive normal double, `|y·log x|`
/// outside `[2^-54, 512)`) are recomputed by the scalar function. `y` must not be special
/// (`|y| ∈ [2^-65, 2^63)`), which [`pow_all`] checks once.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn pow8(x: __m512d, y: f64) -> __m512d {
    let ix = _mm512_castpd_si512(x);
    let topx = _mm512_srli_epi64::<52>(ix);
    let special = _mm512_cmpge_epu64_mask(
        _mm512_sub_epi64(topx, _mm512_set1_epi64(1)),
        _mm512_set1_epi64(0x7ff - 1),
    );
    // Special lanes get x = 1.0 so their table indices stay in range.
    let ix = _mm512_mask_blend_epi64(special, ix, _mm512_set1_epi64(0x3ff0_0000_0000_0000));
    let tmp = _mm512_sub_epi64(ix, _mm512_set1_epi64(0x3fe6_9555_0000_0000));
    let i = _mm512_and_si512(_mm512_srli_epi64::<45>(tmp), _mm512_set1_epi64(127));
    let i3 = _mm512_add_epi64(_mm512_slli_epi64::<1>(i), i);
    let k = _mm512_srai_epi64::<52>(tmp);
    let iz = _mm512_sub_epi64(
        ix,
        _mm512_and_si512(tmp, _mm512_set1_epi64((0xfffu64 << 52) as i64)),
    );
    let base = POW_LOG_TAB.as_ptr() as *const f64;
    let one = _mm512_set1_epi64(1);
    // SAFETY: i3 ≤ 3·127, and i3 + 2 < 384, the table's length in doubles.
    let (invc, logc, logctail) = unsafe {
        let i31 = _mm512_add_epi64(i3, one);
        (
            _mm512_i64gather_pd::<8>(i3, base),
            _mm512_i64gather_pd::<8>(i31, base),
            _mm512_i64gather_pd::<8>(_mm512_add_epi64(i31, one), base),
        )
    };
    let z = _mm512_castsi512_pd(iz);
    let kd = _mm512_cvtepi32_pd(_mm512_cvtepi64_epi32(k));
    let a = POW_A;
    let r = _mm512_fmadd_pd(z, invc, splat(-1.0));
    let t1 = _mm512_fmadd_pd(kd, splat(POW_LN2HI), logc);
    let t2 = _mm512_add_pd(t1, r);
    let lo1 = _mm512_fmadd_pd(kd, splat(POW_LN2LO), logctail);
    let lo2 = _mm512_add_pd(_mm512_sub_pd(t1, t2), r);
    let ar = _mm512_mul_pd(splat(a[0]), r);
    let ar2 = _mm512_mul_pd(r, ar);
    let ar3 = _mm512_mul_pd(r, ar2);
    let hi = _mm512_add_pd(t2, ar2);
    let lo3 = _mm512_fmsub_pd(ar, r, ar2);
    let lo4 = _mm512_add_pd(_mm512_sub_pd(t2, hi), ar2);
    let q = _mm512_fmadd_pd(
        _mm512_fmadd_pd(r, splat(a[6]), splat(a[5])),
        ar2,
        _mm512_fmadd_pd(r, splat(a[4]), splat(a[3])),
    );
    let q = _mm512_fmadd_pd(ar2, q, _mm512_fmadd_pd(r, splat(a[2]), splat(a[1])));
    let sum = _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(lo1, lo2), lo3), lo4);
    let lo = _mm512_fmadd_pd(ar3, q, sum);
    let lh = _mm512_add_pd(hi, lo);
    let lt = _mm512_add_pd(_mm512_sub_pd(hi, lh), lo);
    let yv = splat(y);
    let ehi = _mm512_mul_pd(yv, lh);
    let elo = _mm512_fmadd_pd(yv, lt, _mm512_fmsub_pd(yv, lh, ehi));
    let (res, slow) = exp8_core::<true>(ehi, elo);
    let fix = special | slow;
    if fix != 0 {
        return fix_lanes(res, x, fix, |v| super::pow(v, y));
    }
    res
}

/// The common path of `exp_inline(x, xtail, 0)` (`TAIL`) or `exp(x)` lane-wise, and the mask of
/// the lanes that need the scalar special cases (`|x| ∉ [2^-54, 512)` or NaN).
#[inline]
#[target_feature(enable = "avx512f")]
fn exp8_core<const TAIL: bool>(x: __m512d, xtail: __m512d) -> (__m512d, __mmask8) {
    let ix = _mm512_castpd_si512(x);
    let abstop = _mm512_and_si512(_mm512_srli_epi64::<52>(ix), _mm512_set1_epi64(0x7ff));
    let slow = _mm512_cmpge_epu64_mask(
        _mm512_sub_epi64(abstop, _mm512_set1_epi64(0x3c9)),
        _mm512_set1_epi64(0x408 - 0x3c9),
    );
    let shift = splat(EXP_SHIFT);
    let kd = _mm512_fmadd_pd(x, splat(EXP_INVLN2N), shift);
    let ki = _mm512_castpd_si512(kd);
    let kd = _mm512_sub_pd(kd, shift);
    let r = _mm512_fmadd_pd(
        kd,
        splat(EXP_NEGLN2LON),
        _mm512_fmadd_pd(kd, splat(EXP_NEGLN2HIN), x),
    );
    let r = if TAIL { _mm512_add_pd(r, xtail) } else { r };
    let idx = _mm512_slli_epi64::<1>(_mm512_and_si512(ki, _mm512_set1_epi64(127)));
    let top = _mm512_slli_epi64::<45>(ki);
    // SAFETY: idx ≤ 254, idx + 1 < 256 (the table's length).
    let (tail, sb) = unsafe {
        (
            _mm512_i64gather_pd::<8>(idx, EXP_TAB.as_ptr() as *const f64),
            _mm512_i64gather_epi64::<8>(
                _mm512_add_epi64(idx, _mm512_set1_epi64(1)),
                EXP_TAB.as_ptr() as *const i64,
            ),
        )
    };
    let scale = _mm512_castsi512_pd(_mm512_add_epi64(sb, top));
    let c = EXP_C;
    let r2 = _mm512_mul_pd(r, r);
    let tmp = _mm512_fmadd_pd(
        _mm512_mul_pd(r2, r2),
        _mm512_fmadd_pd(r, splat(c[3]), splat(c[2])),
        _mm512_fmadd_pd(
            _mm512_fmadd_pd(r, splat(c[1]), splat(c[0])),
            r2,
            _mm512_add_pd(tail, r),
        ),
    );
    (_mm512_fmadd_pd(scale, tmp, scale), slow)
}

/// `exp` of eight lanes (see [`super::exp`]).
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn exp8(x: __m512d) -> __m512d {
    let (res, slow) = exp8_core::<false>(x, x);
    if slow != 0 {
        return fix_lanes(res, x, slow, super::exp);
    }
    res
}

#[target_feature(enable = "avx512f")]
pub(crate) fn pow_all(x: &[f64], y: f64, out: &mut [f64]) {
    let mut xc = x.chunks_exact(8);
    let mut oc = out.chunks_exact_mut(8);
    for (xs, os) in (&mut xc).zip(&mut oc) {
        // SAFETY: 8 doubles each; unaligned loads and stores.
        unsafe { _mm512_storeu_pd(os.as_mut_ptr(), pow8(_mm512_loadu_pd(xs.as_ptr()), y)) };
    }
    for (o, &v) in oc.into_remainder().iter_mut().zip(xc.remainder()) {
        *o = super::pow(v, y);
    }
}

#[target_feature(enable = "avx512f")]
pub(crate) fn exp_all(x: &[f64], out: &mut [f64]) {
    let mut xc = x.chunks_exact(8);
    let mut oc = out.chunks_exact_mut(8);
    for (xs, os) in (&mut xc).zip(&mut oc) {
        // SAFETY: 8 doubles each; unaligned loads and stores.
        unsafe { _mm512_storeu_pd(os.as_mut_ptr(), exp8(_mm512_loadu_pd(xs.as_ptr()))) };
    }
    for (o, &v) in oc.into_remainder().iter_mut().zip(xc.remainder()) {
        *o = super::exp(v);
    }
}
