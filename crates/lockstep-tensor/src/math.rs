//! Elementary functions for deterministic kernels: the same bits on every CPU, OS and libc.
//!
//! `f32::exp`, `f64::ln` and friends call the platform's math library (glibc, musl, macOS's
//! libsystem_m, the MSVC CRT), whose results differ in the last bit from one to another and
//! sometimes between versions. Every deterministic kernel of lockstep (softmax, log_softmax,
//! logsumexp, activations, losses, the nn layers, optimizers) takes its transcendental functions
//! from here instead: portable software implementations (the `libm` crate, a pure-Rust port of
//! musl's libm, compiled into lockstep), so a result depends only on the input bits.
//!
//! # Accuracy
//! Measured against correctly rounded results (mpmath, `tools/golden_math.py` →
//! `tests/golden/math.json`, about 2,000 random inputs per function over its whole domain plus
//! thresholds and hard cases; `tests/math.rs` asserts the bound column), and for the
//! one-argument f32 functions over *every* f32 input against the f64 function (each worst case
//! found is in the golden file, so its error is mpmath's). Errors are in
//! ulps of the exact value; special values (±0, ±inf, NaN, domain errors, C99's `pow` cases)
//! are exactly the C standard's.
//!
//! | function | bound | max seen, f64 (sampled) | max seen, f32 (every input) |
//! |---|---|---|---|
//! | `exp`, `expf` | < 1 | 0.680 | 0.912 |
//! | `expm1`, `expm1f` | < 1 | 0.740 | 0.812 |
//! | `ln`, `lnf` | < 1 | 0.692 | 0.836 |
//! | `ln_1p`, `ln_1pf` | < 1 | 0.660 | 0.836 |
//! | `tanh`, `tanhf` | 2.5 | 1.508 | 2.188 |
//! | `erf`, `erff` | < 1 | 0.724 | 0.968 |
//! | `sin`, `sinf` | < 1 | 0.604 | 0.500 |
//! | `cos`, `cosf` | < 1 | 0.660 | 0.500 |
//! | `pow`, `powf` | < 1, see below | 0.728 | 0.792 (sampled) |
//! | `sigmoid`, `sigmoidf` | 2.5, see below | 1.824 | 2.480 |
//!
//! So every function but `tanh`, `sigmoid` and `pow` is faithfully rounded (one of the two
//! floats around the exact value). Exceptions, documented on the functions:
//! * `pow(x, y)` (f64) with `|y| ≥ 2^31` and `x` within `2^-20` of 1: up to 167 ulps seen (the
//!   `libm` crate's pow loses accuracy there; bound tested: 256 ulps). No such error was seen
//!   for `powf` (sampled with `|y|` up to 10^9).
//! * `sigmoid(x)` where `e^-x` overflows (`x < −709.78`, f32: `x < −88.72`): `+0`, as PyTorch's
//!   formula gives, though the exact value is a (subnormal) positive number below the smallest
//!   normal one.
//!
//! [`lanes`] holds branch-free forms of `expf`, `exp`, `erff` and `erf` with exactly these bits,
//! which loops turn into vector code, so the table above holds for them too. The elementwise
//! `exp` and `sigmoid` use them through a generic loop; GELU and its derivative through slice
//! kernels of their own (`gelu_f32_slice_on`, …), one per instruction set with the whole loop
//! inside (through a closure the erf form was not inlined and GELU ran 2× slower than the
//! scalar function), which compute, for a block of 16 inputs all in erf's small or middle
//! range, only that range's pieces.
//!
//! The compat samplers (`lockstep_rng::compat`) do *not* use this module: they mirror the
//! reference library, which calls the platform's functions (see the README's table).

/// `e^x`.
#[inline]
pub fn exp(x: f64) -> f64 {
    libm::exp(x)
}
/// `e^x` in f32.
#[inline]
pub fn expf(x: f32) -> f32 {
    libm::expf(x)
}
/// `e^x − 1`, accurate near 0.
#[inline]
pub fn expm1(x: f64) -> f64 {
    libm::expm1(x)
}
/// `e^x − 1` in f32.
#[inline]
pub fn expm1f(x: f32) -> f32 {
    libm::expm1f(x)
}
/// Natural logarithm.
#[inline]
pub fn ln(x: f64) -> f64 {
    libm::log(x)
}
/// Natural logarithm in f32.
#[inline]
pub fn lnf(x: f32) -> f32 {
    libm::logf(x)
}
/// `ln(1 + x)`, accurate near 0.
#[inline]
pub fn ln_1p(x: f64) -> f64 {
    libm::log1p(x)
}
/// `ln(1 + x)` in f32.
#[inline]
pub fn ln_1pf(x: f32) -> f32 {
    libm::log1pf(x)
}
/// Hyperbolic tangent. Error below 2.5 ulps (not faithfully rounded: 1.51 ulps seen).
#[inline]
pub fn tanh(x: f64) -> f64 {
    libm::tanh(x)
}
/// Hyperbolic tangent in f32. Error below 2.5 ulps (2.188 at most over every f32 input).
#[inline]
pub fn tanhf(x: f32) -> f32 {
    libm::tanhf(x)
}
/// The error function.
#[inline]
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}
/// The error function in f32.
#[inline]
pub fn erff(x: f32) -> f32 {
    libm::erff(x)
}
/// Sine.
#[inline]
pub fn sin(x: f64) -> f64 {
    libm::sin(x)
}
/// Sine in f32.
#[inline]
pub fn sinf(x: f32) -> f32 {
    libm::sinf(x)
}
/// Cosine.
#[inline]
pub fn cos(x: f64) -> f64 {
    libm::cos(x)
}
/// Cosine in f32.
#[inline]
pub fn cosf(x: f32) -> f32 {
    libm::cosf(x)
}
/// `x^y`. Faithfully rounded, except for `|y| ≥ 2^31` with `x` within `2^-20` of 1, where the
/// error can reach hundreds of ulps (167 seen; 256 tested).
#[inline]
pub fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}
/// `x^y` in f32.
#[inline]
pub fn powf(x: f32, y: f32) -> f32 {
    libm::powf(x, y)
}
/// The logistic function `1 / (1 + e^-x)` (PyTorch's formula). Error below 2.5 ulps, except
/// where `e^-x` overflows (`x < −709.78`): `+0` there, the exact value being below
/// `f64::MIN_POSITIVE`.
#[inline]
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + exp(-x))
}
/// `β = 2/√π · 1/√2 · ½` (the standard normal density's factor) rounded to f32, as PyTorch's
/// `scalar_t(M_2_SQRTPI * M_SQRT1_2 * 0.5)`.
const GELU_BETA_F32: f32 =
    (core::f64::consts::FRAC_2_SQRT_PI * core::f64::consts::FRAC_1_SQRT_2 * 0.5) as f32;

/// GELU's derivative (exact form) in f32, PyTorch's formula and operation order for `float`:
/// `Φ(x) + x·φ(x)` with `Φ(x) = ½·(1 + erff(x·(1/√2)))` and `φ(x) = β·expf(x·x·(−½))`, every
/// operation an f32 rounding ([`erff`], [`expf`]). Vectorised with the same bits by
/// `lanes::gelu_grad_f32_slice_on`.
#[inline]
pub fn gelu_gradf(x: f32) -> f32 {
    let cdf = 0.5 * (1.0 + erff(x * core::f32::consts::FRAC_1_SQRT_2));
    let pdf = GELU_BETA_F32 * expf(x * x * -0.5);
    cdf + x * pdf
}
/// The logistic function in f32 (PyTorch's formula). Error below 2.5 ulps (2.480 at most
/// over every f32 input), except where `e^-x` overflows (`x < −88.72`): `+0` there, the exact value
/// being below `f32::MIN_POSITIVE`.
#[inline]
pub fn sigmoidf(x: f32) -> f32 {
    1.0 / (1.0 + expf(-x))
}

/// Vectorised twins of the f32 functions above: the same bits, many elements at a time.
///
/// Each twin follows its scalar function's algorithm (the `libm` crate's) operation for
/// operation, but computes every branch and selects the result instead of jumping, so the
/// compiler turns a loop of it into vector code. Only correctly rounded IEEE operations are used
/// (`+ − × ÷`, exact integer and bit operations, no fused multiply-add), so one element's bits do
/// not depend on the vector width: the portable path (scalar or SSE2), AVX2 and AVX-512 give the
/// scalar function's bits for every input (tested on every path over about 1.4 million edge,
/// sweep and random inputs per function; `tests/math_lanes.rs` also has exhaustive checks over
/// all 2³² f32 inputs, `#[ignore]`d for their run time).
pub mod lanes {
    use crate::isa::Isa;
    use core::mem::MaybeUninit;

    #[cfg(target_arch = "x86_64")]
    mod v64;

    /// The output of a slice kernel, which writes each element without reading it: an
    /// initialised `[T]` or unfilled `[MaybeUninit<T>]` (a new tensor's spare capacity, so
    /// that no zero-fill or copy through a buffer comes first). Sealed.
    pub trait OutSlice<T>: sealed::Sealed {
        /// The elements as cells the kernel writes.
        ///
        /// # Safety
        /// Only initialised values may be written through the result (a `[T]` must stay
        /// initialised).
        #[doc(hidden)]
        unsafe fn cells(&mut self) -> &mut [MaybeUninit<T>];
    }

