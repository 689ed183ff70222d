//! NumPy's legacy `np.random.RandomState`, on MT19937 (frozen stream) or any other bit
//! generator (`RandomState(PCG64(...))`, `RandomState(Philox(...))`, ...).

use super::integers::{IntDtype, bounded_fill, broadcast_fill};
use super::{
    BitGenerator, bounded32, bounded64, checked_cdf, choice_no_replace_p, range_i32, range_i64,
};
use crate::compat::glibc_math::log;
use crate::engines::Mt19937;
use crate::engines::mt19937::N;
use crate::{Error, Result, invalid};

/// NumPy's legacy `RandomState`, bit for bit with NumPy 2.x (whose legacy stream NumPy keeps
/// frozen): seeding, `get_state`/`set_state`, and the samplers below draw exactly the words
/// NumPy draws, in the same order, so mixed sequences of calls stay in lockstep.
///
/// The bit generator is MT19937 (`RandomState(seed)`) unless another is named:
/// `RandomState::from_bit_generator(Pcg64::...)` is NumPy's `RandomState(PCG64(...))`. The
/// legacy algorithms then run on that generator's draws as NumPy runs them: doubles are its
/// `next_double` (53 bits of one 64-bit output for the 64-bit generators), 32-bit draws take
/// the buffered half of a 64-bit output first, and the polar Gaussian's cached second value
/// lives in the `RandomState`, not in the bit generator.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomState<B: BitGenerator = Mt19937> {
    bits: B,
    /// The second value of the last polar-method pair (`has_gauss`, `gauss`).
    gauss: Option<f64>,
}

/// `RandomState.get_state()`: `('MT19937', key, pos, has_gauss, cached_gaussian)`.
#[derive(Clone, Debug, PartialEq)]
pub struct LegacyState {
    /// The 624 state words (`key`).
    pub key: Vec<u32>,
    /// Words of the current block already used; 624 = the next draw twists.
    pub pos: usize,
    /// Whether a cached Gaussian is pending.
    pub has_gauss: bool,
    /// The cached Gaussian (0.0 when none, as NumPy reports it).
    pub cached_gaussian: f64,
}

impl RandomState {
    /// `RandomState(seed)` for an integer seed: `init_genrand(seed)`.
    pub fn new(seed: u32) -> Self {
        Self {
            bits: Mt19937::from_seed_u32(seed),
            gauss: None,
        }
    }

    /// `RandomState(seed)` for a `u64` that must be below 2^32 (NumPy's `ValueError`
    /// otherwise); what a global `seed_everything(seed)` calls.
    pub fn from_u64(seed: u64) -> Result<Self> {
        u32::try_from(seed).map(Self::new).map_err(|_| {
            invalid(
                "RandomState",
                "seed",
                format!("must be between 0 and 2**32 - 1, got {seed}"),
            )
        })
    }

    /// `RandomState([k0, k1, ...])`: `init_by_array(key)`; the key must not be empty.
    pub fn from_key(key: &[u32]) -> Result<Self> {
        if key.is_empty() {
            return Err(invalid(
                "RandomState",
                "seed",
                "seed array must not be empty",
            ));
        }
        Ok(Self {
            bits: Mt19937::from_key(key),
            gauss: None,
        })
    }

    /// `rs.seed(seed)`: as [`new`](Self::new), in place (also clears the cached Gaussian).
    pub fn seed(&mut self, seed: u32) {
        *self = Self::new(seed);
    }

    /// The engine, for raw draws.
    pub fn engine(&mut self) -> &mut Mt19937 {
        &mut self.bits
    }

    /// `get_state()` (legacy tuple form).
    pub fn get_state(&self) -> LegacyState {
        LegacyState {
            key: self.bits.state().to_vec(),
            pos: self.bits.pos(),
            has_gauss: self.gauss.is_some(),
            cached_gaussian: self.gauss.unwrap_or(0.0),
        }
    }

    /// `set_state(state)`: errors unless `key` has 624 words and `pos <= 624`.
    pub fn set_state(&mut self, state: &LegacyState) -> Result<()> {
        let bad = |reason: String| Error::InvalidState {
            op: "set_state",
            reason,
        };
        let key: [u32; N] = state
            .key
            .as_slice()
            .try_into()
            .map_err(|_| bad(format!("key must have {N} words, got {}", state.key.len())))?;
        let mt = Mt19937::from_state(key, state.pos)
            .ok_or_else(|| bad(format!("pos must be in 0..=624, got {}", state.pos)))?;
        self.bits = mt;
        self.gauss = state.has_gauss.then_some(state.cached_gaussian);
        Ok(())
    }
}

