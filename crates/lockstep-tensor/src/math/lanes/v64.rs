//! f64 `tanh`, `exp` and `sigmoid` written once over a vector of lanes ([`V64`]) and built
//! twice: four lanes in AVX2's 256-bit registers and eight in AVX-512's 512-bit ones. Every
//! operation is an IEEE operation per lane (or a bit operation), in the same order with the
//! same operands on both widths, so both give the scalar functions' bits; only the selects
//! differ in form (AVX2 blends by a vector mask, AVX-512 by a mask register). On a CPU with
//! two 512-bit FMA units (Zen 5, Intel's server parts) the 512-bit build does twice the work
//! per instruction; Zen 4 splits 512-bit operations in two, so there it gains the registers.

use super::exp_c;
use core::arch::x86_64::*;

/// A vector of f64 lanes with the operations the kernels below use.
///
/// # Safety
/// Every method is `unsafe`: the CPU must have the implementing type's instructions (AVX2 for
/// `__m256d`, AVX-512F for `__m512d`) and the methods must be inlined into a function compiled
/// for them.
pub(super) trait V64: Copy {
    /// A per-lane condition.
    type M: Copy;
    unsafe fn splat(x: f64) -> Self;
    unsafe fn add(self, o: Self) -> Self;
    unsafe fn sub(self, o: Self) -> Self;
    unsafe fn mul(self, o: Self) -> Self;
    unsafe fn div(self, o: Self) -> Self;
    /// The lanes with the sign bit cleared.
    unsafe fn abs(self) -> Self;
    /// The lanes with the sign bit flipped.
    unsafe fn flip(self) -> Self;
    /// The lanes with `s`'s sign bit xor-ed in.
    unsafe fn xor_sign_of(self, s: Self) -> Self;
    /// The lanes' bits as an i64 greater than `c`.
    unsafe fn bits_gt(self, c: i64) -> Self::M;
    /// The lanes' bits as an i64 less than `c`.
    unsafe fn bits_lt(self, c: i64) -> Self::M;
    /// Ordered comparisons with `c` (false for NaN lanes).
    unsafe fn lt(self, c: f64) -> Self::M;
    unsafe fn gt(self, c: f64) -> Self::M;
    unsafe fn le(self, c: f64) -> Self::M;
    unsafe fn eq(self, c: f64) -> Self::M;
    /// NaN lanes.
    unsafe fn nan(self) -> Self::M;
    /// `t` where `m` holds, else `e`.
    unsafe fn sel(m: Self::M, t: Self, e: Self) -> Self;
    unsafe fn trunc(self) -> Self;
    unsafe fn floor(self) -> Self;
    /// The lanes' bits shifted left by 52 (an exponent field from `2^52 + 1023 + k`).
    unsafe fn shl52(self) -> Self;
}