    impl<T> OutSlice<T> for [T] {
        unsafe fn cells(&mut self) -> &mut [MaybeUninit<T>] {
            // SAFETY: `MaybeUninit<T>` has `T`'s layout; the caller writes only initialised
            // values, so the slice stays initialised.
            unsafe { &mut *(self as *mut [T] as *mut [MaybeUninit<T>]) }
        }
    }

    impl<T> OutSlice<T> for [MaybeUninit<T>] {
        unsafe fn cells(&mut self) -> &mut [MaybeUninit<T>] {
            self
        }
    }

    mod sealed {
        pub trait Sealed {}
        impl<T> Sealed for [T] {}
    }

    /// [`super::expf`] without branches: the same bits for every input.
    #[inline(always)]
    pub fn expf(x: f32) -> f32 {
        use expf_c::*;
        let hx = x.to_bits();
        let neg = hx >> 31 != 0;
        let ax = hx & 0x7fff_ffff;
        // k: the nearest integer to x/ln 2 (|x| > 1.5 ln 2), ±1 (|x| > ln 2 / 2), else 0. Inputs
        // beyond ±104 (inf, NaN included) are replaced by 0 so that the conversion is in range;
        // their result is selected below.
        let xr = if ax > 0x42d0_0000 { 0.0 } else { x };
        let t = INV_LN2 * xr + if neg { -0.5 } else { 0.5 };
        // SAFETY: |t| ≤ 104 · 1.45 + 0.5 < 2³¹, and t is not NaN.
        let kbig = unsafe { t.to_int_unchecked::<i32>() };
        let k = if ax > 0x3f85_1592 {
            kbig
        } else if ax > 0x3eb1_7218 {
            if neg { -1 } else { 1 }
        } else {
            0
        };
        let kf = k as f32;
        let hi = xr - kf * LN2_HI;
        let lo = kf * LN2_LO;
        let r = hi - lo;
        let xx = r * r;
        let c = r - xx * (P1 + xx * P2);
        let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
        // y · 2^k rounded once, as scalbnf: two exact power-of-two factors (each within the
        // normal range for k in [−150, 128]); the first product is exact, the second rounds.
        let ka = k >> 1;
        let kb = k - ka;
        let pa = f32::from_bits(((ka + 127) as u32) << 23);
        let pb = f32::from_bits(((kb + 127) as u32) << 23);
        let v = y * pa * pb;
        if ax > 0x7f80_0000 {
            x // NaN, as is
        } else if !neg && ax >= 0x42b1_7218 {
            f32::INFINITY // x ≥ 88.722839: overflow
        } else if neg && ax >= 0x42cf_f1b5 {
            0.0 // x ≤ −103.972084: underflow
        } else if ax <= 0x3900_0000 {
            1.0 + x // |x| ≤ 2⁻¹⁴
        } else {
            v
        }
    }

    /// [`super::exp`] without branches: the same bits for every input (the algorithm of
    /// [`expf`] in f64).
    #[inline(always)]
    pub fn exp(x: f64) -> f64 {
        use exp_c::*;
        let neg = x.to_bits() >> 63 != 0;
        let hx = (x.to_bits() >> 32) as u32 & 0x7fff_ffff; // the high word of |x|
        // Beyond ±746 (inf, NaN included) the result is selected below; 0 keeps k in range.
        let xr = if x.abs() <= 746.0 { x } else { 0.0 };
        let t = INVLN2 * xr + if neg { -0.5 } else { 0.5 };
        // SAFETY: |t| ≤ 746 · 1.45 + 0.5 < 2³¹, and t is not NaN.
        let kbig = unsafe { t.to_int_unchecked::<i32>() };
        let k = if hx >= 0x3ff0_a2b2 {
            kbig
        } else if hx > 0x3fd6_2e42 {
            if neg { -1 } else { 1 }
        } else {
            0
        };
        let kf = k as f64;
        let hi = xr - kf * LN2HI;
        let lo = kf * LN2LO;
        let r = hi - lo;
        let xx = r * r;
        let c = r - xx * (P1 + xx * (P2 + xx * (P3 + xx * (P4 + xx * P5))));
        let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
        // y · 2^k rounded once (k in [−1075, 1025]: two normal factors), as scalbn.
        let ka = k >> 1;
        let kb = k - ka;
        let pa = f64::from_bits(((ka + 1023) as u64) << 52);
        let pb = f64::from_bits(((kb + 1023) as u64) << 52);
        let v = y * pa * pb;
        if x.is_nan() {
            x
        } else if x > 709.782712893383973096 {
            f64::INFINITY
        } else if x < -745.13321910194110842 {
            0.0
        } else if hx <= 0x3e30_0000 {
            1.0 + x // |x| ≤ 2⁻²⁸
        } else {
            v
        }
    }

    /// [`exp`] near 0: for |x| < 1.5 ln 2 (high word of |x| below `0x3ff0_a2b2`: `k` is −1, 0
    /// or 1), and with `MID` for |x| < 2 (`k` from −3 to 3); the bits of the full form there,
    /// anything elsewhere. The same operations as [`exp`] on that range, without the pieces of
    /// other ranges (large `k`, overflow, underflow, NaN): `k` as a float (`t.trunc()` is
    /// `t as i32` for |t| < 4), and `y · 2^k` as one product, exact as `exp`'s two are there.
    /// GELU's f64 derivative in its small and mid ranges.
    #[inline(always)]
    fn exp_near0<const MID: bool>(x: f64) -> f64 {
        use exp_c::*;
        let neg = x.to_bits() >> 63 != 0;
        let hx = (x.to_bits() >> 32) as u32 & 0x7fff_ffff;
        let kf: f64 = if MID && hx >= 0x3ff0_a2b2 {
            (INVLN2 * x + if neg { -0.5 } else { 0.5 }).trunc()
        } else if hx > 0x3fd6_2e42 {
            if neg { -1.0 } else { 1.0 }
        } else {
            0.0
        };
        let hi = x - kf * LN2HI;
        let lo = kf * LN2LO;
        let r = hi - lo;
        let xx = r * r;
        let c = r - xx * (P1 + xx * (P2 + xx * (P3 + xx * (P4 + xx * P5))));
        let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
        // 2^k: the integer kf + 1023 sits in the low bits of kf + (2^52 + 1023), exactly;
        // shifted into the exponent field.
        let scale = f64::from_bits((kf + MAGIC).to_bits() << 52);
        let v = y * scale;
        if hx <= 0x3e30_0000 { 1.0 + x } else { v }
    }

    /// [`expf`] near 0, as [`exp_near0`] is to [`exp`]: for |x| < 1.5 ln 2 (`ax` not above
    /// `0x3f85_1592`: `k` is −1, 0 or 1), and with `MID` for |x| < 2 (`k` from −3 to 3); the
    /// bits of the full form there, anything elsewhere. The same operations as [`expf`] on that
    /// range without the pieces of other ranges: `k` as a float (`t.trunc()` is `t as i32` for
    /// |t| < 4), and `y · 2^k` as one product, exact as `expf`'s two are there. GELU's f32
    /// derivative in its small and mid ranges (its argument `−x²/2` is below 0.72 and 1.57 in
    /// magnitude there).
    #[inline(always)]
    fn expf_near0<const MID: bool>(x: f32) -> f32 {
        use expf_c::*;
        let neg = x.to_bits() >> 31 != 0;
        let ax = x.to_bits() & 0x7fff_ffff;
        let kf: f32 = if MID && ax > 0x3f85_1592 {
            (INV_LN2 * x + if neg { -0.5 } else { 0.5 }).trunc()
        } else if ax > 0x3eb1_7218 {
            if neg { -1.0 } else { 1.0 }
        } else {
            0.0
        };
        let hi = x - kf * LN2_HI;
        let lo = kf * LN2_LO;
        let r = hi - lo;
        let xx = r * r;
        let c = r - xx * (P1 + xx * P2);
        let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
        let scale = f32::from_bits((kf + MAGIC).to_bits() << 23);
        let v = y * scale;
        if ax <= 0x3900_0000 { 1.0 + x } else { v }
    }

    #[cfg(test)]
    mod near0_tests {
        /// [`super::expf_near0`] gives [`super::expf`]'s bits on its ranges: a stride through
        /// every f32 of magnitude below 1.5 ln 2 (both signs), and below 2 with `MID`.
        #[test]
        fn expf_near0_is_expf_on_its_ranges() {
            let check = |top: f32, mid: bool| {
                let mut n = 0;
                for sign in [0u32, 0x8000_0000] {
                    for b in (0..top.to_bits()).step_by(331).chain([top.to_bits() - 1]) {
                        let x = f32::from_bits(b | sign);
                        let got = if mid {
                            super::expf_near0::<true>(x)
                        } else {
                            super::expf_near0::<false>(x)
                        };
                        assert_eq!(got.to_bits(), super::expf(x).to_bits(), "{x:e} mid {mid}");
                        n += 1;
                    }
                }
                assert!(n > 6_000_000);
            };
            check(f32::from_bits(0x3f85_1593), false);
            check(2.0, true);
        }
    }

