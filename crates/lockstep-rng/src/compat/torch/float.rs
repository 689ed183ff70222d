//! The two float dtypes PyTorch's samplers fill, and how each turns engine words into a unit
//! uniform.

use crate::Generator;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// `f32` or `f64`: the arithmetic the samplers need, each operation rounded once in `Self`.
pub trait Float:
    sealed::Sealed + Copy + PartialOrd + Default + core::fmt::Debug + Send + Sync
{
    /// `0`.
    const ZERO: Self;
    /// `1`.
    const ONE: Self;
    /// Rounds a double to `Self` (nearest, ties to even).
    fn from_f64(x: f64) -> Self;
    /// Widens to a double (exact).
    fn to_f64(self) -> f64;
    /// `self · a + b` with a single rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// `self + o`.
    fn add(self, o: Self) -> Self;
    /// `self − o`.
    fn sub(self, o: Self) -> Self;
    /// `self · o`.
    fn mul(self, o: Self) -> Self;
    /// `self / o`.
    fn div(self, o: Self) -> Self;
    /// Natural logarithm (the C library's `logf` / `log`).
    fn ln(self) -> Self;
    /// The smallest positive normal number (`torch.finfo(dtype).tiny`).
    fn tiny() -> Self;
    /// The largest value below 1 (`nexttoward(1, 0)` in this dtype).
    fn below_one() -> Self;
    /// One unit uniform in `[0, 1)` as `torch.rand` makes it for this dtype.
    fn unit(g: &mut Generator) -> Self;
    /// `out.len()` unit uniforms, in order; same as repeated [`unit`](Self::unit).
    fn fill_unit(g: &mut Generator, out: &mut [Self]);
    /// The in-place Box–Muller transform of every full 16-element block of `d` (PyTorch's
    /// vectorized normal kernel for this dtype).
    #[doc(hidden)]
    fn box_muller_blocks(d: &mut [Self], mean: Self, std: Self);
}

const WORDS: usize = 512;

/// The arithmetic both dtypes share, each operation rounded once in the type.
macro_rules! arithmetic {
    ($t:ty) => {
        const ZERO: Self = 0.0;
        const ONE: Self = 1.0;
        #[inline]
        fn from_f64(x: f64) -> Self {
            x as $t
        }
        #[inline]
        fn to_f64(self) -> f64 {
            self as f64
        }
        #[inline]
        fn mul_add(self, a: Self, b: Self) -> Self {
            <$t>::mul_add(self, a, b)
        }
        #[inline]
        fn add(self, o: Self) -> Self {
            self + o
        }
        #[inline]
        fn sub(self, o: Self) -> Self {
            self - o
        }
        #[inline]
        fn mul(self, o: Self) -> Self {
            self * o
        }
        #[inline]
        fn div(self, o: Self) -> Self {
            self / o
        }
        #[inline]
        fn ln(self) -> Self {
            <$t>::ln(self)
        }
        #[inline]
        fn tiny() -> Self {
            <$t>::MIN_POSITIVE
        }
        #[inline]
        fn below_one() -> Self {
            <$t>::from_bits((1.0 as $t).to_bits() - 1)
        }
    };
}

impl Float for f32 {
    arithmetic!(f32);
    fn box_muller_blocks(d: &mut [Self], mean: Self, std: Self) {
        super::normal::blocks_f32(d, mean, std)
    }
    /// `(w & 0xFFFFFF) · 2^-24` for one 32-bit word `w` (exact in f32).
    #[inline]
    fn unit(g: &mut Generator) -> Self {
        g.next_f32()
    }
    fn fill_unit(g: &mut Generator, out: &mut [Self]) {
        let mut buf = [0u32; WORDS];
        for chunk in out.chunks_mut(WORDS) {
            let words = &mut buf[..chunk.len()];
            g.fill_u32(words);
            for (o, &w) in chunk.iter_mut().zip(words.iter()) {
                *o = (w & 0xFF_FFFF) as f32 * (1.0 / (1u32 << 24) as f32);
            }
        }
    }
}

impl Float for f64 {
    arithmetic!(f64);
    fn box_muller_blocks(d: &mut [Self], mean: Self, std: Self) {
        super::normal::blocks_f64(d, mean, std)
    }
    /// `(u64 & (2^53 − 1)) · 2^-53` for one 64-bit draw (first word high).
    #[inline]
    fn unit(g: &mut Generator) -> Self {
        g.next_f64()
    }
    fn fill_unit(g: &mut Generator, out: &mut [Self]) {
        let mut buf = [0u32; WORDS];
        for chunk in out.chunks_mut(WORDS / 2) {
            let words = &mut buf[..2 * chunk.len()];
            g.fill_u32(words);
            for (o, w) in chunk.iter_mut().zip(words.chunks_exact(2)) {
                let v = ((w[0] as u64) << 32 | w[1] as u64) & ((1 << 53) - 1);
                *o = v as f64 * (1.0 / (1u64 << 53) as f64);
            }
        }
    }
}