impl V64 for __m256d {
    type M = __m256d;
    #[inline(always)]
    unsafe fn splat(x: f64) -> Self {
        unsafe { _mm256_set1_pd(x) }
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        unsafe { _mm256_add_pd(self, o) }
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        unsafe { _mm256_sub_pd(self, o) }
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        unsafe { _mm256_mul_pd(self, o) }
    }
    #[inline(always)]
    unsafe fn div(self, o: Self) -> Self {
        unsafe { _mm256_div_pd(self, o) }
    }
    #[inline(always)]
    unsafe fn abs(self) -> Self {
        unsafe { _mm256_andnot_pd(_mm256_castsi256_pd(_mm256_set1_epi64x(i64::MIN)), self) }
    }
    #[inline(always)]
    unsafe fn flip(self) -> Self {
        unsafe { _mm256_xor_pd(self, _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MIN))) }
    }
    #[inline(always)]
    unsafe fn xor_sign_of(self, s: Self) -> Self {
        unsafe {
            let sign = _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MIN));
            _mm256_xor_pd(self, _mm256_and_pd(s, sign))
        }
    }
    #[inline(always)]
    unsafe fn bits_gt(self, c: i64) -> Self::M {
        unsafe {
            _mm256_castsi256_pd(_mm256_cmpgt_epi64(
                _mm256_castpd_si256(self),
                _mm256_set1_epi64x(c),
            ))
        }
    }
    #[inline(always)]
    unsafe fn bits_lt(self, c: i64) -> Self::M {
        unsafe {
            _mm256_castsi256_pd(_mm256_cmpgt_epi64(
                _mm256_set1_epi64x(c),
                _mm256_castpd_si256(self),
            ))
        }
    }
    #[inline(always)]
    unsafe fn lt(self, c: f64) -> Self::M {
        unsafe { _mm256_cmp_pd::<_CMP_LT_OQ>(self, _mm256_set1_pd(c)) }
    }
    #[inline(always)]
    unsafe fn gt(self, c: f64) -> Self::M {
        unsafe { _mm256_cmp_pd::<_CMP_GT_OQ>(self, _mm256_set1_pd(c)) }
    }
    #[inline(always)]
    unsafe fn le(self, c: f64) -> Self::M {
        unsafe { _mm256_cmp_pd::<_CMP_LE_OQ>(self, _mm256_set1_pd(c)) }
    }
    #[inline(always)]
    unsafe fn eq(self, c: f64) -> Self::M {
        unsafe { _mm256_cmp_pd::<_CMP_EQ_OQ>(self, _mm256_set1_pd(c)) }
    }
    #[inline(always)]
    unsafe fn nan(self) -> Self::M {
        unsafe { _mm256_cmp_pd::<_CMP_UNORD_Q>(self, self) }
    }
    #[inline(always)]
    unsafe fn sel(m: Self::M, t: Self, e: Self) -> Self {
        unsafe { _mm256_blendv_pd(e, t, m) }
    }
    #[inline(always)]
    unsafe fn trunc(self) -> Self {
        unsafe { _mm256_round_pd::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(self) }
    }
    #[inline(always)]
    unsafe fn floor(self) -> Self {
        unsafe { _mm256_floor_pd(self) }
    }
    #[inline(always)]
    unsafe fn shl52(self) -> Self {
        unsafe { _mm256_castsi256_pd(_mm256_slli_epi64::<52>(_mm256_castpd_si256(self))) }
    }
}

impl V64 for __m512d {
    type M = __mmask8;
    #[inline(always)]
    unsafe fn splat(x: f64) -> Self {
        unsafe { _mm512_set1_pd(x) }
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        unsafe { _mm512_add_pd(self, o) }
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        unsafe { _mm512_sub_pd(self, o) }
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        unsafe { _mm512_mul_pd(self, o) }
    }
    #[inline(always)]
    unsafe fn div(self, o: Self) -> Self {
        unsafe { _mm512_div_pd(self, o) }
    }
    // Bit operations on the integer view: AVX-512F has no f64 `and`/`xor` (those are DQ's).
    #[inline(always)]
    unsafe fn abs(self) -> Self {
        unsafe {
            _mm512_castsi512_pd(_mm512_and_si512(
                _mm512_castpd_si512(self),
                _mm512_set1_epi64(i64::MAX),
            ))
        }
    }
    #[inline(always)]
    unsafe fn flip(self) -> Self {
        unsafe {
            _mm512_castsi512_pd(_mm512_xor_si512(
                _mm512_castpd_si512(self),
                _mm512_set1_epi64(i64::MIN),
            ))
        }
    }
    #[inline(always)]
    unsafe fn xor_sign_of(self, s: Self) -> Self {
        unsafe {
            let sign = _mm512_and_si512(_mm512_castpd_si512(s), _mm512_set1_epi64(i64::MIN));
            _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(self), sign))
        }
    }
    #[inline(always)]
    unsafe fn bits_gt(self, c: i64) -> Self::M {
        unsafe { _mm512_cmpgt_epi64_mask(_mm512_castpd_si512(self), _mm512_set1_epi64(c)) }
    }
    #[inline(always)]
    unsafe fn bits_lt(self, c: i64) -> Self::M {
        unsafe { _mm512_cmplt_epi64_mask(_mm512_castpd_si512(self), _mm512_set1_epi64(c)) }
    }
    #[inline(always)]
    unsafe fn lt(self, c: f64) -> Self::M {
        unsafe { _mm512_cmp_pd_mask::<_CMP_LT_OQ>(self, _mm512_set1_pd(c)) }
    }
    #[inline(always)]
    unsafe fn gt(self, c: f64) -> Self::M {
        unsafe { _mm512_cmp_pd_mask::<_CMP_GT_OQ>(self, _mm512_set1_pd(c)) }
    }
    #[inline(always)]
    unsafe fn le(self, c: f64) -> Self::M {
        unsafe { _mm512_cmp_pd_mask::<_CMP_LE_OQ>(self, _mm512_set1_pd(c)) }
    }
    #[inline(always)]
    unsafe fn eq(self, c: f64) -> Self::M {
        unsafe { _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(self, _mm512_set1_pd(c)) }
    }
    #[inline(always)]
    unsafe fn nan(self) -> Self::M {
        unsafe { _mm512_cmp_pd_mask::<_CMP_UNORD_Q>(self, self) }
    }
    #[inline(always)]
    unsafe fn sel(m: Self::M, t: Self, e: Self) -> Self {
        unsafe { _mm512_mask_blend_pd(m, e, t) }
    }
    #[inline(always)]
    unsafe fn trunc(self) -> Self {
        unsafe { _mm512_roundscale_pd::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(self) }
    }
    #[inline(always)]
    unsafe fn floor(self) -> Self {
        unsafe { _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(self) }
    }
    #[inline(always)]
    unsafe fn shl52(self) -> Self {
        unsafe { _mm512_castsi512_pd(_mm512_slli_epi64::<52>(_mm512_castpd_si512(self))) }
    }
}

