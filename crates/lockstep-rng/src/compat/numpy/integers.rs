//! NumPy's bounded integers for every integer dtype (`RandomState.randint`,
//! `Generator.integers`), scalar or array bounds, as NumPy 2.4's `_bounded_integers` and
//! `distributions.c` draw them.
//!
//! What a value costs depends on the dtype's width, not on the range alone:
//! * 64-bit dtypes: a 32-bit draw per attempt when the range fits in 32 bits, else a 64-bit
//!   draw (a range of all 2^64 values takes one 64-bit draw as is);
//! * 32-bit dtypes: a 32-bit draw per attempt;
//! * 16-bit and 8-bit dtypes: one 32-bit draw cut into 2 or 4 pieces, low bits first, the
//!   pieces shared by the values of one call; `bool`: one 32-bit draw cut into 32 bits.
//!
//! Each attempt is masked rejection (`RandomState`) or Lemire's multiply-and-reject
//! (`Generator`), in the dtype's own width. A range of one value draws nothing.

use core::fmt;

use super::{Bits, bounded32, bounded64, mask_of};
use crate::{Result, invalid, try_with_capacity};

mod sealed {
    pub trait Sealed {}
}

/// A NumPy integer dtype that `randint`/`integers` can return: `i8`, `i16`, `i32`, `i64`,
/// `u8`, `u16`, `u32`, `u64` and `bool` (NumPy's `np.bool`, drawn from `[0, 2)`).
pub trait IntDtype: Copy + Default + PartialEq + fmt::Debug + sealed::Sealed {
    /// NumPy's name of the dtype (`"int8"`, …, `"bool"`).
    const NAME: &'static str;
    /// The smallest value.
    const MIN: i128;
    /// The largest value.
    const MAX: i128;
    /// The width NumPy draws in: 1 (bool), 8, 16, 32 or 64.
    #[doc(hidden)]
    const BITS: u32;
    /// `off + value` computed modulo 2^64, cut to the dtype (two's complement).
    #[doc(hidden)]
    fn from_wrapped(v: u64) -> Self;
    /// The value as an integer.
    fn to_i128(self) -> i128;
}

macro_rules! int_dtype {
    ($($t:ty => $name:literal, $bits:literal);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl IntDtype for $t {
            const NAME: &'static str = $name;
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = <$t>::MAX as i128;
            const BITS: u32 = $bits;
            #[inline(always)]
            fn from_wrapped(v: u64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_i128(self) -> i128 {
                self as i128
            }
        }
    )*};
}
int_dtype!(
    i8 => "int8", 8;
    i16 => "int16", 16;
    i32 => "int32", 32;
    i64 => "int64", 64;
    u8 => "uint8", 8;
    u16 => "uint16", 16;
    u32 => "uint32", 32;
    u64 => "uint64", 64;
);

impl sealed::Sealed for bool {}
impl IntDtype for bool {
    const NAME: &'static str = "bool";
    const MIN: i128 = 0;
    const MAX: i128 = 1;
    const BITS: u32 = 1;
    #[inline(always)]
    fn from_wrapped(v: u64) -> Self {
        v & 1 == 1
    }
    #[inline(always)]
    fn to_i128(self) -> i128 {
        self as i128
    }
}

/// The 32-bit draw that 8-bit, 16-bit and bool values are cut from, and how many pieces of
/// it are left (NumPy's `buf` and `bcnt`, local to one call).
#[derive(Default)]
struct Pieces {
    left: u32,
    word: u32,
}

impl Pieces {
    #[inline(always)]
    fn next<B: Bits>(&mut self, b: &mut B, shift: u32, per_word: u32) -> u32 {
        if self.left == 0 {
            self.word = b.u32();
            self.left = per_word - 1;
        } else {
            self.word >>= shift;
            self.left -= 1;
        }
        self.word
    }
    #[inline(always)]
    fn bit<B: Bits>(&mut self, b: &mut B) -> u8 {
        (self.next(b, 1, 32) & 1) as u8
    }
}

/// A value in `[0, rng]` from `bits`-bit pieces of 32-bit draws (`bits` 8 or 16: NumPy's
/// buffered `uint8`/`uint16` paths, masked rejection or Lemire's method on `bits`-bit words).
#[inline(always)]
fn bounded_small<B: Bits>(b: &mut B, rng: u32, bits: u32, masked: bool, p: &mut Pieces) -> u32 {
    let full = (1u32 << bits) - 1;
    let mut piece = |b: &mut B| p.next(b, bits, 32 / bits) & full;
    if rng == 0 {
        0
    } else if rng == full {
        piece(b)
    } else if masked {
        let m = mask_of(rng as u64) as u32;
        loop {
            let v = piece(b) & m;
            if v <= rng {
                return v;
            }
        }
    } else {
        // `piece · excl` fits in 2·bits ≤ 32 bits.
        let excl = rng + 1;
        let mut m = piece(b) * excl;
        if m & full < excl {
            let t = (full - rng) % excl;
            while m & full < t {
                m = piece(b) * excl;
            }
        }
        m >> bits
    }
}

