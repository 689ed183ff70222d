//! NumPy's `np.random.Generator` over `PCG64` (`np.random.default_rng`).

use super::distributions::libm::log1p;
use super::integers::{IntDtype, bounded_fill, broadcast_fill};
use super::ziggurat::{exponential_f32, exponential_f64, next_f32, normal_f32, normal_f64};
use super::{
    BitGenerator, Bits, SeedSequence, bounded32, bounded64, checked_cdf, choice_no_replace_p,
    mask_of, range_i32, range_i64,
};
use crate::engines::Pcg64;
use crate::{Result, invalid};

/// `np.random.Generator(bit_generator)`, bit for bit with NumPy 2.4 (NumPy may change
/// `Generator` streams between feature releases; lockstep follows 2.4). Every sampler draws
/// exactly the outputs NumPy draws, including the buffered 32-bit half, so mixed sequences of
/// calls stay in lockstep. The bit generator is PCG64 (`default_rng`) unless another
/// [`BitGenerator`] is named: `Generator<Sfc64>`, `Generator<Philox>`, `Generator<Pcg64Dxsm>`,
/// `Generator<Mt19937>`.
///
/// [`BitGenerator`]: super::BitGenerator
#[derive(Clone, Debug)]
pub struct Generator<B = Pcg64> {
    bits: B,
    seed_seq: Option<SeedSequence>,
}

/// `np.random.default_rng(seed)` for an integer seed in `[0, 2^128)`.
pub fn default_rng(seed: u128) -> Generator {
    default_rng_from(SeedSequence::from_int(seed))
}

/// `np.random.default_rng(seed_sequence)` (also for list seeds:
/// `SeedSequence::from_ints(&[..])`).
pub fn default_rng_from(seed_seq: SeedSequence) -> Generator {
    Generator {
        bits: seed_seq.pcg64(),
        seed_seq: Some(seed_seq),
    }
}

impl<B: BitGenerator> Generator<B> {
    /// `Generator(B(seed_seq))`: the bit generator seeded from `seed_seq` (kept for
    /// [`spawn`](Self::spawn)).
    pub fn from_seed_seq(seed_seq: SeedSequence) -> Self {
        Self {
            bits: B::from_seed_seq(&seed_seq),
            seed_seq: Some(seed_seq),
        }
    }

    /// `Generator(bit_generator)` for a bit generator built by hand (from a state, jumped,
    /// advanced): no seed sequence, so [`spawn`](Self::spawn) errors, as in NumPy.
    pub fn with_bit_generator(bits: B) -> Self {
        Self {
            bits,
            seed_seq: None,
        }
    }
}

impl Generator {
    /// A generator over an existing PCG64 engine (no seed sequence: [`spawn`](Self::spawn)
    /// then errors, as in NumPy).
    pub fn from_pcg64(bits: Pcg64) -> Self {
        Self {
            bits,
            seed_seq: None,
        }
    }

    /// `np.random.default_rng(seed)` for a `u64`, for a global `seed_everything`.
    pub fn from_u64(seed: u64) -> Self {
        default_rng(seed as u128)
    }
}

impl<B: BitGenerator> Generator<B> {
    /// The bit generator (`rng.bit_generator`), e.g. for its state, `advance` or raw draws.
    pub fn bit_generator(&mut self) -> &mut B {
        &mut self.bits
    }

    /// `rng.spawn(n)`: generators seeded from children of the seed sequence.
    pub fn spawn(&mut self, n: usize) -> Result<Vec<Generator<B>>> {
        let ss = self
            .seed_seq
            .as_mut()
            .ok_or_else(|| invalid("spawn", "self", "this generator has no SeedSequence"))?;
        Ok(ss.spawn(n).into_iter().map(Self::from_seed_seq).collect())
    }

    /// `random(size)`: `(u64 >> 11)·2^-53` per value. Outputs over 65536 values are filled
    /// on the rayon pool (identical values at any thread count).
    pub fn random(&mut self, out: &mut [f64]) {
        // PCG64 fills large outputs in parallel from exact jump-ahead states: same values.
        self.bits.fill_f64(out);
    }