/// [`tanh`](super::super::tanh) of every lane; with `COMMON`, only for lanes in
/// `TANH_COMMON` (the same bits there, without the other ranges' selects). |x|'s high word is
/// compared through |x|'s bits as an i64 (non-negative), k kept in f64 (`trunc` of the same
/// `t0`: the value `to_int_unchecked` gives), `2^±k` built from k's bits in the low mantissa of
/// `2^52 + 1023 ± k`.
///
/// # Safety
/// As [`V64`].
#[inline(always)]
pub(super) unsafe fn tanh<V: V64, const COMMON: bool>(x: V) -> V {
    const LN2_HI: f64 = 6.93147180369123816490e-01;
    const LN2_LO: f64 = 1.90821492927058770002e-10;
    const INVLN2: f64 = core::f64::consts::LOG2_E;
    const Q1: f64 = -3.33333333333331316428e-02;
    const Q2: f64 = 1.58730158725481460165e-03;
    const Q3: f64 = -7.93650757867487942473e-05;
    const Q4: f64 = 4.00821782732936239552e-06;
    const Q5: f64 = -2.01099218183624371326e-07;
    const MAGIC: f64 = 4503599627370496.0 + 1023.0;
    // SAFETY: register operations only (the caller's contract).
    unsafe {
        let set = |c: f64| V::splat(c);
        // tanh
        let a = x.abs();
        let big = a.bits_gt(0x4034_0000_ffff_ffff);
        let mid = a.bits_gt(0x3fd0_58ae_ffff_ffff);
        let a2 = set(2.0).mul(a);
        let arg = V::sel(mid, a2, set(-2.0).mul(a));
        let arg = if COMMON {
            arg
        } else {
            V::sel(big, set(0.0), arg)
        };
        // expm1_tanh(arg)
        let xa = arg;
        let xab = xa.abs();
        let neg = xa.bits_lt(0);
        let t0 = set(INVLN2).mul(xa).add(V::sel(neg, set(-0.5), set(0.5)));
        let kbig = t0.trunc();
        let k = V::sel(
            xab.bits_gt(0x3fd6_2e42_ffff_ffff),
            V::sel(
                xab.bits_lt(0x3ff0_a2b2_0000_0000),
                V::sel(neg, set(-1.0), set(1.0)),
                kbig,
            ),
            set(0.0),
        );
        let hi = xa.sub(k.mul(set(LN2_HI)));
        let lo = k.mul(set(LN2_LO));
        let xr = hi.sub(lo);
        let c = hi.sub(xr).sub(lo);
        let hfx = set(0.5).mul(xr);
        let hxs = xr.mul(hfx);
        let p = set(Q4).add(hxs.mul(set(Q5)));
        let p = set(Q3).add(hxs.mul(p));
        let p = set(Q2).add(hxs.mul(p));
        let p = set(Q1).add(hxs.mul(p));
        let r1 = set(1.0).add(hxs.mul(p));
        let tt = set(3.0).sub(r1.mul(hfx));
        let e = hxs.mul(r1.sub(tt).div(set(6.0).sub(xr.mul(tt))));
        let y0 = xr.sub(xr.mul(e).sub(hxs));
        let e2 = xr.mul(e.sub(c)).sub(c).sub(hxs);
        let ym1 = set(0.5).mul(xr.sub(e2)).sub(set(0.5));
        let y1 = V::sel(
            xr.lt(-0.25),
            set(-2.0).mul(e2.sub(xr.add(set(0.5)))),
            set(1.0).add(set(2.0).mul(xr.sub(e2))),
        );
        let twopk = set(MAGIC).add(k).shl52();
        let uf = set(MAGIC).sub(k).shl52();
        let ylt = xr.sub(e2).add(set(1.0).sub(uf)).mul(twopk);
        // In the common range k < 20: `ylt`.
        let y = if COMMON {
            ylt
        } else {
            let yge = xr.sub(e2.add(uf)).add(set(1.0)).mul(twopk);
            let yfar = xr.sub(e2).add(set(1.0)).mul(twopk).sub(set(1.0));
            let y = V::sel(k.lt(20.0), ylt, yge);
            V::sel(k.gt(56.0), yfar, y)
        };
        let y = V::sel(k.eq(1.0), y1, y);
        let y = V::sel(k.eq(-1.0), ym1, y);
        let y = V::sel(k.eq(0.0), y0, y);
        let t = if COMMON {
            y
        } else {
            V::sel(xab.bits_lt(0x3c90_0000_0000_0000), xa, y)
        };
        // back in tanh
        // One division for the three ranges that divide by t + 2: the numerator (2 or t)
        // chosen first, and −t/(t+2) as −(t/(t+2)), which IEEE division rounds to the same
        // value (t + 2 ≥ 1 is never NaN there).
        let tp2 = t.add(set(2.0));
        let upper = a.bits_gt(0x3fe1_93ea_ffff_ffff);
        let q = V::sel(upper, set(2.0), t).div(tp2);
        let r = if COMMON {
            q.flip()
        } else {
            V::sel(a.bits_gt(0x000f_ffff_ffff_ffff), q.flip(), a)
        };
        let r = V::sel(mid, q, r);
        let r = V::sel(upper, set(1.0).sub(q), r);
        // |x| > 20 or NaN: 1 − 0/|x|, which is 1, or the NaN quieted (`|x| + 1` gives the same
        // NaN: an operation returns its NaN operand quieted).
        let r = if COMMON {
            r
        } else {
            V::sel(big, V::sel(a.nan(), a.add(set(1.0)), set(1.0)), r)
        };
        r.xor_sign_of(x)
    }
}