impl<B: BitGenerator> RandomState<B> {
    /// `RandomState(bit_generator)`: the legacy samplers on `bits` (e.g. NumPy's
    /// `RandomState(PCG64(seed))` is `RandomState::from_bit_generator(Pcg64::from_seed_seq(
    /// &SeedSequence::from_int(seed)))`), no Gaussian cached.
    pub fn from_bit_generator(bits: B) -> Self {
        Self { bits, gauss: None }
    }

    /// The bit generator (`rs._bit_generator`), e.g. for its state or raw draws.
    pub fn bit_generator(&mut self) -> &mut B {
        &mut self.bits
    }

    /// The cached second Gaussian of the last polar pair (`state['has_gauss']`,
    /// `state['gauss']`), if one is pending.
    pub fn cached_gaussian(&self) -> Option<f64> {
        self.gauss
    }

    /// Sets or clears the cached Gaussian (the `has_gauss`/`gauss` of NumPy's `set_state`).
    pub fn set_cached_gaussian(&mut self, gauss: Option<f64>) {
        self.gauss = gauss;
    }

    /// `random_sample(size)` / `rand(*shape)`: the bit generator's `next_double` per value
    /// (MT19937: `((w1 >> 5)·2^26 + (w2 >> 6))·2^-53`, two words each).
    pub fn random_sample(&mut self, out: &mut [f64]) {
        self.bits.fill_f64(out);
    }

    /// One `random_sample()`.
    pub fn random_sample_one(&mut self) -> f64 {
        self.bits.f64()
    }