    /// The `libm` crate's constants of `expf`, as written there, shared by [`expf`] and
    /// [`expf_near0`] (one set of values, so one set of bits).
    mod expf_c {
        pub const LN2_HI: f32 = 6.9314575195e-01; // 0x3f317200: k·LN2_HI is exact
        pub const LN2_LO: f32 = 1.4286067653e-06; // 0x35bfbe8e
        pub const INV_LN2: f32 = 1.4426950216e+00; // 0x3fb8aa3b
        pub const P1: f32 = 1.6666625440e-1;
        pub const P2: f32 = -2.7667332906e-3;
        /// 2^23 + 127: `k + MAGIC` holds the biased exponent `k + 127` in its low mantissa
        /// bits (for small integers `k`).
        pub const MAGIC: f32 = 8_388_608.0 + 127.0;
    }

    /// The `libm` crate's constants of `exp` (f64), as written there, shared by the scalar
    /// form and its restricted and AVX2 versions (one set of values, so one set of bits).
    mod exp_c {
        pub const LN2HI: f64 = 6.93147180369123816490e-01; // k·LN2HI is exact
        pub const LN2LO: f64 = 1.90821492927058770002e-10;
        pub const INVLN2: f64 = core::f64::consts::LOG2_E; // libm's 1.44269504088896338700e+00
        pub const P1: f64 = 1.66666666666666019037e-01;
        pub const P2: f64 = -2.77777777770155933842e-03;
        pub const P3: f64 = 6.61375632143793436117e-05;
        pub const P4: f64 = -1.65339022054652515390e-06;
        pub const P5: f64 = 4.13813679705723846039e-08;
        /// 2^52 + 1023: `k + MAGIC` holds the biased exponent `k + 1023` in its low mantissa
        /// bits (exactly, for small integer `k`), ready to shift into an exponent field.
        pub const MAGIC: f64 = 4_503_599_627_370_496.0 + 1023.0;
    }

    /// The `libm` crate's coefficients of `erff`, as written there.
    mod erff_c {
        pub const ERX: f32 = 8.4506291151e-01;
        pub const EFX8: f32 = 1.0270333290e+00;
        pub const PP0: f32 = 1.2837916613e-01;
        pub const PP1: f32 = -3.2504209876e-01;
        pub const PP2: f32 = -2.8481749818e-02;
        pub const PP3: f32 = -5.7702702470e-03;
        pub const PP4: f32 = -2.3763017452e-05;
        pub const QQ1: f32 = 3.9791721106e-01;
        pub const QQ2: f32 = 6.5022252500e-02;
        pub const QQ3: f32 = 5.0813062117e-03;
        pub const QQ4: f32 = 1.3249473704e-04;
        pub const QQ5: f32 = -3.9602282413e-06;
        pub const PA0: f32 = -2.3621185683e-03;
        pub const PA1: f32 = 4.1485610604e-01;
        pub const PA2: f32 = -3.7220788002e-01;
        pub const PA3: f32 = 3.1834661961e-01;
        pub const PA4: f32 = -1.1089469492e-01;
        pub const PA5: f32 = 3.5478305072e-02;
        pub const PA6: f32 = -2.1663755178e-03;
        pub const QA1: f32 = 1.0642088205e-01;
        pub const QA2: f32 = 5.4039794207e-01;
        pub const QA3: f32 = 7.1828655899e-02;
        pub const QA4: f32 = 1.2617121637e-01;
        pub const QA5: f32 = 1.3637083583e-02;
        pub const QA6: f32 = 1.1984500103e-02;
        pub const RA0: f32 = -9.8649440333e-03;
        pub const RA1: f32 = -6.9385856390e-01;
        pub const RA2: f32 = -1.0558626175e+01;
        pub const RA3: f32 = -6.2375331879e+01;
        pub const RA4: f32 = -1.6239666748e+02;
        pub const RA5: f32 = -1.8460508728e+02;
        pub const RA6: f32 = -8.1287437439e+01;
        pub const RA7: f32 = -9.8143291473e+00;
        pub const SA1: f32 = 1.9651271820e+01;
        pub const SA2: f32 = 1.3765776062e+02;
        pub const SA3: f32 = 4.3456588745e+02;
        pub const SA4: f32 = 6.4538726807e+02;
        pub const SA5: f32 = 4.2900814819e+02;
        pub const SA6: f32 = 1.0863500214e+02;
        pub const SA7: f32 = 6.5702495575e+00;
        pub const SA8: f32 = -6.0424413532e-02;
        pub const RB0: f32 = -9.8649431020e-03;
        pub const RB1: f32 = -7.9928326607e-01;
        pub const RB2: f32 = -1.7757955551e+01;
        pub const RB3: f32 = -1.6063638306e+02;
        pub const RB4: f32 = -6.3756646729e+02;
        pub const RB5: f32 = -1.0250950928e+03;
        pub const RB6: f32 = -4.8351919556e+02;
        pub const SB1: f32 = 3.0338060379e+01;
        pub const SB2: f32 = 3.2579251099e+02;
        pub const SB3: f32 = 1.5367296143e+03;
        pub const SB4: f32 = 3.1998581543e+03;
        pub const SB5: f32 = 2.5530502930e+03;
        pub const SB6: f32 = 4.7452853394e+02;
        pub const SB7: f32 = -2.2440952301e+01;
    }

    /// The `libm` crate's coefficients of `erf`, as written there.
    mod erf_c {
        pub const ERX: f64 = 8.45062911510467529297e-01;
        pub const EFX8: f64 = 1.02703333676410069053e+00;
        pub const PP0: f64 = 1.28379167095512558561e-01;
        pub const PP1: f64 = -3.25042107247001499370e-01;
        pub const PP2: f64 = -2.84817495755985104766e-02;
        pub const PP3: f64 = -5.77027029648944159157e-03;
        pub const PP4: f64 = -2.37630166566501626084e-05;
        pub const QQ1: f64 = 3.97917223959155352819e-01;
        pub const QQ2: f64 = 6.50222499887672944485e-02;
        pub const QQ3: f64 = 5.08130628187576562776e-03;
        pub const QQ4: f64 = 1.32494738004321644526e-04;
        pub const QQ5: f64 = -3.96022827877536812320e-06;
        pub const PA0: f64 = -2.36211856075265944077e-03;
        pub const PA1: f64 = 4.14856118683748331666e-01;
        pub const PA2: f64 = -3.72207876035701323847e-01;
        pub const PA3: f64 = 3.18346619901161753674e-01;
        pub const PA4: f64 = -1.10894694282396677476e-01;
        pub const PA5: f64 = 3.54783043256182359371e-02;
        pub const PA6: f64 = -2.16637559486879084300e-03;
        pub const QA1: f64 = 1.06420880400844228286e-01;
        pub const QA2: f64 = 5.40397917702171048937e-01;
        pub const QA3: f64 = 7.18286544141962662868e-02;
        pub const QA4: f64 = 1.26171219808761642112e-01;
        pub const QA5: f64 = 1.36370839120290507362e-02;
        pub const QA6: f64 = 1.19844998467991074170e-02;
        pub const RA0: f64 = -9.86494403484714822705e-03;
        pub const RA1: f64 = -6.93858572707181764372e-01;
        pub const RA2: f64 = -1.05586262253232909814e+01;
        pub const RA3: f64 = -6.23753324503260060396e+01;
        pub const RA4: f64 = -1.62396669462573470355e+02;
        pub const RA5: f64 = -1.84605092906711035994e+02;
        pub const RA6: f64 = -8.12874355063065934246e+01;
        pub const RA7: f64 = -9.81432934416914548592e+00;
        pub const SA1: f64 = 1.96512716674392571292e+01;
        pub const SA2: f64 = 1.37657754143519042600e+02;
        pub const SA3: f64 = 4.34565877475229228821e+02;
        pub const SA4: f64 = 6.45387271733267880336e+02;
        pub const SA5: f64 = 4.29008140027567833386e+02;
        pub const SA6: f64 = 1.08635005541779435134e+02;
        pub const SA7: f64 = 6.57024977031928170135e+00;
        pub const SA8: f64 = -6.04244152148580987438e-02;
        pub const RB0: f64 = -9.86494292470009928597e-03;
        pub const RB1: f64 = -7.99283237680523006574e-01;
        pub const RB2: f64 = -1.77579549177547519889e+01;
        pub const RB3: f64 = -1.60636384855821916062e+02;
        pub const RB4: f64 = -6.37566443368389627722e+02;
        pub const RB5: f64 = -1.02509513161107724954e+03;
        pub const RB6: f64 = -4.83519191608651397019e+02;
        pub const SB1: f64 = 3.03380607434824582924e+01;
        pub const SB2: f64 = 3.25792512996573918826e+02;
        pub const SB3: f64 = 1.53672958608443695994e+03;
        pub const SB4: f64 = 3.19985821950859553908e+03;
        pub const SB5: f64 = 2.55305040643316442583e+03;
        pub const SB6: f64 = 4.74528541206955367215e+02;
        pub const SB7: f64 = -2.24409524465858183362e+01;
    }