/// [`exp`](super::super::exp) of every lane; with `COMMON`, only for lanes in the common range
/// (2⁻²⁸ < |x| ≤ 708: no overflow, underflow, NaN or `1 + x` range), with the same bits there.
/// k kept in f64 (`trunc` of the same `t`, the value `to_int_unchecked` gives), `k >> 1` as
/// `floor(k / 2)`, `2^k` built from k's bits in the low mantissa of `2^52 + 1023 + k`, the
/// high-word comparisons made on |x|'s bits as an i64.
///
/// # Safety
/// As [`V64`].
#[inline(always)]
pub(super) unsafe fn exp<V: V64, const COMMON: bool>(x: V) -> V {
    use exp_c::*;
    // SAFETY: register operations only (the caller's contract).
    unsafe {
        let set = |c: f64| V::splat(c);
        let a = x.abs();
        // The sign bit as a condition (NaN lanes included, as `to_bits() >> 63`).
        let neg = x.bits_lt(0);
        let xr = if COMMON {
            x
        } else {
            V::sel(a.le(746.0), x, set(0.0))
        };
        let t = set(INVLN2).mul(xr).add(V::sel(neg, set(-0.5), set(0.5)));
        let kbig = t.trunc();
        let k = V::sel(
            a.bits_gt(0x3ff0_a2b1_ffff_ffff),
            kbig,
            V::sel(
                a.bits_gt(0x3fd6_2e42_ffff_ffff),
                V::sel(neg, set(-1.0), set(1.0)),
                set(0.0),
            ),
        );
        let hi = xr.sub(k.mul(set(LN2HI)));
        let lo = k.mul(set(LN2LO));
        let r = hi.sub(lo);
        let xx = r.mul(r);
        let p = set(P4).add(xx.mul(set(P5)));
        let p = set(P3).add(xx.mul(p));
        let p = set(P2).add(xx.mul(p));
        let p = set(P1).add(xx.mul(p));
        let c = r.sub(xx.mul(p));
        let y = set(1.0).add(r.mul(c).div(set(2.0).sub(c)).sub(lo).add(hi));
        let ka = k.mul(set(0.5)).floor();
        let kb = k.sub(ka);
        let v = y
            .mul(set(MAGIC).add(ka).shl52())
            .mul(set(MAGIC).add(kb).shl52());
        if COMMON {
            return v;
        }
        let v = V::sel(a.bits_gt(0x3e30_0000_ffff_ffff), v, set(1.0).add(x));
        let v = V::sel(x.lt(-745.13321910194110842), set(0.0), v);
        let v = V::sel(x.gt(709.782712893383973096), set(f64::INFINITY), v);
        V::sel(x.nan(), x, v)
    }
}