    /// One legacy Gaussian: the polar (Marsaglia) method, returning `f·x2` and caching `f·x1`.
    pub fn gauss(&mut self) -> f64 {
        if let Some(g) = self.gauss.take() {
            return g;
        }
        loop {
            let x1 = 2.0 * self.bits.f64() - 1.0;
            let x2 = 2.0 * self.bits.f64() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                let f = (-2.0 * log(r2) / r2).sqrt();
                self.gauss = Some(f * x1);
                return f * x2;
            }
        }
    }

    /// `standard_normal(size)` / `randn(*shape)`: [`gauss`](Self::gauss) per value (the
    /// cached value carries over between calls, as in NumPy).
    pub fn standard_normal(&mut self, out: &mut [f64]) {
        for o in out {
            *o = self.gauss();
        }
    }

    /// `normal(loc, scale, size)`: `loc + scale·gauss`; errors if `scale < 0` or NaN.
    pub fn normal(&mut self, loc: f64, scale: f64, out: &mut [f64]) -> Result<()> {
        if !(scale >= 0.0) {
            return Err(invalid(
                "normal",
                "scale",
                format!("must be >= 0, got {scale}"),
            ));
        }
        for o in out {
            *o = loc + scale * self.gauss();
        }
        Ok(())
    }

    /// `uniform(low, high, size)`: `low + (high − low)·U`; errors if `high − low` is not
    /// finite.
    pub fn uniform(&mut self, low: f64, high: f64, out: &mut [f64]) -> Result<()> {
        let range = high - low;
        if !range.is_finite() {
            return Err(invalid(
                "uniform",
                "high",
                format!("range {low}..{high} is not finite"),
            ));
        }
        for o in out {
            *o = low + range * self.bits.f64();
        }
        Ok(())
    }

    /// `standard_exponential(size)` (legacy): `−log(1 − U)`.
    pub fn standard_exponential(&mut self, out: &mut [f64]) {
        for o in out {
            *o = -log(1.0 - self.bits.f64());
        }
    }

    /// `randint(low, high, size, dtype=np.int64)`: values in `[low, high)` by masked
    /// rejection; errors if `low >= high`.
    pub fn randint_i64(&mut self, low: i64, high: i64, out: &mut [i64]) -> Result<()> {
        let rng = range_i64("randint", low, high, false)?;
        for o in out {
            *o = low.wrapping_add(bounded64(&mut self.bits, rng, true) as i64);
        }
        Ok(())
    }

    /// `randint(low, high, size, dtype=np.int32)`: bounds are taken as `i64` so that the
    /// exclusive `high = 2^31` can be written; errors if they fall outside int32 or `low >= high`.
    pub fn randint_i32(&mut self, low: i64, high: i64, out: &mut [i32]) -> Result<()> {
        let (low, rng) = range_i32("randint", low, high, false)?;
        for o in out {
            *o = low.wrapping_add(bounded32(&mut self.bits, rng, true) as i32);
        }
        Ok(())
    }

    /// `randint(low, high, size, dtype=T)` for every NumPy integer dtype `T` (`i8` … `u64`,
    /// `bool`): values in `[low, high)` by masked rejection, on 64-bit draws for 64-bit
    /// ranges, 32-bit draws otherwise, and for 8-bit, 16-bit and `bool` dtypes on one
    /// 32-bit draw cut into 4, 2 or 32 pieces (low bits first), as NumPy's buffered
    /// samplers do. Bounds are `i128` so that `high = 2^64` (uint64) can be written.
    ///
    /// # Errors
    /// If `low` or `high − 1` is outside `T`'s range, or `low >= high`; nothing is drawn.
    pub fn randint<T: IntDtype>(&mut self, low: i128, high: i128, out: &mut [T]) -> Result<()> {
        bounded_fill(&mut self.bits, "randint", low, high, false, true, out)
    }

    /// `randint(low, high, size, dtype=T)` with array bounds: `low` and `high` are C-order
    /// arrays of shapes `low_shape` and `high_shape` (`&[]` for a scalar), broadcast
    /// together (and with `size` when given, which is then the output's shape); one value
    /// per element of the broadcast shape, in C order, each in its own `[low, high)`, the
    /// 8/16-bit buffer shared across elements as in NumPy. Returns the values and their shape.
    ///
    /// # Errors
    /// If the shapes do not broadcast (to `size`), a data length does not match its shape,
    /// any bound is out of range for `T` or any `low >= high`; nothing is drawn then.
    /// [`Error::OutOfMemory`] if the output cannot be allocated.
    pub fn randint_array<T: IntDtype>(
        &mut self,
        low: (&[i128], &[usize]),
        high: (&[i128], &[usize]),
        size: Option<&[usize]>,
    ) -> Result<(Vec<T>, Vec<usize>)> {
        broadcast_fill(&mut self.bits, "randint", low, high, size, false, true)
    }

    /// `random_integers(low, high, size)` (deprecated in NumPy): `randint(low, high + 1,
    /// dtype='l')`, the closed interval `[low, high]`; `high` may be `i64::MAX` (then
    /// `high + 1 = 2^63`, as NumPy's Python integers allow).
    ///
    /// # Errors
    /// If `low > high`.
    pub fn random_integers(&mut self, low: i64, high: i64, out: &mut [i64]) -> Result<()> {
        bounded_fill(
            &mut self.bits,
            "random_integers",
            low as i128,
            high as i128 + 1,
            false,
            true,
            out,
        )
    }

    /// `tomaxint(size)`: integers in `[0, 2^63 − 1]` (C `long` on 64-bit Linux), each one
    /// 64-bit draw shifted right by one.
    pub fn tomaxint(&mut self, out: &mut [i64]) {
        for o in out {
            *o = (self.bits.u64() >> 1) as i64;
        }
    }

    /// `bytes(length)`: `ceil(length / 4)` 32-bit words (`randint(0, 2^32, dtype=uint32)`
    /// takes each as is), little-endian, cut to `length` bytes; `length = 0` still draws one
    /// word, as NumPy's C division `(length − 1) / 4 + 1` does.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] if `length` bytes cannot be allocated (nothing drawn).
    pub fn bytes(&mut self, length: usize) -> Result<Vec<u8>> {
        super::multivariate::random_bytes(&mut self.bits, length)
    }

    /// `shuffle(x)` along the first axis.
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        super::shuffle_slice(&mut self.bits, x);
    }

    /// `permutation(n)`: a shuffled `arange(n)`.
    pub fn permutation(&mut self, n: usize) -> Vec<i64> {
        let mut v: Vec<i64> = (0..n as i64).collect();
        self.shuffle(&mut v);
        v
    }

    /// `choice(pop_size, size, replace, p)`: indices into a population of `pop_size`.
    /// Errors on an empty population with `size > 0`, `size > pop_size` without replacement,
    /// or a bad `p` (wrong length, NaN, negative, not summing to 1 within `sqrt(eps)`).
    pub fn choice(
        &mut self,
        pop_size: usize,
        size: usize,
        replace: bool,
        p: Option<&[f64]>,
    ) -> Result<Vec<usize>> {
        const OP: &str = "choice";
        if pop_size == 0 && size > 0 {
            return Err(invalid(
                OP,
                "a",
                "cannot be empty unless no samples are taken",
            ));
        }
        let cdf = p.map(|p| checked_cdf(OP, p, pop_size)).transpose()?;
        if size == 0 {
            return Ok(Vec::new());
        }
        if replace {
            return Ok(match cdf {
                Some(cdf) => {
                    let mut u = vec![0.0; size];
                    self.random_sample(&mut u);
                    u.iter().map(|&u| super::search_right(&cdf, u)).collect()
                }
                None => {
                    let rng = pop_size as u64 - 1;
                    (0..size)
                        .map(|_| bounded64(&mut self.bits, rng, true) as usize)
                        .collect()
                }
            });
        }
        if size > pop_size {
            return Err(invalid(
                OP,
                "size",
                format!(
                    "cannot take a larger sample ({size}) than population ({pop_size}) when replace=False"
                ),
            ));
        }
        match p {
            Some(p) => choice_no_replace_p(OP, || self.bits.f64(), p, size),
            None => {
                let mut idx: Vec<usize> = (0..pop_size).collect();
                self.shuffle(&mut idx);
                idx.truncate(size);
                Ok(idx)
            }
        }
    }
}