    /// `random(size, dtype=np.float32)`: `(u32 >> 8)·2^-24` per value (32-bit draws).
    pub fn random_f32(&mut self, out: &mut [f32]) {
        for o in out {
            *o = next_f32(&mut self.bits);
        }
    }

    /// `standard_normal(size)`: NumPy's 256-strip ziggurat on 64-bit draws.
    pub fn standard_normal(&mut self, out: &mut [f64]) {
        self.bits.fill_normal(out, None);
    }

    /// `standard_normal(size, dtype=np.float32)`: the float ziggurat on 32-bit draws.
    pub fn standard_normal_f32(&mut self, out: &mut [f32]) {
        for o in out {
            *o = normal_f32(&mut self.bits);
        }
    }

    /// `normal(loc, scale, size)`: `loc + scale·z`; errors if `scale < 0` or NaN.
    pub fn normal(&mut self, loc: f64, scale: f64, out: &mut [f64]) -> Result<()> {
        if !(scale >= 0.0) {
            return Err(invalid(
                "normal",
                "scale",
                format!("must be >= 0, got {scale}"),
            ));
        }
        self.bits.fill_normal(out, Some((loc, scale)));
        Ok(())
    }

    /// `standard_exponential(size)`: NumPy's exponential ziggurat on 64-bit draws.
    pub fn standard_exponential(&mut self, out: &mut [f64]) {
        self.bits.fill_exponential(out, None);
    }

    /// `standard_exponential(size, dtype=np.float32)`: the float ziggurat on 32-bit draws.
    pub fn standard_exponential_f32(&mut self, out: &mut [f32]) {
        for o in out {
            *o = exponential_f32(&mut self.bits);
        }
    }

    /// `exponential(scale, size)`: `scale·standard_exponential`; errors if `scale < 0`.
    pub fn exponential(&mut self, scale: f64, out: &mut [f64]) -> Result<()> {
        if !(scale >= 0.0) {
            return Err(invalid(
                "exponential",
                "scale",
                format!("must be >= 0, got {scale}"),
            ));
        }
        self.bits.fill_exponential(out, Some(scale));
        Ok(())
    }

    /// `standard_gamma(shape, size, dtype=np.float32)`: NumPy's float gamma (float
    /// ziggurats and `logf`/`powf`). Errors if `shape < 0` or NaN.
    pub fn standard_gamma_f32(&mut self, shape: f32, out: &mut [f32]) -> Result<()> {
        if shape.is_nan() || shape.is_sign_negative() {
            return Err(invalid(
                "standard_gamma",
                "shape",
                format!("shape < 0 or NaN (got {shape})"),
            ));
        }
        for o in out {
            *o = super::distributions::std_gamma_f32(&mut self.bits, shape);
        }
        Ok(())
    }

    /// `uniform(low, high, size)`: `low + (high − low)·U53`; errors if `high − low` is
    /// negative, NaN or infinite (NumPy's `Generator` rejects `high < low`, unlike
    /// `RandomState`).
    pub fn uniform(&mut self, low: f64, high: f64, out: &mut [f64]) -> Result<()> {
        let range = high - low;
        if !(range >= 0.0 && range.is_finite()) {
            return Err(invalid(
                "uniform",
                "high",
                format!("high - low must be finite and >= 0 (low = {low}, high = {high})"),
            ));
        }
        self.bits.fill_f64(out);
        for o in out {
            *o = low + range * *o;
        }
        Ok(())
    }

    /// `integers(low, high, size, dtype=np.int64, endpoint)`: Lemire's method (32-bit draws
    /// when the range fits in 32 bits). Errors if the range is empty.
    pub fn integers_i64(
        &mut self,
        low: i64,
        high: i64,
        endpoint: bool,
        out: &mut [i64],
    ) -> Result<()> {
        let rng = range_i64("integers", low, high, endpoint)?;
        for o in out {
            *o = low.wrapping_add(bounded64(&mut self.bits, rng, false) as i64);
        }
        Ok(())
    }