/// `1 / (1 + exp(−x))` of every lane (with [`exp`]'s `COMMON` on −x).
///
/// # Safety
/// As [`V64`].
#[inline(always)]
pub(super) unsafe fn sigmoid<V: V64, const COMMON: bool>(x: V) -> V {
    // SAFETY: register operations only (the caller's contract).
    unsafe {
        let e = exp::<V, COMMON>(x.flip());
        V::splat(1.0).div(V::splat(1.0).add(e))
    }
}

/// `dst[i] = f(src[i])` for the first `min(len)` elements, eight f64 lanes per call of `f`: four
/// independent vectors per iteration (their long chains of divisions and polynomial steps
/// overlap: against two, sigmoid −14 %, tanh −2 % on Zen 5), then two, then one, then the last
/// 1–7 elements through a masked load and store (the masked-off lanes compute on zeros and are
/// never stored). Where all inputs of an iteration
/// have `|x|`'s bits in `common` (inclusive), they go through `fast`, which must give `f`'s
/// bits there. Each lane is independent, so the bits do not depend on the grouping.
///
/// The AVX2 twin is `map4_avx2` in `math.rs` (two vectors per iteration). One loop generic over
/// [`V64`] (the group's vectors in an array, loads/stores/masks as trait methods) measured
/// 11–14 % slower on both kernels (tanh 117 against 105 µs per 64 Ki values): kept as two.
///
/// # Safety
/// The CPU must have AVX-512F; inlined into a function compiled for it, where `fast` and `f`
/// are defined too (a closure is compiled with its own function's features).
#[inline(always)]
pub(super) unsafe fn map8(
    src: &[f64],
    dst: &mut [core::mem::MaybeUninit<f64>],
    common: (u64, u64),
    fast: impl Fn(__m512d) -> __m512d,
    f: impl Fn(__m512d) -> __m512d,
) {
    let n = src.len().min(dst.len());
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr() as *mut f64);
    let mut i = 0;
    // SAFETY: every load reads src[i..i + w] and every store writes dst[i..i + w] with
    // i + w <= n; the masked pair touches only the lanes below n − i.
    unsafe {
        let (below, above) = (
            _mm512_set1_epi64(common.0 as i64 - 1),
            _mm512_set1_epi64(common.1 as i64),
        );
        // Lanes whose |x| bits lie outside [lo, hi]: lo − 1 > b or b > hi.
        let outside = |v: __m512d| {
            let b = _mm512_castpd_si512(v.abs());
            _mm512_cmpgt_epi64_mask(below, b) | _mm512_cmpgt_epi64_mask(b, above)
        };
        while i + 32 <= n {
            let (a, b) = (_mm512_loadu_pd(s.add(i)), _mm512_loadu_pd(s.add(i + 8)));
            let (c, e) = (
                _mm512_loadu_pd(s.add(i + 16)),
                _mm512_loadu_pd(s.add(i + 24)),
            );
            let (ya, yb, yc, ye) = if outside(a) | outside(b) | outside(c) | outside(e) == 0 {
                (fast(a), fast(b), fast(c), fast(e))
            } else {
                (f(a), f(b), f(c), f(e))
            };
            _mm512_storeu_pd(d.add(i), ya);
            _mm512_storeu_pd(d.add(i + 8), yb);
            _mm512_storeu_pd(d.add(i + 16), yc);
            _mm512_storeu_pd(d.add(i + 24), ye);
            i += 32;
        }
        while i + 16 <= n {
            let (a, b) = (_mm512_loadu_pd(s.add(i)), _mm512_loadu_pd(s.add(i + 8)));
            let (ya, yb) = if outside(a) | outside(b) == 0 {
                (fast(a), fast(b))
            } else {
                (f(a), f(b))
            };
            _mm512_storeu_pd(d.add(i), ya);
            _mm512_storeu_pd(d.add(i + 8), yb);
            i += 16;
        }
        if i + 8 <= n {
            _mm512_storeu_pd(d.add(i), f(_mm512_loadu_pd(s.add(i))));
            i += 8;
        }
        if i < n {
            let mask: __mmask8 = (1u8 << (n - i)) - 1;
            let y = f(_mm512_maskz_loadu_pd(mask, s.add(i)));
            _mm512_mask_storeu_pd(d.add(i), mask, y);
        }
    }
}