    /// A branch-free `erf` for one float type: every piece of the `libm` algorithm computed
    /// (|x| < 0.84375: a rational function; below 1.25: one around 1; below 6: `exp` of the
    /// Gaussian times a rational function of 1/x², the two parts of x² split as `libm` does;
    /// beyond: ±(1 − tiny)), the one for the input's range selected. `$upto_small` and
    /// `$upto_mid` are the same function restricted to |x| < 0.84375 and |x| < 1.25 (only the
    /// pieces of those ranges computed, the same bits there): a block of inputs all in range
    /// takes them (GELU's inputs mostly are).
    macro_rules! erf_lanes {
        ($(#[$doc:meta])* $name:ident, $upto_small:ident, $upto_mid:ident, $erfc1:ident,
         $small_hi:ident, $mid_hi:ident, $t:ty, $c:ident,
         $exp:ident, $hi:expr, $zmask:expr,
         $special:expr, $small:expr, $tiny:expr, $mid:expr, $split:expr, $big:expr, $one_minus:expr) => {
            /// The `upto_small` form is exact for inputs whose high word (`|x|`'s bits; f64:
            /// their top 32) is below this.
            pub const $small_hi: u32 = $small;
            /// The `upto_mid` form is exact for inputs whose high word is below this.
            pub const $mid_hi: u32 = $mid;

            /// The erf of `x` for |x| < 0.84375 (high word below the `small` threshold): the
            /// bits of the full function there, anything elsewhere.
            #[inline(always)]
            pub fn $upto_small(x: $t) -> $t {
                use $c::*;
                let ix: u32 = $hi(x);
                // |x| < 2^-28 (f32: 2^-28 as well): x·(1 + EFX) without underflow.
                let tiny = 0.125 * (8.0 * x + EFX8 * x);
                let z = x * x;
                let r = PP0 + z * (PP1 + z * (PP2 + z * (PP3 + z * PP4)));
                let s = 1.0 + z * (QQ1 + z * (QQ2 + z * (QQ3 + z * (QQ4 + z * QQ5))));
                let small = x + x * (r / s);
                if ix < $tiny { tiny } else { small }
            }

            /// `1 − erf(|x|)` for 0.84375 ≤ |x| < 1.25 (as `libm` computes it there).
            #[inline(always)]
            fn $erfc1(a: $t) -> $t {
                use $c::*;
                let s1 = a - 1.0;
                let p = PA0 + s1 * (PA1 + s1 * (PA2 + s1 * (PA3 + s1 * (PA4 + s1 * (PA5 + s1 * PA6)))));
                let q = 1.0 + s1 * (QA1 + s1 * (QA2 + s1 * (QA3 + s1 * (QA4 + s1 * (QA5 + s1 * QA6)))));
                1.0 - ERX - p / q
            }

            /// The erf of `x` for |x| < 1.25 (high word below the `mid` threshold): the bits
            /// of the full function there, anything elsewhere.
            #[inline(always)]
            pub fn $upto_mid(x: $t) -> $t {
                let ix: u32 = $hi(x);
                let y = 1.0 - $erfc1(x.abs());
                if ix < $small {
                    $upto_small(x)
                } else if x.is_sign_negative() {
                    -y
                } else {
                    y
                }
            }

            $(#[$doc])*
            #[inline(always)]
            pub fn $name(x: $t) -> $t {
                use $c::*;
                let neg = x.is_sign_negative();
                let ix: u32 = $hi(x);
                let a = x.abs();
                let small = $upto_small(x);
                // [0.84375, 1.25)
                let erfc1 = $erfc1(a);
                // [1.25, 6): one Horner form, its coefficients chosen by range (RB7 = SB8 = 0
                // adds exact zeros: the bits of the shorter form).
                let w = 1.0 / (a * a);
                let ra = ix < $split;
                let pick = |u: $t, v: $t| if ra { u } else { v };
                let rr = pick(RA0, RB0)
                    + w * (pick(RA1, RB1)
                        + w * (pick(RA2, RB2)
                            + w * (pick(RA3, RB3)
                                + w * (pick(RA4, RB4)
                                    + w * (pick(RA5, RB5) + w * (pick(RA6, RB6) + w * pick(RA7, 0.0)))))));
                let ss = 1.0
                    + w * (pick(SA1, SB1)
                        + w * (pick(SA2, SB2)
                            + w * (pick(SA3, SB3)
                                + w * (pick(SA4, SB4)
                                    + w * (pick(SA5, SB5)
                                        + w * (pick(SA6, SB6) + w * (pick(SA7, SB7) + w * pick(SA8, 0.0))))))));
                let zb = <$t>::from_bits(a.to_bits() & $zmask);
                let tail = $exp(-zb * zb - 0.5625) * $exp((zb - a) * (zb + a) + rr / ss) / a;
                let y = if ix < $mid {
                    1.0 - erfc1
                } else if ix < $big {
                    1.0 - tail
                } else {
                    $one_minus
                };
                let special = 1.0 - 2.0 * (if neg { 1.0 } else { 0.0 }) + 1.0 / x;
                if ix >= $special {
                    special // erf(NaN) = NaN, erf(±inf) = ±1
                } else if ix < $small {
                    small
                } else if neg {
                    -y
                } else {
                    y
                }
            }
        };
    }

    erf_lanes!(
        /// [`super::erff`] without branches: the same bits for every input.
        erff, erff_upto_small, erff_upto_mid, erfc1f, ERFF_SMALL_HI, ERFF_MID_HI, f32, erff_c, expf, |x: f32| x.to_bits() & 0x7fff_ffff, 0xffff_e000,
        0x7f80_0000, 0x3f58_0000, 0x3180_0000, 0x3fa0_0000, 0x4036_db6d, 0x40c0_0000,
        1.0 - f32::from_bits(0x0380_0000)
    );
    erf_lanes!(
        /// [`super::erf`] without branches: the same bits for every input.
        erf, erf_upto_small, erf_upto_mid, erfc1, ERF_SMALL_HI, ERF_MID_HI, f64, erf_c, exp, |x: f64| (x.to_bits() >> 32) as u32 & 0x7fff_ffff,
        0xffff_ffff_0000_0000, 0x7ff0_0000, 0x3feb_0000, 0x3e30_0000, 0x3ff4_0000, 0x4006_db6d,
        0x4018_0000, 1.0 - f64::from_bits(0x0010_0000_0000_0000)
    );

    /// GELU's value and derivative (exact form) in the three ranges of the erf forms above:
    /// `$full` everywhere, `$small` where the erf argument is below 0.84375 in magnitude, `$mid`
    /// below 1.25 (the same bits there).
    macro_rules! gelu_fns {
        ($t:ty, $half_sqrt2:expr, $full:ident, $small:ident, $mid:ident,
         $erf:ident, $erf_small:ident, $erf_mid:ident) => {
            #[inline(always)]
            fn $full(x: $t) -> $t {
                x * 0.5 * (1.0 + $erf(x * $half_sqrt2))
            }
            #[inline(always)]
            fn $small(x: $t) -> $t {
                x * 0.5 * (1.0 + $erf_small(x * $half_sqrt2))
            }
            #[inline(always)]
            fn $mid(x: $t) -> $t {
                x * 0.5 * (1.0 + $erf_mid(x * $half_sqrt2))
            }
        };
    }
    gelu_fns!(
        f32,
        core::f32::consts::FRAC_1_SQRT_2,
        gelu32,
        gelu32_small,
        gelu32_mid,
        erff,
        erff_upto_small,
        erff_upto_mid
    );
    gelu_fns!(
        f64,
        core::f64::consts::FRAC_1_SQRT_2,
        gelu64,
        gelu64_small,
        gelu64_mid,
        erf,
        erf_upto_small,
        erf_upto_mid
    );

    /// d/dx of `x · Φ(x)` (`Φ(x) + x · φ(x)`, in f64) with the erf form `$erf` and the exp
    /// form `$exp`.
    macro_rules! gelu_grad_fns {
        ($g64:ident, $erf:ident, $exp:path) => {
            #[inline(always)]
            fn $g64(x: f64) -> f64 {
                let cdf = 0.5 * (1.0 + $erf(x * core::f64::consts::FRAC_1_SQRT_2));
                let pdf = $exp(-0.5 * x * x)
                    * (0.5 * core::f64::consts::FRAC_2_SQRT_PI)
                    * core::f64::consts::FRAC_1_SQRT_2;
                cdf + x * pdf
            }
        };
    }
    gelu_grad_fns!(gelu_grad64, erf, exp);
    // Small range: |x| < 0.84375 · √2, so x²/2 < 0.712 (below 1.5 ln 2); mid: |x| < 1.25 · √2,
    // so x²/2 < 1.563 (below 2).
    gelu_grad_fns!(gelu_grad64_small, erf_upto_small, exp_near0::<false>);
    gelu_grad_fns!(gelu_grad64_mid, erf_upto_mid, exp_near0::<true>);

    /// [`super::gelu_gradf`] with the erff form `$erf` and the expf form `$exp` (the bits of
    /// the scalar function wherever those forms have them).
    macro_rules! gelu_grad32_fns {
        ($g32:ident, $erf:ident, $exp:path) => {
            #[inline(always)]
            fn $g32(x: f32) -> f32 {
                let cdf = 0.5 * (1.0 + $erf(x * core::f32::consts::FRAC_1_SQRT_2));
                let pdf = super::GELU_BETA_F32 * $exp(x * x * -0.5);
                cdf + x * pdf
            }
        };
    }
    gelu_grad32_fns!(gelu_grad32, erff, expf);
    // As for f64: small range, x²/2 < 0.712 (below 1.5 ln 2); mid, x²/2 < 1.563 (below 2).
    gelu_grad32_fns!(gelu_grad32_small, erff_upto_small, expf_near0::<false>);
    gelu_grad32_fns!(gelu_grad32_mid, erff_upto_mid, expf_near0::<true>);

    /// `y[i] = gelu(src[i])` and `d[i] = gelu'(src[i])` in f32 in one pass (the bits of
    /// [`gelu_f32_slice_on`] and [`gelu_grad_f32_slice_on`]), on the path `isa`, for the first
    /// `min(len)` elements; blocks of 16 in the small or mid erf range take that range's forms,
    /// as those kernels do. Each element's value and derivative are the two scalar forms side
    /// by side: their common `erff(x·(1/√2))` is one computation once inlined, so the pair costs
    /// one erf, not two.
    pub fn gelu_and_grad_f32_slice_on<Y, D>(isa: Isa, src: &[f32], y: &mut Y, d: &mut D)
    where
        Y: OutSlice<f32> + ?Sized,
        D: OutSlice<f32> + ?Sized,
    {
        // SAFETY: every element written below is a value.
        let (y, d) = unsafe { (y.cells(), d.cells()) };
        #[inline(always)]
        fn body(src: &[f32], y: &mut [MaybeUninit<f32>], d: &mut [MaybeUninit<f32>]) {
            const N: usize = 16;
            let n = src.len().min(y.len()).min(d.len());
            let (src, y, d) = (&src[..n], &mut y[..n], &mut d[..n]);
            // A block of `N` with the value form `$v` and the derivative form `$g` (inlined,
            // so that the shared erf is computed once; fixed-size blocks, so the loop is
            // vectorised).
            macro_rules! block {
                ($s:expr, $y:expr, $d:expr, $v:ident, $g:ident) => {
                    for i in 0..N {
                        $y[i] = MaybeUninit::new($v($s[i]));
                        $d[i] = MaybeUninit::new($g($s[i]));
                    }
                };
            }
            let blocks = src
                .chunks_exact(N)
                .zip(y.chunks_exact_mut(N))
                .zip(d.chunks_exact_mut(N));
            for ((s, yb), db) in blocks {
                let s: &[f32; N] = s.try_into().expect("a block of N");
                let yb: &mut [MaybeUninit<f32>; N] = yb.try_into().expect("a block of N");
                let db: &mut [MaybeUninit<f32>; N] = db.try_into().expect("a block of N");
                let m = s.iter().fold(0u32, |m, &x| m.max(hi_f32(x)));
                // NaN arguments have the largest high words: the full forms.
                if m < ERFF_SMALL_HI {
                    block!(s, yb, db, gelu32_small, gelu_grad32_small);
                } else if m < ERFF_MID_HI {
                    block!(s, yb, db, gelu32_mid, gelu_grad32_mid);
                } else {
                    block!(s, yb, db, gelu32, gelu_grad32);
                }
            }
            for i in n - n % N..n {
                y[i] = MaybeUninit::new(gelu32(src[i]));
                d[i] = MaybeUninit::new(gelu_grad32(src[i]));
            }
        }
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f")]
            fn avx512(src: &[f32], y: &mut [MaybeUninit<f32>], d: &mut [MaybeUninit<f32>]) {
                body(src, y, d)
            }
            #[target_feature(enable = "avx2,fma")]
            fn avx2(src: &[f32], y: &mut [MaybeUninit<f32>], d: &mut [MaybeUninit<f32>]) {
                body(src, y, d)
            }
            match isa {
                // SAFETY: the CPU has AVX-512F (checked).
                Isa::Avx512 if isa.available() => return unsafe { avx512(src, y, d) },
                // SAFETY: the CPU has AVX2 and FMA (checked).
                Isa::Avx2 if isa.available() => return unsafe { avx2(src, y, d) },
                _ => {}
            }
        }
        let _ = isa;
        body(src, y, d)
    }

    /// The erf argument's high word for GELU of an f32 (computed in f32) ...
    #[inline(always)]
    fn hi_f32(x: f32) -> u32 {
        (x * core::f32::consts::FRAC_1_SQRT_2).to_bits() & 0x7fff_ffff
    }
    /// ... and of an f64.
    #[inline(always)]
    fn hi_f64(x: f64) -> u32 {
        ((x * core::f64::consts::FRAC_1_SQRT_2).to_bits() >> 32) as u32 & 0x7fff_ffff
    }

    /// A slice kernel `$name(isa, src, dst)` over blocks of 16: a block whose erf arguments all
    /// lie in the small (or mid) range of the erf forms computes only that range's pieces,
    /// else every piece; each element gets `$full`'s bits either way. One function per
    /// instruction set with the whole loop inside, so that nothing is left to a call per
    /// element (through a closure, the erf form was not inlined into the vector loop).
    macro_rules! gelu_kernel {
        ($(#[$doc:meta])* $name:ident, $t:ty, $hi:ident, $small_hi:expr, $mid_hi:expr,
         $full:ident, $small:ident, $mid:ident) => {
            $(#[$doc])*
            pub fn $name<D: OutSlice<$t> + ?Sized>(isa: Isa, src: &[$t], dst: &mut D) {
                // SAFETY: every element written below is a value.
                let dst = unsafe { dst.cells() };
                #[inline(always)]
                fn body(src: &[$t], dst: &mut [MaybeUninit<$t>]) {
                    const N: usize = 16;
                    let n = src.len().min(dst.len());
                    let (src, dst) = (&src[..n], &mut dst[..n]);
                    let mut sc = src.chunks_exact(N);
                    let mut dc = dst.chunks_exact_mut(N);
                    for (s, d) in (&mut sc).zip(&mut dc) {
                        let s: &[$t; N] = s.try_into().expect("a block of N");
                        let d: &mut [MaybeUninit<$t>; N] = d.try_into().expect("a block of N");
                        let mut m = 0u32;
                        for &x in s {
                            m = m.max($hi(x));
                        }
                        // NaN arguments have the largest high words: the full form.
                        if m < $small_hi {
                            for i in 0..N {
                                d[i] = MaybeUninit::new($small(s[i]));
                            }
                        } else if m < $mid_hi {
                            for i in 0..N {
                                d[i] = MaybeUninit::new($mid(s[i]));
                            }
                        } else {
                            for i in 0..N {
                                d[i] = MaybeUninit::new($full(s[i]));
                            }
                        }
                    }
                    for (d, &x) in dc.into_remainder().iter_mut().zip(sc.remainder()) {
                        *d = MaybeUninit::new($full(x));
                    }
                }
                #[cfg(target_arch = "x86_64")]
                {
                    #[target_feature(enable = "avx512f")]
                    fn avx512(src: &[$t], dst: &mut [MaybeUninit<$t>]) {
                        body(src, dst)
                    }
                    #[target_feature(enable = "avx2,fma")]
                    fn avx2(src: &[$t], dst: &mut [MaybeUninit<$t>]) {
                        body(src, dst)
                    }
                    match isa {
                        // SAFETY: the CPU has AVX-512F (checked).
                        Isa::Avx512 if isa.available() => return unsafe { avx512(src, dst) },
                        // SAFETY: the CPU has AVX2 and FMA (checked).
                        Isa::Avx2 if isa.available() => return unsafe { avx2(src, dst) },
                        _ => {}
                    }
                }
                let _ = isa;
                body(src, dst)
            }
        };
    }

    /// `expm1f` (the `libm` crate's) without branches, for the arguments [`tanhf`] gives it:
    /// finite, `x ≤ 20` (k ≤ 29) and `x ≥ −0.6` (k ≥ −1). The same bits as `libm::expm1f`
    /// there; other inputs must be replaced (clamped) by the caller and their lane discarded.
    #[inline(always)]
    fn expm1f_tanh(x: f32) -> f32 {
        const LN2_HI: f32 = 6.9313812256e-01; // 0x3f317180
        const LN2_LO: f32 = 9.0580006145e-06; // 0x3717f7d1
        const INV_LN2: f32 = 1.4426950216e+00; // 0x3fb8aa3b
        const Q1: f32 = -3.3333212137e-2;
        const Q2: f32 = 1.5807170421e-3;
        let hx = x.to_bits() & 0x7fff_ffff;
        let neg = x.to_bits() >> 31 != 0;
        let t0 = INV_LN2 * x + if neg { -0.5 } else { 0.5 };
        // SAFETY: |x| ≤ 20 keeps |t0| < 2³¹, and x is not NaN.
        let kbig = unsafe { t0.to_int_unchecked::<i32>() };
        let k = if hx > 0x3eb1_7218 {
            if hx < 0x3f85_1592 {
                if neg { -1 } else { 1 }
            } else {
                kbig
            }
        } else {
            0
        };
        // k = 0 and k = ±1 take this form too: t·LN2_HI and t·LN2_LO are then exact.
        let t = k as f32;
        let hi = x - t * LN2_HI;
        let lo = t * LN2_LO;
        let xr = hi - lo;
        let c = (hi - xr) - lo;
        let hfx = 0.5 * xr;
        let hxs = xr * hfx;
        let r1 = 1.0 + hxs * (Q1 + hxs * Q2);
        let tt = 3.0 - r1 * hfx;
        let e = hxs * ((r1 - tt) / (6.0 - xr * tt));
        let y0 = xr - (xr * e - hxs);
        let e2 = xr * (e - c) - c - hxs;
        let ym1 = 0.5 * (xr - e2) - 0.5;
        let y1 = if xr < -0.25 {
            -2.0 * (e2 - (xr + 0.5))
        } else {
            1.0 + 2.0 * (xr - e2)
        };
        let twopk = f32::from_bits(((0x7f + k) << 23) as u32);
        let uf = f32::from_bits(((0x7f - k) << 23) as u32);
        let ylt = (xr - e2 + (1.0 - uf)) * twopk;
        let yge = (xr - (e2 + uf) + 1.0) * twopk;
        if hx < 0x3300_0000 {
            x // |x| < 2⁻²⁵
        } else if k == 0 {
            y0
        } else if k == -1 {
            ym1
        } else if k == 1 {
            y1
        } else if k < 23 {
            ylt
        } else {
            yge
        }
    }

    /// `expm1` (the `libm` crate's) without branches, for the arguments [`tanh`] gives it:
    /// finite, `x ≤ 40` (k ≤ 58) and `x ≥ −0.6` (k ≥ −1). The same bits as `libm::expm1`
    /// there; other inputs must be replaced by the caller and their lane discarded.
    #[inline(always)]
    fn expm1_tanh(x: f64) -> f64 {
        const LN2_HI: f64 = 6.93147180369123816490e-01;
        const LN2_LO: f64 = 1.90821492927058770002e-10;
        const INVLN2: f64 = core::f64::consts::LOG2_E; // libm's 1.44269504088896338700e+00
        const Q1: f64 = -3.33333333333331316428e-02;
        const Q2: f64 = 1.58730158725481460165e-03;
        const Q3: f64 = -7.93650757867487942473e-05;
        const Q4: f64 = 4.00821782732936239552e-06;
        const Q5: f64 = -2.01099218183624371326e-07;
        let hx = (x.to_bits() >> 32) as u32 & 0x7fff_ffff;
        let neg = x.to_bits() >> 63 != 0;
        let t0 = INVLN2 * x + if neg { -0.5 } else { 0.5 };
        // SAFETY: |x| ≤ 40 keeps |t0| < 2³¹, and x is not NaN.
        let kbig = unsafe { t0.to_int_unchecked::<i32>() };
        let k = if hx > 0x3fd6_2e42 {
            if hx < 0x3ff0_a2b2 {
                if neg { -1 } else { 1 }
            } else {
                kbig
            }
        } else {
            0
        };
        let t = k as f64;
        let hi = x - t * LN2_HI;
        let lo = t * LN2_LO;
        let xr = hi - lo;
        let c = (hi - xr) - lo;
        let hfx = 0.5 * xr;
        let hxs = xr * hfx;
        let r1 = 1.0 + hxs * (Q1 + hxs * (Q2 + hxs * (Q3 + hxs * (Q4 + hxs * Q5))));
        let tt = 3.0 - r1 * hfx;
        let e = hxs * ((r1 - tt) / (6.0 - xr * tt));
        let y0 = xr - (xr * e - hxs);
        let e2 = xr * (e - c) - c - hxs;
        let ym1 = 0.5 * (xr - e2) - 0.5;
        let y1 = if xr < -0.25 {
            -2.0 * (e2 - (xr + 0.5))
        } else {
            1.0 + 2.0 * (xr - e2)
        };
        let twopk = f64::from_bits(((0x3ff + k) as u64) << 52);
        let uf = f64::from_bits(((0x3ff - k) as u64) << 52);
        let yfar = (xr - e2 + 1.0) * twopk - 1.0;
        let ylt = (xr - e2 + (1.0 - uf)) * twopk;
        let yge = (xr - (e2 + uf) + 1.0) * twopk;
        if hx < 0x3c90_0000 {
            x // |x| < 2⁻⁵⁴
        } else if k == 0 {
            y0
        } else if k == -1 {
            ym1
        } else if k == 1 {
            y1
        } else if k > 56 {
            yfar
        } else if k < 20 {
            ylt
        } else {
            yge
        }
    }

    /// [`super::tanhf`] without branches: the same bits for every input.
    #[inline(always)]
    pub fn tanhf(x: f32) -> f32 {
        let ix = x.to_bits();
        let sign = ix >> 31 != 0;
        let w = ix & 0x7fff_ffff;
        let a = f32::from_bits(w);
        // expm1f's argument: 2|x| above log(5/3)/2, −2|x| below; 0 beyond 10 (inf, NaN
        // included), whose result is selected below.
        let arg = if w > 0x4120_0000 {
            0.0
        } else if w > 0x3e82_c578 {
            2.0 * a
        } else {
            -2.0 * a
        };
        let t = expm1f_tanh(arg);
        let r = if w > 0x4120_0000 {
            1.0 + 0.0 / a // |x| > 10 or NaN
        } else if w > 0x3f0c_9f54 {
            1.0 - 2.0 / (t + 2.0)
        } else if w > 0x3e82_c578 {
            t / (t + 2.0)
        } else if w >= 0x0080_0000 {
            -t / (t + 2.0)
        } else {
            a // subnormal or zero
        };
        if sign { -r } else { r }
    }

    /// [`super::tanh`] without branches: the same bits for every input.
    #[inline(always)]
    pub fn tanh(x: f64) -> f64 {
        let ui = x.to_bits();
        let sign = ui >> 63 != 0;
        let a = f64::from_bits(ui & !(1 << 63));
        let w = (a.to_bits() >> 32) as u32;
        let arg = if w > 0x4034_0000 {
            0.0
        } else if w > 0x3fd0_58ae {
            2.0 * a
        } else {
            -2.0 * a
        };
        let t = expm1_tanh(arg);
        let r = if w > 0x4034_0000 {
            1.0 - 0.0 / a // |x| > 20 or NaN
        } else if w > 0x3fe1_93ea {
            1.0 - 2.0 / (t + 2.0)
        } else if w > 0x3fd0_58ae {
            t / (t + 2.0)
        } else if w >= 0x0010_0000 {
            -t / (t + 2.0)
        } else {
            a // subnormal or zero
        };
        if sign { -r } else { r }
    }

    /// [`super::lnf`] without branches: the same bits for every input.
    #[inline(always)]
    #[allow(clippy::eq_op)] // `(x − x) / 0`: libm's NaN for negative x, bit for bit
    pub fn lnf(x: f32) -> f32 {
        const LN2_HI: f32 = 6.9313812256e-01; // 0x3f317180
        const LN2_LO: f32 = 9.0580006145e-06; // 0x3717f7d1
        const LG1: f32 = 0.66666662693;
        const LG2: f32 = 0.40000972152;
        const LG3: f32 = 0.28498786688;
        const LG4: f32 = 0.24279078841;
        let ix0 = x.to_bits();
        // Below 2⁻¹²⁶ or negative: subnormals are scaled by 2²⁵, the rest selected below.
        let low = ix0 < 0x0080_0000 || ix0 >> 31 != 0;
        let xs = if low {
            x * f32::from_bits(0x4c00_0000)
        } else {
            x
        };
        let k0 = if low { -25 } else { 0 };
        // Reduce into [√2/2, √2] (wrapping: negative inputs' lanes are discarded).
        let ix = xs.to_bits().wrapping_add(0x3f80_0000 - 0x3f35_04f3);
        let k = k0 + (ix >> 23) as i32 - 0x7f;
        let m = f32::from_bits((ix & 0x007f_ffff) + 0x3f35_04f3);
        let f = m - 1.0;
        let s = f / (2.0 + f);
        let z = s * s;
        let w = z * z;
        let t1 = w * (LG2 + w * LG4);
        let t2 = z * (LG1 + w * LG3);
        let r = t2 + t1;
        let hfsq = 0.5 * f * f;
        let dk = k as f32;
        let v = s * (hfsq + r) + dk * LN2_LO - hfsq + f + dk * LN2_HI;
        if ix0 << 1 == 0 {
            -1.0 / (x * x) // ±0: −inf
        } else if ix0 >> 31 != 0 {
            (x - x) / 0.0 // negative: NaN
        } else if ix0 >= 0x7f80_0000 {
            x // +inf, NaN
        } else if ix0 == 0x3f80_0000 {
            0.0
        } else {
            v
        }
    }

    /// [`super::ln`] without branches: the same bits for every input.
    #[inline(always)]
    #[allow(clippy::eq_op)] // `(x − x) / 0`: libm's NaN for negative x, bit for bit
    pub fn ln(x: f64) -> f64 {
        const LN2_HI: f64 = 6.93147180369123816490e-01;
        const LN2_LO: f64 = 1.90821492927058770002e-10;
        const LG1: f64 = 6.666666666666735130e-01;
        const LG2: f64 = 3.999999999940941908e-01;
        const LG3: f64 = 2.857142874366239149e-01;
        const LG4: f64 = 2.222219843214978396e-01;
        const LG5: f64 = 1.818357216161805012e-01;
        const LG6: f64 = 1.531383769920937332e-01;
        const LG7: f64 = 1.479819860511658591e-01;
        let ui0 = x.to_bits();
        let hx0 = (ui0 >> 32) as u32;
        let low = hx0 < 0x0010_0000 || hx0 >> 31 != 0;
        let xs = if low {
            x * f64::from_bits(0x4350_0000_0000_0000)
        } else {
            x
        };
        let k0 = if low { -54 } else { 0 };
        let ui = xs.to_bits();
        let hx = ((ui >> 32) as u32).wrapping_add(0x3ff0_0000 - 0x3fe6_a09e);
        let k = k0 + (hx >> 20) as i32 - 0x3ff;
        let hm = (hx & 0x000f_ffff) + 0x3fe6_a09e;
        let m = f64::from_bits((hm as u64) << 32 | (ui & 0xffff_ffff));
        let f = m - 1.0;
        let hfsq = 0.5 * f * f;
        let s = f / (2.0 + f);
        let z = s * s;
        let w = z * z;
        let t1 = w * (LG2 + w * (LG4 + w * LG6));
        let t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
        let r = t2 + t1;
        let dk = k as f64;
        let v = s * (hfsq + r) + dk * LN2_LO - hfsq + f + dk * LN2_HI;
        if ui0 << 1 == 0 {
            -1.0 / (x * x) // ±0: −inf
        } else if hx0 >> 31 != 0 {
            (x - x) / 0.0 // negative: NaN
        } else if hx0 >= 0x7ff0_0000 {
            x // +inf, NaN
        } else if ui0 == 0x3ff0_0000_0000_0000 {
            0.0
        } else {
            v
        }
    }

    /// `pub fn $name(isa, src, dst)`: `dst[i] = $lane(src[i])` for the first `min(len)`
    /// elements, one `#[target_feature]` loop per path with the lane function inlined into it
    /// (no closure in between: one that was not inlined made GELU 2× slower).
    macro_rules! slice_fn {
        ($(#[$doc:meta])* $name:ident, $t:ty, $lane:ident) => {
            $(#[$doc])*
            pub fn $name<D: OutSlice<$t> + ?Sized>(isa: Isa, src: &[$t], dst: &mut D) {
                // SAFETY: every element written below is a value.
                let dst = unsafe { dst.cells() };
                #[inline(always)]
                fn body(src: &[$t], dst: &mut [MaybeUninit<$t>]) {
                    for (d, &s) in dst.iter_mut().zip(src) {
                        *d = MaybeUninit::new($lane(s));
                    }
                }
                #[cfg(target_arch = "x86_64")]
                {
                    #[target_feature(enable = "avx512f")]
                    fn avx512(src: &[$t], dst: &mut [MaybeUninit<$t>]) {
                        body(src, dst)
                    }
                    #[target_feature(enable = "avx2,fma")]
                    fn avx2(src: &[$t], dst: &mut [MaybeUninit<$t>]) {
                        body(src, dst)
                    }
                    match isa {
                        // SAFETY: the CPU has AVX-512F (checked).
                        Isa::Avx512 if isa.available() => return unsafe { avx512(src, dst) },
                        // SAFETY: the CPU has AVX2 and FMA (checked).
                        Isa::Avx2 if isa.available() => return unsafe { avx2(src, dst) },
                        _ => {}
                    }
                }
                let _ = isa;
                body(src, dst)
            }
        };
    }

    gelu_kernel!(
        /// `dst[i] = gelu(src[i])` in f32 (`x · ½ · (1 + erf(x / √2))` with [`super::erff`]:
        /// `Tensor::gelu`'s bits) on the path `isa`, for the first `min(len)` elements.
        gelu_f32_slice_on, f32, hi_f32, ERFF_SMALL_HI, ERFF_MID_HI, gelu32, gelu32_small,
        gelu32_mid
    );
    gelu_kernel!(
        /// `dst[i] = gelu(src[i])` in f64 (with [`super::erf`]) on the path `isa`.
        gelu_f64_slice_on, f64, hi_f64, ERF_SMALL_HI, ERF_MID_HI, gelu64, gelu64_small,
        gelu64_mid
    );
    gelu_kernel!(
        /// `dst[i] = gelu'(src[i])` in f32 (the bits of [`super::gelu_gradf`], PyTorch's
        /// formula in f32) on the path `isa`.
        gelu_grad_f32_slice_on, f32, hi_f32, ERFF_SMALL_HI, ERFF_MID_HI, gelu_grad32,
        gelu_grad32_small, gelu_grad32_mid
    );
    gelu_kernel!(
        /// `dst[i] = gelu'(src[i])` in f64 on the path `isa`.
        gelu_grad_f64_slice_on, f64, hi_f64, ERF_SMALL_HI, ERF_MID_HI, gelu_grad64,
        gelu_grad64_small, gelu_grad64_mid
    );
    slice_fn!(
        /// `dst[i] = tanhf(src[i])` (the bits of [`super::tanhf`]) on the path `isa`.
        tanhf_slice_on, f32, tanhf
    );
    slice_fn!(
        /// `dst[i] = tanh(src[i])` (the bits of [`super::tanh`]) on the path `isa`, as the
        /// compiler vectorises it (the x86 paths run [`tanh_slice_on`]'s kernel instead).
        tanh_slice_auto, f64, tanh
    );

    /// `dst[i] = tanh(src[i])` (the bits of [`super::tanh`]) on the path `isa`, for the first
    /// `min(len)` elements. The x86 paths run one kernel written over a vector of lanes
    /// (`v64::tanh`): four lanes on AVX2, eight on AVX-512 (on Zen 5 half the time of the
    /// four-lane kernel; `benches/math_lanes.rs`).
    pub fn tanh_slice_on<D: OutSlice<f64> + ?Sized>(isa: Isa, src: &[f64], dst: &mut D) {
        // SAFETY: every element written is a value.
        let dst = unsafe { dst.cells() };
        #[cfg(target_arch = "x86_64")]
        if matches!(isa, Isa::Avx512) && isa.available() {
            // SAFETY: the CPU has AVX-512F (checked).
            return unsafe { tanh_avx512(src, dst) };
        }
        #[cfg(target_arch = "x86_64")]
        if matches!(isa, Isa::Avx2 | Isa::Avx512) && Isa::Avx2.available() {
            // SAFETY: the CPU has AVX2 (checked).
            return unsafe { tanh_avx2(src, dst) };
        }
        tanh_slice_auto(isa, src, dst)
    }

    slice_fn!(
        /// `dst[i] = lnf(src[i])` (the bits of [`super::lnf`]) on the path `isa`.
        lnf_slice_on, f32, lnf
    );
    slice_fn!(
        /// `dst[i] = ln(src[i])` (the bits of [`super::ln`]) on the path `isa`.
        ln_slice_on, f64, ln
    );

    /// [`tanh`] four lanes at a time with AVX2 intrinsics (the loop of [`tanh`] is not vectorised
    /// for AVX2 by the compiler: its cost model refuses the divisions): `v64::tanh`, the same
    /// operations on the same values, so the same bits. Eight inputs all in the common range
    /// take a form without the other ranges' selects (see [`map4_avx2`]), with the same bits.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn tanh_avx2(src: &[f64], dst: &mut [MaybeUninit<f64>]) {
        use core::arch::x86_64::__m256d;
        // SAFETY: the CPU has AVX2 (the caller's contract). The closures are defined here so
        // that they are compiled for AVX2 too (a closure takes its function's features).
        unsafe {
            map4_avx2(
                src,
                dst,
                TANH_COMMON,
                |v| v64::tanh::<__m256d, true>(v),
                |v| v64::tanh::<__m256d, false>(v),
            )
        }
    }

    /// [`tanh_avx2`]'s operations on eight lanes in AVX-512's registers (`v64::tanh` again: the
    /// same bits). Per 64 Ki values on Zen 5 (two 512-bit FMA units): 106 µs, against 210 µs
    /// for the AVX2 kernel compiled for AVX-512VL (four 256-bit vectors per iteration).
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn tanh_avx512(src: &[f64], dst: &mut [MaybeUninit<f64>]) {
        use core::arch::x86_64::__m512d;
        // SAFETY: the CPU has AVX-512F (the caller's contract); closures defined here, as above.
        unsafe {
            v64::map8(
                src,
                dst,
                TANH_COMMON,
                |v| v64::tanh::<__m512d, true>(v),
                |v| v64::tanh::<__m512d, false>(v),
            )
        }
    }

    /// `v64::tanh`'s common range: 2⁻⁵⁵ ≤ |x| ≤ 6.5, where the argument of expm1 is not tiny (nor
    /// the input subnormal), k < 20, and |x| ≤ 20 (no NaN).
    #[cfg(target_arch = "x86_64")]
    const TANH_COMMON: (u64, u64) = (0x3c80_0000_0000_0000, 0x401a_0000_0000_0000);

    /// `dst[i] = f(src[i])` for the first `min(len)` elements, four f64 lanes per call of `f`:
    /// two independent vectors per iteration (each lane's long dependency chain of divisions
    /// and polynomial steps then overlaps another's: the loops of `exp`, `sigmoid` and `tanh`
    /// are bound by latency, not by their instruction count), then one, the last 1–3 elements
    /// through a masked load and store (the masked-off lanes compute on zeros and are never
    /// stored). Where all eight inputs of an iteration have `|x|`'s bits in `common`
    /// (inclusive), they go through `fast` instead, which must give `f`'s bits on that range
    /// (it leaves out the selects of the rare ranges: tiny, huge, infinite and NaN inputs). Each
    /// lane is independent, so the bits do not depend on the grouping.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn map4_avx2(
        src: &[f64],
        dst: &mut [MaybeUninit<f64>],
        common: (u64, u64),
        fast: impl Fn(core::arch::x86_64::__m256d) -> core::arch::x86_64::__m256d,
        f: impl Fn(core::arch::x86_64::__m256d) -> core::arch::x86_64::__m256d,
    ) {
        use core::arch::x86_64::*;
        let n = src.len().min(dst.len());
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr() as *mut f64);
        let mut i = 0;
        // SAFETY: every load reads src[i..i + w] and every store writes dst[i..i + w] with
        // i + w <= n; the masked pair touches only the lanes below n − i.
        unsafe {
            // |x|'s bits as i64 (non-negative), outside [lo, hi]: lo − 1 > b or b > hi.
            let abs = _mm256_set1_epi64x(i64::MAX);
            let (below, above) = (
                _mm256_set1_epi64x(common.0 as i64 - 1),
                _mm256_set1_epi64x(common.1 as i64),
            );
            let outside = |v: __m256d| {
                let b = _mm256_and_si256(_mm256_castpd_si256(v), abs);
                _mm256_or_si256(_mm256_cmpgt_epi64(below, b), _mm256_cmpgt_epi64(b, above))
            };
            // Each call's vectors written out as a tuple, no closures of our own around the
            // intrinsics: the compiler interleaves the independent chains.
            while i + 8 <= n {
                let (a, b) = (_mm256_loadu_pd(s.add(i)), _mm256_loadu_pd(s.add(i + 4)));
                let rare = _mm256_or_si256(outside(a), outside(b));
                let (ya, yb) = if _mm256_testz_si256(rare, rare) != 0 {
                    (fast(a), fast(b))
                } else {
                    (f(a), f(b))
                };
                _mm256_storeu_pd(d.add(i), ya);
                _mm256_storeu_pd(d.add(i + 4), yb);
                i += 8;
            }
            while i + 4 <= n {
                _mm256_storeu_pd(d.add(i), f(_mm256_loadu_pd(s.add(i))));
                i += 4;
            }
            if i < n {
                let r = (n - i) as i64;
                let mask = _mm256_cmpgt_epi64(_mm256_set1_epi64x(r), _mm256_set_epi64x(3, 2, 1, 0));
                let y = f(_mm256_maskload_pd(s.add(i), mask));
                _mm256_maskstore_pd(d.add(i), mask, y);
            }
        }
    }

    /// `dst[i] = f(src[i])` for the first `min(len)` elements, compiled for the instructions of
    /// `isa` (the portable loop if the CPU lacks them).
    #[inline(always)]
    pub(crate) fn map_on<T: Copy, U>(
        isa: Isa,
        src: &[T],
        dst: &mut [U],
        f: impl Fn(T) -> U + Copy,
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f")]
            fn avx512<T: Copy, U>(src: &[T], dst: &mut [U], f: impl Fn(T) -> U + Copy) {
                map_generic(src, dst, f)
            }
            #[target_feature(enable = "avx2,fma")]
            fn avx2<T: Copy, U>(src: &[T], dst: &mut [U], f: impl Fn(T) -> U + Copy) {
                map_generic(src, dst, f)
            }
            match isa {
                // SAFETY: the CPU has AVX-512F (checked).
                Isa::Avx512 if isa.available() => return unsafe { avx512(src, dst, f) },
                // SAFETY: the CPU has AVX2 and FMA (checked).
                Isa::Avx2 if isa.available() => return unsafe { avx2(src, dst, f) },
                _ => {}
            }
        }
        let _ = isa;
        map_generic(src, dst, f)
    }

    #[inline(always)]
    fn map_generic<T: Copy, U>(src: &[T], dst: &mut [U], f: impl Fn(T) -> U) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = f(s);
        }
    }

    /// `dst[i] = exp(src[i])` (the bits of [`super::exp`]) on the path `isa`.
    pub fn exp_slice_on(isa: Isa, src: &[f64], dst: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        if matches!(isa, Isa::Avx512) && isa.available() {
            // SAFETY: the CPU has AVX-512F (checked).
            return unsafe { exp_avx2::map512::<false>(src, dst) };
        }
        #[cfg(target_arch = "x86_64")]
        if matches!(isa, Isa::Avx2) && isa.available() {
            // SAFETY: the CPU has AVX2 (checked).
            return unsafe { exp_avx2::map::<false>(src, dst) };
        }
        map_on(isa, src, dst, exp)
    }

    /// `dst[i] = 1 / (1 + exp(−src[i]))` (`torch.sigmoid` in f64, with [`exp`]'s bits) on the
    /// path `isa`, for the first `min(len)` elements (on x86 `v64::sigmoid`, four or eight
    /// lanes, as [`tanh_slice_on`]; on Zen 5 eight lanes took 40.6 µs per 64 Ki values against
    /// 77 µs for four).
    pub fn sigmoid_slice_on(isa: Isa, src: &[f64], dst: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        if matches!(isa, Isa::Avx512) && isa.available() {
            // SAFETY: the CPU has AVX-512F (checked).
            return unsafe { exp_avx2::map512::<true>(src, dst) };
        }
        #[cfg(target_arch = "x86_64")]
        if matches!(isa, Isa::Avx2 | Isa::Avx512) && Isa::Avx2.available() {
            // SAFETY: the CPU has AVX2 (checked).
            return unsafe { exp_avx2::map::<true>(src, dst) };
        }
        map_on(isa, src, dst, |x: f64| 1.0 / (1.0 + exp(-x)))
    }

    /// [`exp`] and the f64 sigmoid over slices with `v64::exp` / `v64::sigmoid`: four lanes
    /// (AVX2) or eight (AVX-512) at a time (the compiler's vector loop of [`exp`], and of the
    /// sigmoid around it, converts k between integer widths and runs a scalar remainder; the
    /// AVX2 kernel took 13 % fewer samples in the LSTM-cell example's profile). The same
    /// operations on the same values, so the same bits (see `v64`).
    #[cfg(target_arch = "x86_64")]
    mod exp_avx2 {
        use super::v64;
        use core::arch::x86_64::{__m256d, __m512d};

        /// The common range of |x| (inclusive bit patterns): 2⁻²⁸ < |x| ≤ 708, where `exp`
        /// neither overflows nor underflows, x is not NaN and not in the `1 + x` range.
        const COMMON_RANGE: (u64, u64) = (0x3e30_0001_0000_0000, 0x4086_2000_0000_0000);

        /// `dst[i] = sigmoid(src[i])` (with `SIGMOID`) or `exp(src[i])`, four lanes at a time
        /// through [`super::map4_avx2`].
        ///
        /// # Safety
        /// The CPU must have AVX2.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn map<const SIGMOID: bool>(src: &[f64], dst: &mut [f64]) {
            // SAFETY: the CPU has AVX2 (the caller's contract). The closures are defined here
            // so that they are compiled for AVX2 too.
            unsafe {
                super::map4_avx2(
                    src,
                    // Every element written is a value.
                    super::OutSlice::cells(dst),
                    COMMON_RANGE,
                    |v| f::<__m256d, SIGMOID, true>(v),
                    |v| f::<__m256d, SIGMOID, false>(v),
                )
            }
        }

        /// [`map`]'s operations on eight lanes in AVX-512's registers: the same bits.
        ///
        /// # Safety
        /// The CPU must have AVX-512F.
        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn map512<const SIGMOID: bool>(src: &[f64], dst: &mut [f64]) {
            // SAFETY: the CPU has AVX-512F (the caller's contract); closures defined here.
            unsafe {
                v64::map8(
                    src,
                    // Every element written is a value.
                    super::OutSlice::cells(dst),
                    COMMON_RANGE,
                    |v| f::<__m512d, SIGMOID, true>(v),
                    |v| f::<__m512d, SIGMOID, false>(v),
                )
            }
        }

        /// `sigmoid` (with `SIGMOID`) or `exp` of every lane; with `COMMON`, only for lanes in
        /// [`COMMON_RANGE`].
        ///
        /// # Safety
        /// As [`v64::V64`].
        #[inline(always)]
        unsafe fn f<V: v64::V64, const SIGMOID: bool, const COMMON: bool>(v: V) -> V {
            // SAFETY: register operations only (the caller's contract).
            unsafe {
                if SIGMOID {
                    v64::sigmoid::<V, COMMON>(v)
                } else {
                    v64::exp::<V, COMMON>(v)
                }
            }
        }
    }

    /// `dst[i] = erff(src[i])` (the bits of [`super::erff`]) on the path `isa`.
    pub fn erff_slice_on(isa: Isa, src: &[f32], dst: &mut [f32]) {
        map_on(isa, src, dst, erff)
    }

    /// `dst[i] = erf(src[i])` (the bits of [`super::erf`]) on the path `isa`.
    pub fn erf_slice_on(isa: Isa, src: &[f64], dst: &mut [f64]) {
        map_on(isa, src, dst, erf)
    }

    /// `dst[i] = expf(src[i])` (the bits of [`super::expf`]) on the path `isa`.
    pub fn expf_slice_on(isa: Isa, src: &[f32], dst: &mut [f32]) {
        map_on(isa, src, dst, expf)
    }

    /// `dst[i] = expf(src[i])` (the bits of [`super::expf`]) on the path in use
    /// ([`Isa::best`]), for the first `min(src.len(), dst.len())` elements.
    pub fn expf_slice(src: &[f32], dst: &mut [f32]) {
        expf_slice_on(Isa::best(), src, dst)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn agrees_with_the_platform_to_an_ulp_on_a_few_points() {
        for &x in &[-3.5f64, -0.1, 0.0, 1e-9, 0.5, 2.0, 10.0] {
            let close = |a: f64, b: f64| (a - b).abs() <= 2.0 * f64::EPSILON * b.abs().max(1e-300);
            assert!(close(super::exp(x), x.exp()), "exp({x})");
            assert!(close(super::tanh(x), x.tanh()), "tanh({x})");
            assert!(close(super::ln_1p(x.abs()), x.abs().ln_1p()), "ln_1p({x})");
        }
    }
}