    /// `integers(low, high, size, dtype=np.int32, endpoint)`: bounds as `i64` (so that
    /// `high = 2^31` can be written); errors outside int32 or on an empty range.
    pub fn integers_i32(
        &mut self,
        low: i64,
        high: i64,
        endpoint: bool,
        out: &mut [i32],
    ) -> Result<()> {
        let (low, rng) = range_i32("integers", low, high, endpoint)?;
        for o in out {
            *o = low.wrapping_add(bounded32(&mut self.bits, rng, false) as i32);
        }
        Ok(())
    }

    /// `integers(low, high, size, dtype=T, endpoint)` for every NumPy integer dtype `T`
    /// (`i8` … `u64`, `bool`): Lemire's method in the dtype's width, 8-bit, 16-bit and `bool`
    /// values cut from shared 32-bit draws as NumPy does (see
    /// [`RandomState::randint`](super::RandomState::randint)). Bounds are `i128` so that
    /// `high = 2^64` (uint64) can be written.
    ///
    /// # Errors
    /// If `low` or the largest value asked for is outside `T`'s range, or the range is
    /// empty; nothing is drawn.
    pub fn integers<T: IntDtype>(
        &mut self,
        low: i128,
        high: i128,
        endpoint: bool,
        out: &mut [T],
    ) -> Result<()> {
        bounded_fill(&mut self.bits, "integers", low, high, endpoint, false, out)
    }

    /// `integers(low, high, size, dtype=T, endpoint)` with array bounds (broadcast together
    /// and with `size`), as [`RandomState::randint_array`](super::RandomState::randint_array)
    /// but with Lemire's method. Returns the values (C order) and their shape.
    ///
    /// # Errors
    /// As [`RandomState::randint_array`](super::RandomState::randint_array).
    pub fn integers_array<T: IntDtype>(
        &mut self,
        low: (&[i128], &[usize]),
        high: (&[i128], &[usize]),
        size: Option<&[usize]>,
        endpoint: bool,
    ) -> Result<(Vec<T>, Vec<usize>)> {
        broadcast_fill(&mut self.bits, "integers", low, high, size, endpoint, false)
    }

    /// `standard_exponential(size, method='inv')`: `−log1p(−U)` per value, `U` the bit
    /// generator's `next_double` (the C library's `log1p`, as NumPy calls it).
    pub fn standard_exponential_inv(&mut self, out: &mut [f64]) {
        for o in out {
            *o = -log1p(-self.bits.f64());
        }
    }

    /// `standard_exponential(size, dtype=np.float32, method='inv')`: `−log1p(−U)` in double
    /// precision on a 24-bit float uniform (32-bit draws), rounded to float32, as NumPy
    /// computes it.
    pub fn standard_exponential_inv_f32(&mut self, out: &mut [f32]) {
        for o in out {
            *o = -log1p(-(next_f32(&mut self.bits) as f64)) as f32;
        }
    }