impl<B: BitGenerator> super::distributions::sealed::Source for RandomState<B> {
    const LEGACY: bool = true;
    fn uniform(&mut self) -> f64 {
        self.bits.f64()
    }
    fn word32(&mut self) -> u32 {
        self.bits.u32()
    }
    fn word64(&mut self) -> u64 {
        self.bits.u64()
    }
    fn gauss(&mut self) -> f64 {
        RandomState::gauss(self)
    }
    fn exp1(&mut self) -> f64 {
        -log(1.0 - self.bits.f64())
    }
    fn take_gauss(&mut self) -> Option<f64> {
        self.gauss.take()
    }
    fn put_gauss(&mut self, g: f64) {
        self.gauss = Some(g);
    }
}

impl<B: BitGenerator> super::distributions::sealed::Blocked for RandomState<B> {
    type Block<'a>
        = LegacyBlock<'a, B>
    where
        B: 'a;
    fn block(&mut self) -> LegacyBlock<'_, B> {
        LegacyBlock {
            rs: self,
            buf: [0; N],
            pos: 0,
            len: 0,
        }
    }
}

/// MT19937 words read from a buffer holding the rest of the engine's current 624-word block
/// (made by one `fill_u32`, never across a twist), instead of one `next_u32` call per word.
/// On drop the engine is put back at the first unused word, so it ends exactly where the
/// same draws one word at a time leave it. Other bit generators draw one output at a time.
pub struct LegacyBlock<'a, B: BitGenerator = Mt19937> {
    rs: &'a mut RandomState<B>,
    buf: [u32; N],
    pos: usize,
    len: usize,
}

impl<B: BitGenerator> LegacyBlock<'_, B> {
    #[inline(always)]
    fn word(&mut self) -> u32 {
        if !B::LEGACY_WORDS {
            return self.rs.bits.u32();
        }
        if self.pos >= self.len {
            self.refill();
        }
        let w = self.buf[self.pos];
        self.pos += 1;
        w
    }

    #[inline(never)]
    fn refill(&mut self) {
        self.len = self.rs.bits.legacy_words(&mut self.buf);
        self.pos = 0;
    }

    #[inline(always)]
    fn f64(&mut self) -> f64 {
        if !B::LEGACY_WORDS {
            return self.rs.bits.f64();
        }
        let a = self.word() >> 5;
        let b = self.word() >> 6;
        (a as f64 * 67_108_864.0 + b as f64) * (1.0 / 9_007_199_254_740_992.0)
    }
}

impl<B: BitGenerator> Drop for LegacyBlock<'_, B> {
    fn drop(&mut self) {
        if B::LEGACY_WORDS {
            self.rs.bits.legacy_unread(self.len - self.pos);
        }
    }
}

