//! NumPy 2.x random streams, bit for bit (verified against NumPy 2.4.6 on Linux x86-64).
//!
//! * [`RandomState`]: the legacy `np.random.RandomState` (MT19937; its stream is frozen by
//!   NumPy across versions), or `RandomState(BG(seed))` on any other [`BitGenerator`]
//!   ([`RandomState::from_bit_generator`]).
//! * [`SeedSequence`], [`Pcg64`] and [`Generator`]:
//!   `np.random.default_rng(seed)` = `Generator(PCG64(SeedSequence(seed)))`, or
//!   `Generator(BG(seed))` for `BG` = [`Mt19937`], [`Pcg64Dxsm`], [`Philox`], [`Sfc64`].
//! * Bounded integers for every NumPy integer dtype ([`IntDtype`]: `i8` … `u64`, `bool`):
//!   [`RandomState::randint`] (masked rejection) and [`Generator::integers`] (Lemire), with
//!   scalar or broadcast array bounds ([`RandomState::randint_array`],
//!   [`Generator::integers_array`]). NumPy draws these in the dtype's width: 8-bit, 16-bit
//!   and `bool` values are cut from 32-bit draws shared by one call, 64-bit dtypes take
//!   32-bit draws for ranges that fit in 32 bits, so the same range gives different streams
//!   for different dtypes, as it does in NumPy.
//! * [`Philox`] at another round count ([`Philox::with_rounds`], Random123's Philox4x64-R;
//!   NumPy itself only has 10 rounds) and the block function [`philox4x64`].
//!
//! Samplers fill a caller's slice: the slice length plays the role of NumPy's `size`, and
//! values come in C order. Float math that NumPy leaves to the C library goes through
//! lockstep's bit-exact ports of glibc's `log`, `exp` and `pow`
//! ([`glibc_math`](crate::compat::glibc_math): NumPy's Linux values on every platform) in the
//! distributions and the legacy Gaussian, and otherwise (`log1p`, `expm1`, `sqrt`, …) through
//! the platform C library: results equal NumPy's where that library is glibc (as on NumPy's
//! Linux wheels).
//!
//! ```
//! use lockstep_rng::compat::numpy::{RandomState, default_rng};
//! let mut rs = RandomState::new(0);
//! let mut x = [0.0; 2];
//! rs.random_sample(&mut x);
//! assert_eq!(x, [0.5488135039273248, 0.7151893663724195]);
//! let mut g = default_rng(0);
//! let mut y = [0.0; 1];
//! g.random(&mut y);
//! assert_eq!(y, [0.6369616873214543]);
//! ```

mod bit_generators;
mod distributions;
mod generator;
mod integers;
mod lapack;
mod legacy;
#[allow(clippy::unreadable_literal)]
mod mt19937_jump_poly;
mod multivariate;
mod seed_sequence;
mod ziggurat;
#[allow(clippy::excessive_precision)]
mod ziggurat_tables;

pub use bit_generators::{BitGenerator, DXSM_MULTIPLIER, Pcg64Dxsm, Philox, Sfc64, mt19937_jumped};
pub use bit_generators::{PHILOX_MAX_ROUNDS, PHILOX_ROUNDS, philox4x64};
pub use distributions::Distributions;
pub use generator::{Generator, default_rng, default_rng_from};
pub use integers::IntDtype;
pub use legacy::{LegacyState, RandomState};
pub use multivariate::{CheckValid, MvnDraw, MvnMethod};
pub use multivariate::{MemoryOrder, MvhgMethod};
pub use seed_sequence::SeedSequence;

use crate::engines::{Mt19937, Pcg64};
use crate::{Result, invalid};

mod bits {
    /// The draws NumPy's samplers are built on, for every bit generator (nominally public so
    /// that [`BitGenerator`](super::BitGenerator) can name it; not reachable from outside).
    pub trait Bits {
        /// `next_uint32`.
        fn u32(&mut self) -> u32;
        /// `next_uint64`.
        fn u64(&mut self) -> u64;
        /// `next_double`.
        fn f64(&mut self) -> f64;
    }
}
pub(crate) use bits::Bits;