/// One value `off + [0, rng]` of dtype `T`.
#[inline(always)]
fn draw<B: Bits, T: IntDtype>(b: &mut B, off: u64, rng: u64, masked: bool, p: &mut Pieces) -> T {
    let v = match T::BITS {
        64 => bounded64(b, rng, masked),
        32 => bounded32(b, rng as u32, masked) as u64,
        16 => bounded_small(b, rng as u32, 16, masked, p) as u64,
        8 => bounded_small(b, rng as u32, 8, masked, p) as u64,
        _ => {
            if rng == 0 {
                0
            } else {
                p.bit(b) as u64
            }
        }
    };
    T::from_wrapped(off.wrapping_add(v))
}

/// NumPy's message for an empty range (`format_bounds_error`).
fn bounds_error(op: &'static str, closed: bool, low_is_zero: bool) -> crate::Error {
    let msg = match (low_is_zero, closed) {
        (true, false) => "high <= 0",
        (true, true) => "high < 0",
        (false, false) => "low >= high",
        (false, true) => "low > high",
    };
    invalid(op, "high", msg)
}

fn low_out_of_bounds<T: IntDtype>(op: &'static str, low: i128) -> crate::Error {
    invalid(
        op,
        "low",
        format!("low is out of bounds for {} (low = {low})", T::NAME),
    )
}

fn high_out_of_bounds<T: IntDtype>(op: &'static str, high: i128) -> crate::Error {
    invalid(
        op,
        "high",
        format!("high is out of bounds for {} (high = {high})", T::NAME),
    )
}

/// `(off, rng)` of `[low, high)` (`[low, high]` when `closed`) for `T`, checked in NumPy's
/// order: `low`, then `high`, then the range.
fn range_of<T: IntDtype>(
    op: &'static str,
    low: i128,
    high: i128,
    closed: bool,
) -> Result<(u64, u64)> {
    let hi = if closed { high } else { high.saturating_sub(1) };
    if low < T::MIN {
        return Err(low_out_of_bounds::<T>(op, low));
    }
    if hi > T::MAX {
        return Err(high_out_of_bounds::<T>(op, high));
    }
    if low > hi {
        return Err(bounds_error(op, closed, low == 0));
    }
    Ok((low as u64, (hi - low) as u64))
}

/// `out[i]` uniform in `[low, high)` (`[low, high]` when `closed`) for scalar bounds.
pub(crate) fn bounded_fill<B: Bits, T: IntDtype>(
    b: &mut B,
    op: &'static str,
    low: i128,
    high: i128,
    closed: bool,
    masked: bool,
    out: &mut [T],
) -> Result<()> {
    let (off, rng) = range_of::<T>(op, low, high, closed)?;
    let mut p = Pieces::default();
    for o in out {
        *o = draw(b, off, rng, masked, &mut p);
    }
    Ok(())
}