impl<B: BitGenerator> super::distributions::sealed::Source for LegacyBlock<'_, B> {
    const LEGACY: bool = true;
    #[inline(always)]
    fn uniform(&mut self) -> f64 {
        self.f64()
    }
    #[inline(always)]
    fn word32(&mut self) -> u32 {
        self.word()
    }
    #[inline(always)]
    fn word64(&mut self) -> u64 {
        if !B::LEGACY_WORDS {
            return self.rs.bits.u64();
        }
        let hi = self.word() as u64;
        (hi << 32) | self.word() as u64
    }
    #[inline(always)]
    fn gauss(&mut self) -> f64 {
        // `RandomState::gauss`, on the buffered words.
        if let Some(g) = self.rs.gauss.take() {
            return g;
        }
        loop {
            let x1 = 2.0 * self.f64() - 1.0;
            let x2 = 2.0 * self.f64() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                let f = (-2.0 * log(r2) / r2).sqrt();
                self.rs.gauss = Some(f * x1);
                return f * x2;
            }
        }
    }
    #[inline(always)]
    fn exp1(&mut self) -> f64 {
        -log(1.0 - self.f64())
    }
    fn take_gauss(&mut self) -> Option<f64> {
        self.rs.gauss.take()
    }
    fn put_gauss(&mut self, g: f64) {
        self.rs.gauss = Some(g);
    }
    #[inline(always)]
    fn words(&mut self) -> &[u32] {
        if !B::LEGACY_WORDS {
            // No buffer: the samplers that read ahead draw one value at a time instead.
            return &[];
        }
        if self.pos >= self.len {
            self.refill();
        }
        &self.buf[self.pos..self.len]
    }
    #[inline(always)]
    fn consume(&mut self, n: usize) {
        assert!(
            n <= self.len - self.pos,
            "consumed more words than buffered"
        );
        self.pos += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Run = (Vec<f64>, Vec<f64>, Vec<i64>, Vec<i64>, Vec<f64>);

    fn run(seed: u32) -> Run {
        let mut rs = RandomState::new(seed);
        let mut a = [0.0; 3];
        rs.random_sample(&mut a);
        let mut b = [0.0; 3];
        rs.standard_normal(&mut b);
        let mut c = [0i64; 5];
        rs.randint_i64(0, 10, &mut c).unwrap();
        let d = rs.permutation(10);
        let mut e = [0.0; 2];
        rs.uniform(-1.0, 1.0, &mut e).unwrap();
        (a.to_vec(), b.to_vec(), c.to_vec(), d, e.to_vec())
    }

    #[test]
    fn known_answers() {
        let r = run(0);
        assert_eq!(
            r.0,
            [0.5488135039273248, 0.7151893663724195, 0.6027633760716439]
        );
        assert_eq!(
            r.1,
            [-2.268328201180374, 1.3335453816218967, -0.8427240538292873]
        );
        assert_eq!(r.2, [6, 8, 8, 1, 6]);
        assert_eq!(r.3, [2, 3, 8, 4, 5, 1, 0, 6, 9, 7]);
        assert_eq!(r.4, [0.2963437441023944, -0.26351692031890406]);
        let r = run(42);
        assert_eq!(
            r.0,
            [0.3745401188473625, 0.9507143064099162, 0.7319939418114051]
        );
        assert_eq!(
            r.1,
            [-1.1118801180469204, 0.31890218468938336, 0.2790412922001377]
        );
        assert_eq!(r.2, [7, 2, 5, 4, 1]);
        assert_eq!(r.3, [8, 2, 9, 6, 0, 4, 3, 1, 5, 7]);
        assert_eq!(r.4, [-0.9858673895605652, -0.9538751499171685]);
        let mut rs = RandomState::from_key(&[1, 2, 3]).unwrap();
        assert_eq!(rs.random_sample_one(), 0.6098612722867289);
    }

    #[test]
    fn errors() {
        let mut rs = RandomState::new(0);
        assert!(rs.randint_i64(5, 5, &mut [0]).is_err());
        assert!(rs.choice(0, 1, true, None).is_err());
        assert!(rs.choice(3, 4, false, None).is_err());
        assert!(rs.choice(2, 1, true, Some(&[0.5, 0.6])).is_err());
        assert!(rs.choice(2, 1, true, Some(&[-0.5, 1.5])).is_err());
        assert!(rs.choice(2, 1, true, Some(&[f64::NAN, 1.0])).is_err());
        assert!(rs.choice(2, 1, true, Some(&[1.0])).is_err());
        assert!(RandomState::from_u64(1 << 32).is_err());
        assert!(RandomState::from_key(&[]).is_err());
        let mut st = rs.get_state();
        st.pos = 625;
        assert!(rs.set_state(&st).is_err());
        st.key.pop();
        assert!(rs.set_state(&st).is_err());
    }
}