    /// `shuffle(x)` along the first axis (masked rejection, not Lemire, as NumPy does).
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        super::shuffle_slice(&mut self.bits, x);
    }

    /// `permutation(n)`: a shuffled `arange(n)`.
    pub fn permutation(&mut self, n: usize) -> Vec<i64> {
        let mut v: Vec<i64> = (0..n as i64).collect();
        self.shuffle(&mut v);
        v
    }

    /// `choice(pop_size, size, replace, p, shuffle)`: indices into a population of
    /// `pop_size`. Without replacement and `p`, NumPy's tail shuffle (large populations) or
    /// Floyd's algorithm with its hash-set probing order, then an optional shuffle. Errors as
    /// [`RandomState::choice`](super::RandomState::choice).
    pub fn choice(
        &mut self,
        pop_size: usize,
        size: usize,
        replace: bool,
        p: Option<&[f64]>,
        shuffle: bool,
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
                Some(cdf) => (0..size)
                    .map(|_| super::search_right(&cdf, self.bits.f64()))
                    .collect(),
                None => {
                    let rng = pop_size as u64 - 1;
                    (0..size)
                        .map(|_| bounded64(&mut self.bits, rng, false) as usize)
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
        if let Some(p) = p {
            return choice_no_replace_p(OP, || self.bits.f64(), p, size);
        }
        Ok(self.choice_floyd(pop_size, size, shuffle))
    }

    fn lemire_index(&mut self, max: usize) -> usize {
        bounded64(&mut self.bits, max as u64, false) as usize
    }

    fn choice_floyd(&mut self, pop: usize, size: usize, shuffle: bool) -> Vec<usize> {
        let cutoff = if shuffle { 50 } else { 20 };
        if pop > 10_000 && size > pop / cutoff {
            // Partial Fisher–Yates on the tail: cheaper than hashing when size is large.
            let mut idx: Vec<usize> = (0..pop).collect();
            let stop = (pop - size).max(1);
            for i in (stop..pop).rev() {
                let j = self.lemire_index(i);
                idx.swap(i, j);
            }
            return idx.split_off(pop - size);
        }
        const EMPTY: usize = usize::MAX;
        let set_size = (1.2 * size as f64) as u64;
        let mask = mask_of(set_size) as usize;
        let mut table = vec![EMPTY; mask + 1];
        let mut out = Vec::with_capacity(size);
        for j in pop - size..pop {
            let val = self.lemire_index(j);
            let mut loc = val & mask;
            while table[loc] != EMPTY && table[loc] != val {
                loc = (loc + 1) & mask;
            }
            if table[loc] == EMPTY {
                table[loc] = val;
                out.push(val);
            } else {
                loc = j & mask;
                while table[loc] != EMPTY {
                    loc = (loc + 1) & mask;
                }
                table[loc] = j;
                out.push(j);
            }
        }
        if shuffle {
            for i in (1..size).rev() {
                let k = self.lemire_index(i);
                out.swap(i, k);
            }
        }
        out
    }
}

/// 64-bit draws served from blocks made by PCG64's multi-lane fill (several times faster
/// than one serial LCG chain). [`finish`](Block::finish) steps the engine back over the
/// unused draws, so the engine ends exactly where drawing one at a time would leave it.
struct Block<'a> {
    bits: &'a mut Pcg64,
    buf: [u64; 256],
    pos: usize,
}

impl<'a> Block<'a> {
    fn new(bits: &'a mut Pcg64) -> Self {
        Self {
            bits,
            buf: [0; 256],
            pos: 256,
        }
    }

    fn finish(self) {
        let unused = (self.buf.len() - self.pos) as u128;
        self.bits.skip(unused.wrapping_neg());
    }
}

impl Bits for Block<'_> {
    #[inline(always)]
    fn u64(&mut self) -> u64 {
        if self.pos >= self.buf.len() {
            self.bits.fill_u64(&mut self.buf);
            self.pos = 0;
        }
        let v = self.buf[self.pos];
        self.pos += 1;
        v
    }
    #[inline(always)]
    fn u32(&mut self) -> u32 {
        // NumPy's rule: a buffered high half first, else the low half of a fresh output.
        if let Some(h) = self.bits.take_pending() {
            return h;
        }
        let v = self.u64();
        self.bits.set_pending((v >> 32) as u32);
        v as u32
    }
    #[inline(always)]
    fn f64(&mut self) -> f64 {
        ((self.u64() >> 11) as i64) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }
}

impl<B: BitGenerator> super::distributions::sealed::Source for Generator<B> {
    const LEGACY: bool = false;
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
        normal_f64(&mut self.bits)
    }
    fn exp1(&mut self) -> f64 {
        exponential_f64(&mut self.bits)
    }
}

impl<B: BitGenerator> super::distributions::sealed::Blocked for Generator<B> {
    type Block<'a>
        = GenBlock<'a, B>
    where
        B: 'a;
    fn block(&mut self) -> GenBlock<'_, B> {
        GenBlock {
            bits: &mut self.bits,
            buf: [0; GEN_BLOCK],
            pos: GEN_BLOCK,
        }
    }
}

const GEN_BLOCK: usize = 256;

/// The draws of a `Generator` served from blocks of 64-bit outputs made by the bit
/// generator's multi-lane fill where it has one (PCG64; others draw one at a time). On drop
/// the engine steps back over the unused outputs, so it ends exactly where drawing one at a
/// time would leave it.
pub struct GenBlock<'a, B: BitGenerator> {
    bits: &'a mut B,
    buf: [u64; GEN_BLOCK],
    pos: usize,
}