/// The legacy flavour: `u64 = (first << 32) | second`, doubles from two words (53 bits).
impl Bits for Mt19937 {
    #[inline(always)]
    fn u32(&mut self) -> u32 {
        self.next_u32()
    }
    #[inline(always)]
    fn u64(&mut self) -> u64 {
        self.next_u64_hi_lo()
    }
    #[inline(always)]
    fn f64(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (a as f64 * 67_108_864.0 + b as f64) * (1.0 / 9_007_199_254_740_992.0)
    }
}

impl Bits for Pcg64 {
    #[inline(always)]
    fn u32(&mut self) -> u32 {
        self.next_u32()
    }
    #[inline(always)]
    fn u64(&mut self) -> u64 {
        self.next_u64()
    }
    #[inline(always)]
    fn f64(&mut self) -> f64 {
        self.next_f64()
    }
}

/// Smallest `2^k − 1 >= v`.
#[inline]
pub(crate) fn mask_of(v: u64) -> u64 {
    if v == 0 {
        0
    } else {
        u64::MAX >> v.leading_zeros()
    }
}

/// NumPy's `random_interval(max)`: masked rejection on 32-bit draws when `max` fits in 32
/// bits, else on 64-bit draws. Used by every `shuffle`/`permutation`.
#[inline]
pub(crate) fn random_interval<B: Bits>(b: &mut B, max: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    let m = mask_of(max);
    if max <= u32::MAX as u64 {
        loop {
            let v = (b.u32() as u64) & m;
            if v <= max {
                return v;
            }
        }
    }
    loop {
        let v = b.u64() & m;
        if v <= max {
            return v;
        }
    }
}

#[inline]
fn lemire32<B: Bits>(b: &mut B, rng: u32) -> u32 {
    let r = rng as u64 + 1;
    let mut m = b.u32() as u64 * r;
    let mut left = m as u32;
    if (left as u64) < r {
        let t = ((u32::MAX - rng) as u64 % r) as u32;
        while left < t {
            m = b.u32() as u64 * r;
            left = m as u32;
        }
    }
    (m >> 32) as u32
}

#[inline]
fn lemire64<B: Bits>(b: &mut B, rng: u64) -> u64 {
    let r = rng as u128 + 1;
    let mut m = b.u64() as u128 * r;
    let mut left = m as u64;
    if (left as u128) < r {
        let t = ((u64::MAX - rng) as u128 % r) as u64;
        while left < t {
            m = b.u64() as u128 * r;
            left = m as u64;
        }
    }
    (m >> 64) as u64
}

/// One value in `[0, rng]` for a 64-bit-wide dtype (NumPy `random_bounded_uint64`),
/// masked (legacy) or Lemire (Generator).
#[inline]
pub(crate) fn bounded64<B: Bits>(b: &mut B, rng: u64, masked: bool) -> u64 {
    if rng == 0 {
        0
    } else if rng <= u32::MAX as u64 {
        bounded32(b, rng as u32, masked) as u64
    } else if rng == u64::MAX {
        b.u64()
    } else if masked {
        let m = mask_of(rng);
        loop {
            let v = b.u64() & m;
            if v <= rng {
                return v;
            }
        }
    } else {
        lemire64(b, rng)
    }
}

/// One value in `[0, rng]` for a 32-bit-wide dtype (NumPy `random_bounded_uint32`).
#[inline]
pub(crate) fn bounded32<B: Bits>(b: &mut B, rng: u32, masked: bool) -> u32 {
    if rng == 0 {
        0
    } else if rng == u32::MAX {
        b.u32()
    } else if masked {
        let m = mask_of(rng as u64) as u32;
        loop {
            let v = b.u32() & m;
            if v <= rng {
                return v;
            }
        }
    } else {
        lemire32(b, rng)
    }
}

/// Inclusive range `[low, high_incl]` of an int64 draw as NumPy's `(off, rng)` pair.
pub(crate) fn range_i64(op: &'static str, low: i64, high: i64, endpoint: bool) -> Result<u64> {
    let ok = if endpoint { low <= high } else { low < high };
    if !ok {
        return Err(invalid(
            op,
            "high",
            format!(
                "low >= high (low = {low}, high = {high}{})",
                if endpoint { ", endpoint" } else { "" }
            ),
        ));
    }
    let hi = if endpoint { high } else { high - 1 };
    Ok(hi.wrapping_sub(low) as u64)
}