/// NumPy's broadcast of `shapes` (aligned at the right; each dimension equal or 1).
fn broadcast_shape(op: &'static str, shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let nd = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; nd];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[nd - s.len() + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(invalid(
                    op,
                    "high",
                    format!(
                        "shape mismatch: objects cannot be broadcast to a single shape ({shapes:?})"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// Strides (in elements) of a C-order array of `shape` read as `out` (0 along broadcast
/// dimensions).
fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let mut strides = vec![0usize; out.len()];
    let mut step = 1usize;
    for (i, &d) in shape.iter().enumerate().rev() {
        let k = out.len() - shape.len() + i;
        strides[k] = if d == 1 { 0 } else { step };
        step *= d;
    }
    strides
}

fn check_len(op: &'static str, name: &'static str, data: &[i128], shape: &[usize]) -> Result<()> {
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if n != Some(data.len()) {
        return Err(invalid(
            op,
            name,
            format!("{} values do not fill shape {shape:?}", data.len()),
        ));
    }
    Ok(())
}

/// `randint`/`integers` with array bounds: `low` and `high` (C-order data, shape) broadcast
/// together (and with `size`, which is then the output's shape), one value per element in C
/// order, the 8/16-bit pieces shared across elements. Everything is checked before the
/// first draw.
pub(crate) fn broadcast_fill<B: Bits, T: IntDtype>(
    b: &mut B,
    op: &'static str,
    low: (&[i128], &[usize]),
    high: (&[i128], &[usize]),
    size: Option<&[usize]>,
    closed: bool,
    masked: bool,
) -> Result<(Vec<T>, Vec<usize>)> {
    check_len(op, "low", low.0, low.1)?;
    check_len(op, "high", high.0, high.1)?;
    let shape = match size {
        None => broadcast_shape(op, &[low.1, high.1])?,
        Some(s) => {
            let all = broadcast_shape(op, &[low.1, high.1, s])?;
            if all != s {
                return Err(invalid(
                    op,
                    "size",
                    format!(
                        "bounds of shapes {:?} and {:?} do not broadcast to size {s:?}",
                        low.1, high.1
                    ),
                ));
            }
            all
        }
    };
    // NumPy's checks: every low, then every high, then every range.
    if let Some(&l) = low.0.iter().find(|&&l| l < T::MIN) {
        return Err(low_out_of_bounds::<T>(op, l));
    }
    let top = if closed { T::MAX } else { T::MAX + 1 };
    if let Some(&h) = high.0.iter().find(|&&h| h > top) {
        return Err(high_out_of_bounds::<T>(op, h));
    }
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| invalid(op, "size", format!("shape {shape:?} is too large")))?;
    let ls = broadcast_strides(low.1, &shape);
    let hs = broadcast_strides(high.1, &shape);
    // Pairs in C order of the output: (index into low, index into high).
    let (shape_r, ls, hs) = (&shape, &ls, &hs);
    let pairs = || {
        let mut idx = vec![0usize; shape_r.len()];
        let (mut li, mut hi) = (0usize, 0usize);
        (0..n).map(move |k| {
            if k > 0 {
                for d in (0..idx.len()).rev() {
                    idx[d] += 1;
                    li += ls[d];
                    hi += hs[d];
                    if idx[d] < shape_r[d] {
                        break;
                    }
                    li -= ls[d] * idx[d];
                    hi -= hs[d] * idx[d];
                    idx[d] = 0;
                }
            }
            (li, hi)
        })
    };
    let low_is_zero = low.0.iter().all(|&l| l == 0);
    for (li, hi) in pairs() {
        let (l, h) = (low.0[li], high.0[hi]);
        if (closed && l > h) || (!closed && l >= h) {
            return Err(bounds_error(op, closed, low_is_zero));
        }
    }
    let mut out = try_with_capacity::<T>(op, n)?;
    let mut p = Pieces::default();
    for (li, hi) in pairs() {
        let l = low.0[li];
        let h = if closed { high.0[hi] } else { high.0[hi] - 1 };
        out.push(draw(b, l as u64, (h - l) as u64, masked, &mut p));
    }
    Ok((out, shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::numpy::default_rng;

    #[test]
    fn broadcasting_walks_the_output_in_c_order() {
        let shape = broadcast_shape("t", &[&[3, 1], &[4]]).unwrap();
        assert_eq!(shape, [3, 4]);
        assert_eq!(broadcast_strides(&[3, 1], &shape), [1, 0]);
        assert_eq!(broadcast_strides(&[4], &shape), [0, 1]);
        assert!(broadcast_shape("t", &[&[3], &[4]]).is_err());
        let mut g = default_rng(0);
        let (v, s) = broadcast_fill::<_, i8>(
            g.bit_generator(),
            "integers",
            (&[1, 2, 3], &[3, 1]),
            (&[3, 4, 5, 6], &[4]),
            None,
            true,
            false,
        )
        .unwrap();
        assert_eq!(s, [3, 4]);
        for (k, x) in v.iter().enumerate() {
            let (l, h) = (1 + (k / 4) as i8, 3 + (k % 4) as i8);
            assert!((l..=h).contains(x), "{k}: {x} not in [{l}, {h}]");
        }
        // Ranges of one value draw nothing and give the bound itself.
        let before = g.bit_generator().clone();
        let (v, _) = broadcast_fill::<_, u16>(
            g.bit_generator(),
            "integers",
            (&[7, 9], &[2]),
            (&[7, 9], &[2]),
            None,
            true,
            false,
        )
        .unwrap();
        assert_eq!(v, [7, 9]);
        assert_eq!(*g.bit_generator(), before);
    }

    #[test]
    fn bad_bounds_are_errors() {
        let mut g = default_rng(0);
        let b = g.bit_generator();
        assert!(bounded_fill::<_, u8>(b, "t", 0, 257, false, false, &mut [0]).is_err());
        assert!(bounded_fill::<_, u8>(b, "t", 0, 256, false, false, &mut [0]).is_ok());
        assert!(bounded_fill::<_, i8>(b, "t", -129, 0, false, false, &mut [0]).is_err());
        assert!(bounded_fill::<_, bool>(b, "t", 0, 2, true, false, &mut [false]).is_err());
        assert!(bounded_fill::<_, u64>(b, "t", 0, 1 << 64, false, false, &mut [0]).is_ok());
        assert!(bounded_fill::<_, i64>(b, "t", 3, 3, false, false, &mut [0]).is_err());
    }
}