impl<B: BitGenerator> Drop for GenBlock<'_, B> {
    fn drop(&mut self) {
        if B::BLOCKS && self.pos < GEN_BLOCK {
            self.bits.rewind(GEN_BLOCK - self.pos);
        }
    }
}

impl<B: BitGenerator> Bits for GenBlock<'_, B> {
    #[inline(always)]
    fn u64(&mut self) -> u64 {
        if !B::BLOCKS {
            return self.bits.u64();
        }
        if self.pos >= GEN_BLOCK {
            self.bits.fill_raw(&mut self.buf);
            self.pos = 0;
        }
        let v = self.buf[self.pos];
        self.pos += 1;
        v
    }
    #[inline(always)]
    fn u32(&mut self) -> u32 {
        if !B::BLOCKS {
            return self.bits.u32();
        }
        // NumPy's rule: a buffered high half first, else the low half of a fresh output.
        if let Some(h) = self.bits.take_pending() {
            return h;
        }
        let v = self.u64();
        self.bits.set_pending((v >> 32) as u32);
        v as u32
    }
    #[inline(always)]
    fn f64(&mut self) -> f64 {
        if !B::BLOCKS {
            return self.bits.f64();
        }
        ((self.u64() >> 11) as i64) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }
}

impl<B: BitGenerator> super::distributions::sealed::Source for GenBlock<'_, B> {
    const LEGACY: bool = false;
    #[inline(always)]
    fn uniform(&mut self) -> f64 {
        Bits::f64(self)
    }
    #[inline(always)]
    fn word32(&mut self) -> u32 {
        Bits::u32(self)
    }
    #[inline(always)]
    fn word64(&mut self) -> u64 {
        Bits::u64(self)
    }
    #[inline(always)]
    fn gauss(&mut self) -> f64 {
        normal_f64(self)
    }
    #[inline(always)]
    fn exp1(&mut self) -> f64 {
        exponential_f64(self)
    }
    #[inline(always)]
    fn uniforms(&mut self, mut out: &mut [f64]) {
        if !B::BLOCKS {
            out.iter_mut().for_each(|o| *o = self.bits.f64());
            return;
        }
        while !out.is_empty() {
            if self.pos >= GEN_BLOCK {
                self.bits.fill_raw(&mut self.buf);
                self.pos = 0;
            }
            let n = out.len().min(GEN_BLOCK - self.pos);
            let (head, rest) = out.split_at_mut(n);
            for (o, &w) in head.iter_mut().zip(&self.buf[self.pos..self.pos + n]) {
                // `(w >> 11) as f64`, exactly (as two exact halves below 2^52, each converted
                // by the 2^52 trick), so that the loop vectorises without AVX-512DQ.
                const TWO52: f64 = 4_503_599_627_370_496.0;
                let x = w >> 11;
                let hi = f64::from_bits((x >> 26) | TWO52.to_bits()) - TWO52;
                let lo = f64::from_bits((x & ((1 << 26) - 1)) | TWO52.to_bits()) - TWO52;
                *o = (hi * 67_108_864.0 + lo) * (1.0 / 9_007_199_254_740_992.0);
            }
            self.pos += n;
            out = rest;
        }
    }
}

impl<B: BitGenerator> Bits for Generator<B> {
    fn u32(&mut self) -> u32 {
        self.bits.u32()
    }
    fn u64(&mut self) -> u64 {
        self.bits.u64()
    }
    fn f64(&mut self) -> f64 {
        self.bits.f64()
    }
}