/// As [`range_i64`] for int32, with NumPy's bounds check (`low >= -2^31`, `high <= 2^31`
/// exclusive or `2^31 − 1` inclusive). Returns `(low, rng)`.
pub(crate) fn range_i32(
    op: &'static str,
    low: i64,
    high: i64,
    endpoint: bool,
) -> Result<(i32, u32)> {
    let top = if endpoint {
        i32::MAX as i64
    } else {
        i32::MAX as i64 + 1
    };
    if low < i32::MIN as i64 {
        return Err(invalid(
            op,
            "low",
            format!("low = {low} is out of bounds for int32"),
        ));
    }
    if high > top {
        return Err(invalid(
            op,
            "high",
            format!("high = {high} is out of bounds for int32"),
        ));
    }
    let r = range_i64(op, low, high, endpoint)?;
    Ok((low as i32, r as u32))
}

/// Shuffles `x` with NumPy's loop: `i` from `n − 1` down to 1, `j = random_interval(i)`.
pub(crate) fn shuffle_slice<B: Bits, T>(b: &mut B, x: &mut [T]) {
    for i in (1..x.len()).rev() {
        let j = random_interval(b, i as u64) as usize;
        x.swap(i, j);
    }
}

/// NumPy's check of `choice`'s `p`: right length, no NaN, non-negative, compensated sum
/// within `sqrt(eps)` of 1. Returns the normalized cumulative sums (`cumsum(p) / cdf[-1]`).
pub(crate) fn checked_cdf(op: &'static str, p: &[f64], pop_size: usize) -> Result<Vec<f64>> {
    if p.len() != pop_size {
        return Err(invalid(
            op,
            "p",
            format!("a and p must have same size ({pop_size} vs {})", p.len()),
        ));
    }
    if p.iter().any(|v| v.is_nan()) {
        return Err(invalid(op, "p", "probabilities contain NaN"));
    }
    if p.iter().any(|&v| v < 0.0) {
        return Err(invalid(op, "p", "probabilities are not non-negative"));
    }
    // Kahan summation, as NumPy validates the total.
    let (mut sum, mut c) = (0.0f64, 0.0f64);
    for &v in p {
        let y = v - c;
        let t = sum + y;
        c = (t - sum) - y;
        sum = t;
    }
    if !((sum - 1.0).abs() <= f64::EPSILON.sqrt()) {
        return Err(invalid(
            op,
            "p",
            format!("probabilities do not sum to 1 (sum = {sum})"),
        ));
    }
    Ok(cdf_of(p))
}

fn cdf_of(p: &[f64]) -> Vec<f64> {
    let mut acc = 0.0;
    let mut cdf: Vec<f64> = p
        .iter()
        .map(|&v| {
            acc += v;
            acc
        })
        .collect();
    let last = *cdf.last().unwrap_or(&1.0);
    for v in &mut cdf {
        *v /= last;
    }
    cdf
}

/// `searchsorted(cdf, u, side='right')`: the number of entries `<= u`.
#[inline]
pub(crate) fn search_right(cdf: &[f64], u: f64) -> usize {
    cdf.partition_point(|&c| c <= u)
}

/// `choice(replace=False, p=p)`: rounds of `size − found` uniforms, each round zeroing the
/// found entries' `p` and keeping first occurrences of new indices in draw order.
pub(crate) fn choice_no_replace_p(
    op: &'static str,
    mut uniform: impl FnMut() -> f64,
    p: &[f64],
    size: usize,
) -> Result<Vec<usize>> {
    if p.iter().filter(|&&v| v > 0.0).count() < size {
        return Err(invalid(op, "p", "fewer non-zero entries in p than size"));
    }
    let mut p = p.to_vec();
    let mut found: Vec<usize> = Vec::with_capacity(size);
    let mut seen = vec![false; p.len()];
    while found.len() < size {
        let x: Vec<f64> = (0..size - found.len()).map(|_| uniform()).collect();
        for &f in &found {
            p[f] = 0.0;
        }
        let cdf = cdf_of(&p);
        for u in x {
            let idx = search_right(&cdf, u);
            if idx < seen.len() && !seen[idx] {
                seen[idx] = true;
                found.push(idx);
            }
        }
    }
    Ok(found)
}