impl BitGenerator for Pcg64 {
    const NAME: &'static str = "PCG64";
    fn from_seed_seq(seed_seq: &SeedSequence) -> Self {
        seed_seq.pcg64()
    }
    fn random_raw(&mut self) -> u64 {
        self.next_u64()
    }
    fn fill_f64(&mut self, out: &mut [f64]) {
        self.par_fill_f64(out);
    }
    fn fill_normal(&mut self, out: &mut [f64], loc_scale: Option<(f64, f64)>) {
        let mut b = Block::new(self);
        match loc_scale {
            None => out.iter_mut().for_each(|o| *o = normal_f64(&mut b)),
            Some((loc, scale)) => out
                .iter_mut()
                .for_each(|o| *o = loc + scale * normal_f64(&mut b)),
        }
        b.finish();
    }
    const BLOCKS: bool = true;
    fn fill_raw(&mut self, out: &mut [u64]) {
        self.fill_u64(out);
    }
    fn rewind(&mut self, n: usize) {
        self.skip((n as u128).wrapping_neg());
    }
    fn take_pending(&mut self) -> Option<u32> {
        Pcg64::take_pending(self)
    }
    fn set_pending(&mut self, v: u32) {
        Pcg64::set_pending(self, v);
    }
    fn fill_exponential(&mut self, out: &mut [f64], scale: Option<f64>) {
        let mut b = Block::new(self);
        match scale {
            None => out.iter_mut().for_each(|o| *o = exponential_f64(&mut b)),
            Some(s) => out
                .iter_mut()
                .for_each(|o| *o = s * exponential_f64(&mut b)),
        }
        b.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers() {
        for (seed, r, rf, ints, sn, snf, perm, ch) in [
            (
                0u128,
                [0.6369616873214543, 0.2697867137638703, 0.04097352393619469],
                [
                    0.0752401351928711f32,
                    0.01652759313583374,
                    0.1752672791481018,
                ],
                [8i64, 6, 9, 5, 6],
                [0.9470809631292422, -0.7037352358069926, -1.2654214710460525],
                [
                    -0.328120619058609f32,
                    -0.9709680080413818,
                    1.2655024528503418,
                ],
                [4i64, 9, 6, 2, 5, 1, 3, 7, 0, 8],
                [2usize, 4, 0],
            ),
            (
                42,
                [0.7739560485559633, 0.4388784397520523, 0.8585979199113825],
                [0.08594560623168945, 0.6973680257797241, 0.20146948099136353],
                [0, 5, 9, 7, 7],
                [
                    -0.3162425923435822,
                    -0.016801157504288795,
                    -0.85304392757358,
                ],
                [0.45531418919563293, 0.5972486138343811, 0.3428610861301422],
                [7, 0, 4, 2, 3, 5, 8, 1, 9, 6],
                [8, 4, 0],
            ),
        ] {
            let mut g = default_rng(seed);
            let mut a = [0.0; 3];
            g.random(&mut a);
            assert_eq!(a, r);
            let mut b = [0f32; 3];
            g.random_f32(&mut b);
            assert_eq!(b, rf);
            let mut c = [0i64; 5];
            g.integers_i64(0, 10, false, &mut c).unwrap();
            assert_eq!(c, ints);
            g.standard_normal(&mut a);
            assert_eq!(a, sn);
            g.standard_normal_f32(&mut b);
            assert_eq!(b, snf);
            assert_eq!(g.permutation(10), perm);
            assert_eq!(g.choice(10, 3, false, None, true).unwrap(), ch);
        }
    }

    #[test]
    fn errors() {
        let mut g = default_rng(1);
        assert!(g.integers_i64(3, 3, false, &mut [0]).is_err());
        assert!(g.integers_i64(3, 3, true, &mut [0]).is_ok());
        assert!(g.integers_i32(4, 3, true, &mut [0]).is_err());
        assert!(g.normal(0.0, -1.0, &mut [0.0]).is_err());
        assert!(g.exponential(f64::NAN, &mut [0.0]).is_err());
        assert!(g.uniform(0.0, f64::INFINITY, &mut [0.0]).is_err());
        assert!(g.choice(0, 1, true, None, true).is_err());
        assert!(g.choice(2, 3, false, None, true).is_err());
        assert!(g.choice(3, 3, false, Some(&[0.5, 0.5, 0.0]), true).is_err());
        assert!(g.spawn(2).is_ok());
        assert!(Generator::from_pcg64(Pcg64::new(1, 1)).spawn(1).is_err());
    }
}
